"""``celestial config``: the effective configuration, each value with where it came from.

Two parts: the client's connection (what every other command here would use: flags, then
``CELESTIAL_`` variables, then defaults) and, where the server package is installed, the server's
settings as ``celestial serve`` would build them from the same environment and the serve flags
given to ``config``. Secrets (API keys) are shown only as set or not: the output may be pasted
into an issue.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from celestial_client.cli.output import Answer, table
from celestial_client.cli.settings import REDACTED, Setting, UsageError, client_settings


def server_settings(args: argparse.Namespace) -> list[Setting] | None:
    """Every server setting as serve would see it; None without the server package."""
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
    in_env = {k.upper() for k, v in os.environ.items() if v != ""}
    out = []
    for name in type(settings).model_fields:
        value = getattr(settings, name)
        env = f"CELESTIAL_{name.upper()}"
        source = "flag" if name in overrides else "env" if env in in_env else "default"
        secret = isinstance(value, SecretStr)
        out.append(Setting(name, _plain(value), source, env, secret))
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


def run_config(args: argparse.Namespace) -> Answer:
    client = list(client_settings(args).values())
    server = server_settings(args)
    data = {
        "client": _document(client),
        "server": None if server is None else _document(server),
    }
    text = ["client (this command's connection)", _table(client)]
    if server is None:
        text.append("server: not installed here (pip install 'celestial-memory[server]')")
    else:
        flagged = sum(s.source == "flag" for s in server)
        from_env = sum(s.source == "env" for s in server)
        text += ["", f"server (what celestial serve would use here: {flagged} from flags, "
                     f"{from_env} from the environment, {len(server) - flagged - from_env} "
                     f"defaults)", _table(server)]
    return Answer("\n".join(text), data)


def _document(settings: Sequence[Setting]) -> dict[str, dict[str, object]]:
    return {s.name: {"value": s.shown(), "source": s.source, "env": s.env} for s in settings}


def _table(settings: Sequence[Setting]) -> str:
    def cell(v: object) -> str:
        return "-" if v is None or v == "" else str(v)

    return table(["setting", "value", "source", "env"],
                 [(s.name, cell(s.shown()), s.source, s.env) for s in settings])
