"""``celestial config``: the effective configuration, each value with where it came from.

Three parts. The client's connection (what every other command here would use: flags, then
``CELESTIAL_`` variables, then defaults). Where the server package is installed, what
``celestial serve`` would use here, built from this environment and the serve flags given to
``config``: not the running server's settings, which another environment started. And the
running server's own settings, asked of the server at the client's target (GetConfig, which
needs an admin key for every tenant), each with where its value came from when that server
started; a server that cannot be reached, or a key that may not ask, is said in one line, and
the other parts are printed all the same. Secrets (API keys) are shown only as set or not: the
output may be pasted into an issue.
"""

from __future__ import annotations

import argparse
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc

from celestial_client._core.contract_json import to_dict
from celestial_client._core.convert import server_config
from celestial_client.cli.output import Answer, table
from celestial_client.cli.recording import RecordingClient
from celestial_client.cli.settings import (
    REDACTED,
    Setting,
    UsageError,
    api_key,
    client_settings,
    tls,
)
from celestial_client.connection import RetryPolicy
from celestial_client.errors import CelestialClientError
from celestial_client.v1 import memory_pb2 as pb

# How long the running server has to answer: it reads settings it holds, so a server that takes
# longer is not going to answer a diagnostic at all.
ASK_S = 10.0


def server_settings(args: argparse.Namespace) -> list[Setting] | None:
    """Every server setting as serve would see it here; None without the server package."""
    try:
        from celestial_memory.config import Settings
        from celestial_memory.main import serve_overrides
        from pydantic import SecretStr, ValidationError
    except ImportError:
        return None
    overrides = serve_overrides(args)
    try:
        settings = Settings(**overrides)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors())
        raise UsageError(f"the server's settings are invalid: {problems}") from None
    out = []
    for name, field in type(settings).model_fields.items():
        value = getattr(settings, name)
        secret = field.annotation is SecretStr or SecretStr in typing.get_args(field.annotation)
        out.append(Setting(name, _plain(value), settings.source(name), settings.env_name(name),
                           secret))
    return out


def _plain(value: Any) -> object:
    """A value JSON can hold (a secret keeps only whether it is set)."""
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if type(value).__name__ == "SecretStr":
        return REDACTED if value.get_secret_value() else ""
    return str(value)


def running_server(client: dict[str, Setting], retry: RetryPolicy | None
                   ) -> tuple[pb.GetConfigResponse | None, dict[str, str] | None]:
    """The running server's GetConfig answer, or why there is none (a code and a message)."""
    try:
        options: dict[str, Any] = {"tenant": str(client["tenant"].value),
                                   "api_key": api_key(client), "tls": tls(client),
                                   "retry": retry, "timeout": ASK_S}
    except UsageError as err:  # an unreadable key or TLS file: no call can be made
        return None, {"code": "USAGE", "message": str(err)}
    try:
        with RecordingClient(str(client["target"].value), **options) as c:
            c.server_config()
            answer = c.answer()
    except CelestialClientError as err:
        return None, {"code": err.code.name, "message": err.details}
    assert isinstance(answer, pb.GetConfigResponse)
    return answer, None


def run_config(args: argparse.Namespace, retry: RetryPolicy | None = None) -> Answer:
    client = client_settings(args)
    serve = server_settings(args)
    target = str(client["target"].value)
    answer, problem = running_server(client, retry)
    running = None if answer is None else _running(answer)
    data = {
        "client": _document(list(client.values())),
        "serve": None if serve is None else _document(serve),
        # The running server's answer, as the contract's JSON mapping (the HTTP port's).
        "server": None if answer is None else to_dict(answer),
        "server_error": problem,
    }
    text = ["client (this command's connection)", _table(list(client.values())), ""]
    if serve is None:
        text.append("serve: not installed here (pip install 'celestial-memory[server]')")
    else:
        text += [f"serve (what `celestial serve` would use here, not the running server: "
                 f"{_counted(serve)})", _table(serve)]
    text.append("")
    if running is None:
        assert problem is not None
        text.append(f"server (running at {target}): {_why(problem)}")
    else:
        text += [f"server (running at {target}: {_counted(running)})", _table(running)]
    return Answer("\n".join(text), data)


def _running(answer: pb.GetConfigResponse) -> list[Setting]:
    return [Setting(s.name, s.value, s.source, s.env, s.secret)
            for s in server_config(answer).values()]


def _why(problem: dict[str, str]) -> str:
    """Why the running server's settings are not shown, in one line."""
    code, message = problem["code"], problem["message"]
    if code in (grpc.StatusCode.UNAVAILABLE.name, grpc.StatusCode.DEADLINE_EXCEEDED.name):
        return f"not reached ({code}: {message}); is it running? --target or CELESTIAL_TARGET"
    if code in (grpc.StatusCode.PERMISSION_DENIED.name, grpc.StatusCode.UNAUTHENTICATED.name):
        return (f"not shown ({code}: {message}); it shows them to an admin key for every "
                "tenant")
    if code == grpc.StatusCode.UNIMPLEMENTED.name:
        return f"not shown ({code}: {message}); a server older than GetConfig"
    return f"not shown ({code}: {message})"


def _counted(settings: Sequence[Setting]) -> str:
    flagged = sum(s.source == "flag" for s in settings)
    from_env = sum(s.source == "env" for s in settings)
    return (f"{flagged} from flags, {from_env} from the environment, "
            f"{len(settings) - flagged - from_env} defaults")


def _document(settings: Sequence[Setting]) -> dict[str, dict[str, object]]:
    return {s.name: {"value": s.shown(), "source": s.source, "env": s.env} for s in settings}


def _table(settings: Sequence[Setting]) -> str:
    def cell(v: object) -> str:
        return "-" if v is None or v == "" else str(v)

    return table(["setting", "value", "source", "env"],
                 [(s.name, cell(s.shown()), s.source, s.env) for s in settings])

