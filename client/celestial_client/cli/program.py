"""``celestial``: the command line (arguments in parser.py, commands in commands.py,
transfer.py and config.py, output in output.py).

Every command but ``serve`` and ``keys`` needs only the client; those two need the server extra
(``pip install 'celestial-memory[server]'``). Exit statuses are for scripts (``EXIT``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence

import grpc

from celestial_client.cli.commands import run_command
from celestial_client.cli.config import run_config
from celestial_client.cli.exits import EXIT, exit_status
from celestial_client.cli.feedback import COMMANDS as FEEDBACK_COMMANDS
from celestial_client.cli.feedback import run_feedback
from celestial_client.cli.output import (
    Answer,
    as_json,
    printable,
    show_entities,
    show_entity,
    show_ledger,
    show_memory,
    show_recall,
    show_related,
    show_relation,
    show_stats,
    table,
)
from celestial_client.cli.parser import SERVER_COMMANDS, asks_for_json, build
from celestial_client.cli.policy import COMMANDS as POLICY_COMMANDS
from celestial_client.cli.policy import run_policy
from celestial_client.cli.recording import RecordingClient
from celestial_client.cli.reflect import COMMANDS as REFLECT_COMMANDS
from celestial_client.cli.reflect import run_reflect
from celestial_client.cli.settings import UsageError, api_key, client_settings, tls
from celestial_client.cli.transfer import export, import_, run_eval, run_mcp
from celestial_client.client import CelestialClient
from celestial_client.connection import RetryPolicy
from celestial_client.errors import CelestialClientError

# The formatters and exit statuses stay importable from here, where they were first.
__all__ = [
    "EXIT",
    "SERVER_COMMANDS",
    "as_json",
    "exit_status",
    "main",
    "show_entities",
    "show_entity",
    "show_ledger",
    "show_memory",
    "show_recall",
    "show_related",
    "show_relation",
    "show_stats",
    "table",
]

# Tries 50 and 100 ms apart: gRPC does not connect again within them, so a refused connection
# is reported at once; an UNAVAILABLE the server answers is still tried again.
ONE_COMMAND_RETRY = RetryPolicy(max_attempts=3, initial_backoff_s=0.05)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    json_errors = asks_for_json(argv)
    try:
        args = build(json_errors).parse_args(argv)
    except UsageError as err:  # raised only with --json; otherwise argparse prints and exits 2
        return _fail(True, "USAGE", str(err), EXIT["usage"])
    as_json_out = bool(getattr(args, "json", False))
    try:
        return _run(args)
    except UsageError as err:
        return _fail(as_json_out, "USAGE", str(err), EXIT["usage"])
    except CelestialClientError as err:
        return _fail(as_json_out, err.code.name, _hint(err, args), exit_status(err))
    except KeyboardInterrupt:
        return EXIT["interrupted"]
    except BrokenPipeError:
        # The reader left (``celestial list | head``): no traceback. Point stdout at devnull so
        # that the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader left


def _run(args: argparse.Namespace) -> int:
    if args.command in SERVER_COMMANDS:
        _, module, _, runner = SERVER_COMMANDS[args.command]
        try:
            run = getattr(importlib.import_module(module), runner)
        except ImportError:
            raise UsageError(f"{args.command} needs the server: "
                             "pip install 'celestial-memory[server]'") from None
        if args.command == "serve" and args.json:
            os.environ["CELESTIAL_LOG_FORMAT"] = "json"
        return int(run(args))
    if args.command == "config":  # asks the running server too, as a short command does
        return _print(args, run_config(args, ONE_COMMAND_RETRY))
    settings = client_settings(args)
    target = str(settings["target"].value)
    if args.command == "eval":
        return _print(args, run_eval(args, target))
    # One short command at a prompt: a server that is not there is said at once, not after the
    # library's second of backoff. What lives long (the MCP server, a reflection followed to its
    # end, a transfer) keeps the library's retries, which wait out a server's restart.
    long_lived = args.command in ("mcp", "export", "import") or args.command in REFLECT_COMMANDS
    retry = RetryPolicy() if long_lived else ONE_COMMAND_RETRY
    options = {"tenant": str(settings["tenant"].value), "api_key": api_key(settings),
               "tls": tls(settings), "retry": retry}
    if args.command == "mcp":  # serves until stopped: keeps no responses
        with CelestialClient(target, **options) as plain:  # type: ignore[arg-type]
            return run_mcp(args, plain, target)
    # The others keep what the service answered, which --json prints as the contract's JSON.
    with RecordingClient(target, **options) as client:
        if args.command == "export":
            return _print(args, export(args, client))
        if args.command == "import":
            return _print(args, import_(args, client))
        if args.command in FEEDBACK_COMMANDS:
            return _print(args, run_feedback(args, client))
        if args.command in REFLECT_COMMANDS:
            return _print(args, run_reflect(args, client))
        if args.command in POLICY_COMMANDS:
            return _print(args, run_policy(args, client))
        return _print(args, run_command(args, client))


def _print(args: argparse.Namespace, answer: Answer) -> int:
    # --json escapes every control character itself; text shows stored content, so it is made
    # printable here, the one place all command output passes.
    print(as_json(answer.data) if args.json else printable(answer.text), flush=True)
    return answer.status


def _hint(err: CelestialClientError, args: argparse.Namespace) -> str:
    """The service's message, and for an unreachable server where this command looked and how
    to start one. The server names a reason in every error it sends (its store or model being
    unavailable among them): without one, no server answered."""
    if err.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED) and \
            err.reason is None:
        target = client_settings(args)["target"]
        return (f"{err.details} (target {target.value}, from {target.source}: is the server "
                "running? start one with `make run` or `celestial serve`; else set --target or "
                "CELESTIAL_TARGET; a TLS server needs --tls-ca)")
    return err.details


def _fail(as_json_out: bool, code: str, message: str, status: int) -> int:
    if as_json_out:
        print(json.dumps({"error": {"code": code, "message": message, "exit": status}}),
              file=sys.stderr)
    else:
        print(printable(f"error ({code}): {message}"), file=sys.stderr)
    return status

