"""``celestial``'s arguments, without a server: help everywhere, --json everywhere, the
connection flags on either side of the command, the exit statuses."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest
from celestial_client.cli import EXIT, exit_status, main
from celestial_client.cli.parser import DESCRIPTION, asks_for_json, build
from celestial_client.cli.settings import api_key, client_settings
from celestial_client.errors import CelestialClientError

ROOT = Path(__file__).resolve().parents[2]


def _commands(p: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every command and sub-command (``keys list``), by its full name."""
    out = {}
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out[prefix + name] = sub
                out.update(_commands(sub, prefix + name + " "))
    return out


def test_every_flag_and_argument_of_every_command_has_help() -> None:
    parser = build()
    missing = [
        f"{name}: {a.option_strings or a.dest}"
        for name, p in {"celestial": parser, **_commands(parser)}.items()
        for a in p._actions
        if not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)
        and (not a.help or a.help == argparse.SUPPRESS)
    ]
    assert missing == []


def test_every_command_takes_json() -> None:
    commands = _commands(build())
    # keys only groups its sub-commands; each of them takes --json.
    lacking = [name for name, p in commands.items() if name != "keys"
               and not any("--json" in a.option_strings for a in p._actions)]
    assert lacking == []
    assert {"list", "recent", "unrelate", "config"} <= set(commands)


def test_the_description_names_every_command_in_full() -> None:
    parser = build()
    shown = parser.format_help().split("\n\n")[1]  # after the usage
    assert " ".join(shown.split()) == " ".join(DESCRIPTION.split())
    described = " ".join(DESCRIPTION.split())
    missing = [c for c in _commands(parser) if " " not in c and c not in described]
    assert missing == []


def test_connection_flags_go_before_or_after_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CELESTIAL_TARGET", raising=False)
    p = build()
    before = p.parse_args(["--target", "h:1", "--json", "stats"])
    after = p.parse_args(["stats", "--target", "h:1", "--json"])
    neither = p.parse_args(["--tenant", "t", "mcp"])
    assert before.target == after.target == "h:1" and before.json and after.json
    s = client_settings(neither)
    assert (s["target"].value, s["target"].source) == ("localhost:50051", "default")
    assert (s["tenant"].value, s["tenant"].source) == ("t", "flag")
    monkeypatch.setenv("CELESTIAL_TARGET", "env:2")
    assert client_settings(p.parse_args(["mcp"]))["target"].source == "env"
    assert client_settings(p.parse_args(["mcp", "--target", "f:3"]))["target"].value == "f:3"


def test_the_api_key_file_and_its_precedence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CELESTIAL_API_KEY", raising=False)
    key_file = tmp_path / "key"
    key_file.write_text("cm_from_file\n")
    p = build()
    assert api_key(client_settings(p.parse_args(["mcp", "--api-key-file", str(key_file)]))) == (
        "cm_from_file")
    monkeypatch.setenv("CELESTIAL_API_KEY", "cm_from_env")
    # A flag wins over the environment, whichever of the two the flag is.
    assert api_key(client_settings(p.parse_args(["--api-key-file", str(key_file), "mcp"]))) == (
        "cm_from_file")
    assert api_key(client_settings(p.parse_args(["stats"]))) == "cm_from_env"
    assert api_key(client_settings(p.parse_args(["--api-key", "cm_flag", "stats"]))) == "cm_flag"


def test_a_missing_key_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--api-key-file", str(tmp_path / "absent"), "--json", "stats"])
    assert code == EXIT["usage"] == 2
    err = capsys.readouterr().err
    assert json.loads(err)["error"]["code"] == "USAGE" and "absent" in err


def test_status_codes_map_to_documented_exit_statuses() -> None:
    def status(code: grpc.StatusCode) -> int:
        return exit_status(CelestialClientError("x", code))

    assert status(grpc.StatusCode.NOT_FOUND) == 3
    assert status(grpc.StatusCode.UNAVAILABLE) == status(grpc.StatusCode.DEADLINE_EXCEEDED) == 4
    assert status(grpc.StatusCode.UNAUTHENTICATED) == status(grpc.StatusCode.PERMISSION_DENIED) == 5
    assert status(grpc.StatusCode.INVALID_ARGUMENT) == status(grpc.StatusCode.ALREADY_EXISTS) == 1
    doc = (ROOT / "docs" / "cli.md").read_text()
    for name, value in EXIT.items():
        assert f"| {value} |" in doc, name  # each documented in the exit-status table


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "client"), str(ROOT / "server"), str(ROOT)]), "HF_HUB_OFFLINE": "1"}


def test_print_tools_into_a_closed_pipe_ends_without_a_traceback() -> None:
    read, write = os.pipe()
    os.close(read)  # the reader left before anything was written (| head, at its fastest)
    try:
        done = subprocess.run([sys.executable, "-m", "celestial_client.cli", "mcp",
                               "--print-tools"], stdout=write, stderr=subprocess.PIPE,
                              env=_env(), timeout=120)
    finally:
        os.close(write)
    assert done.stderr.decode() == ""
    assert done.returncode == 141


def test_print_tools_piped_into_head() -> None:
    done = subprocess.run(f"'{sys.executable}' -m celestial_client.cli mcp --print-tools | head -2",
                          shell=True, capture_output=True, env=_env(), timeout=120)
    assert done.stdout.decode().splitlines() == ["[", "  {"]
    assert done.stderr.decode() == ""


def test_an_unreachable_server_exits_4_and_names_the_target(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--target", "127.0.0.1:1", "get", "some-id"]) == 4
    err = capsys.readouterr().err
    assert err.startswith("error (UNAVAILABLE)") and "target 127.0.0.1:1, from flag" in err
    assert "`make run` or `celestial serve`" in err


def test_one_command_retries_briefly_not_with_the_librarys_backoff(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from celestial_client.cli import program
    from celestial_client.cli.recording import RecordingClient
    from celestial_client.connection import RetryPolicy

    seen: list[RetryPolicy | None] = []

    class Client(RecordingClient):
        def __init__(self, *args: Any, retry: RetryPolicy | None = None, **kw: Any) -> None:
            seen.append(retry)
            super().__init__(*args, retry=retry, **kw)

    monkeypatch.setattr(program, "RecordingClient", Client)
    assert main(["--target", "127.0.0.1:1", "get", "some-id"]) == 4
    # A refused connection is said after about 0.15 s of backoff, not the library's 1.4 s.
    assert seen == [program.ONE_COMMAND_RETRY]
    policy = seen[0]
    assert policy is not None and policy.max_attempts == 3
    assert policy.initial_backoff_s * (1 + policy.multiplier) < 0.2
    # A reflection followed to its end waits out a restart with the library's retries.
    assert main(["--target", "127.0.0.1:1", "operation", "get", "some-op"]) == 4
    assert seen[1] == RetryPolicy()


def test_a_server_that_answers_unavailable_gets_no_start_hint(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The server answered (its store is down, a reason says so): it is running already.
    def stats(self: object) -> None:
        raise CelestialClientError("the vector store is unavailable",
                                   grpc.StatusCode.UNAVAILABLE, reason="STORE_UNAVAILABLE")

    monkeypatch.setattr("celestial_client.client.CelestialClient.stats", stats)
    assert main(["--target", "127.0.0.1:1", "stats"]) == 4
    err = capsys.readouterr().err
    assert "vector store is unavailable" in err and "make run" not in err


def test_json_anywhere_before_a_double_dash_asks_for_json() -> None:
    assert asks_for_json(["--json", "recall"]) and asks_for_json(["stats", "--json"])
    assert not asks_for_json(["store", "--", "--json"])  # the text "--json"
    assert not asks_for_json(["recall"])


def test_json_usage_errors_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["recall", "--json"]) == EXIT["usage"]
    printed = capsys.readouterr()
    assert printed.out == ""
    assert json.loads(printed.err) == {"error": {
        "code": "USAGE", "exit": 2,
        "message": "celestial recall: the following arguments are required: query "
                   "(see celestial recall --help)"}}


def test_bad_usage_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["list", "--limit", "0"], ["recent", "--limit", "x"], ["no-such-command"]):
        with pytest.raises(SystemExit) as done:
            main(argv)
        assert done.value.code == EXIT["usage"]
    assert "at least 1" in capsys.readouterr().err
