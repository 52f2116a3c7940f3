"""``celestial``: serve, store, recall, get, update, delete, restore, archived, relate, related,
entities, stats, rebalance, consolidate, ledger, export, import, eval.

Every command but ``serve`` needs only the client; ``serve`` needs the server extra
(``pip install 'celestial-memory[server]'``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from celestial_client.cli_commands import run_command, run_eval, run_mcp
from celestial_client.cli_output import (
    as_json,
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
from celestial_client.cli_reflect import add_reflect_command, run_reflect
from celestial_client.client import CelestialClient
from celestial_client.connection import TLS
from celestial_client.errors import CelestialClientError

# The formatters stay importable from here, where they were first.
__all__ = [
    "SERVER_COMMANDS",
    "as_json",
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


# Commands the server package provides: help, module, the function adding its arguments, and
# the one running it.
SERVER_COMMANDS = {
    "serve": ("run the server", "celestial_memory.main", "add_serve_arguments", "serve_main"),
    "keys": ("manage the server's API keys (create, list, revoke)",
             "celestial_memory.access.keys_cli", "add_keys_arguments", "keys_main"),
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="celestial", description=__doc__.splitlines()[0])
    p.add_argument("--target", default=os.environ.get("CELESTIAL_TARGET", "localhost:50051"),
                   help="server host:port (CELESTIAL_TARGET)")
    p.add_argument("--tenant", default=os.environ.get("CELESTIAL_TENANT", ""))
    p.add_argument("--api-key", default=os.environ.get("CELESTIAL_API_KEY"),
                   help="API key (CELESTIAL_API_KEY)")
    p.add_argument("--tls-ca", default=os.environ.get("CELESTIAL_TLS_CA"),
                   help="connect with TLS; the CA of the server's certificate (CELESTIAL_TLS_CA)")
    p.add_argument("--tls-cert", default=os.environ.get("CELESTIAL_TLS_CLIENT_CERT"),
                   help="client certificate, for mTLS (CELESTIAL_TLS_CLIENT_CERT)")
    p.add_argument("--tls-key", default=os.environ.get("CELESTIAL_TLS_CLIENT_KEY"),
                   help="client certificate's key (CELESTIAL_TLS_CLIENT_KEY)")
    sub = p.add_subparsers(dest="command", required=True)

    # The server's own commands; on a client-only install they explain themselves when run.
    for name, (help_text, module, adder, _) in SERVER_COMMANDS.items():
        command = sub.add_parser(name, help=help_text)
        with contextlib.suppress(ImportError):
            getattr(importlib.import_module(module), adder)(command)

    add_reflect_command(sub)
    s = sub.add_parser("store", help="store a memory")
    s.add_argument("content")
    s.add_argument("--importance", type=float)
    s.add_argument("--tag", action="append", default=[], dest="tags")
    s.add_argument("--session")
    s.add_argument("--agent")
    s.add_argument("--meta", action="append", default=[], help="key=value")
    s.add_argument("--pinned", action="store_true")

    r = sub.add_parser("recall", help="recall memories by meaning")
    r.add_argument("query")
    r.add_argument("--limit", type=int, default=5)
    r.add_argument("--zone", action="append", default=[], dest="zones")
    r.add_argument("--tag", action="append", default=[], dest="tags_any")
    r.add_argument("--no-reinforce", action="store_true")
    r.add_argument("--context", default="")
    r.add_argument("--archived", action="store_true",
                   help="search the archive (forgotten memories) too")

    sub.add_parser("restore", help="bring an archived memory back").add_argument("id")
    ar = sub.add_parser("archived", help="the archive's newest memories (forgotten ones)")
    ar.add_argument("--limit", type=int, default=20)

    for name in ("get", "delete"):
        g = sub.add_parser(name, help=f"{name} a memory by id")
        g.add_argument("id")

    json_help = "print one JSON document instead of lines"
    rl = sub.add_parser("relate", help="relate two memories: a named, weighted edge FROM -> TO "
                                       "(relating them again sets the weight)")
    rl.add_argument("from_id", metavar="FROM", help="the memory the relation starts at")
    rl.add_argument("to_id", metavar="TO", help="the memory it points to")
    rl.add_argument("relation", metavar="RELATION",
                    help="its name: lower-case letters, digits, '_' or '-' (e.g. about)")
    rl.add_argument("--weight", type=float, help="0 to 1 (default 1)")
    rl.add_argument("--json", action="store_true", help=json_help)
    rd = sub.add_parser("related", help="the memories reached from a memory along relations "
                                        "(either direction), nearest first, with their paths")
    rd.add_argument("id", metavar="ID", help="the memory the walk starts at")
    rd.add_argument("--depth", type=int, choices=[1, 2, 3], default=1, help="steps (default 1)")
    rd.add_argument("--relation", action="append", default=[], dest="relations", metavar="R",
                    help="follow only this relation (repeat for more; default: all)")
    rd.add_argument("--json", action="store_true", help=json_help)
    en = sub.add_parser("entities", help="the entities the memories mention, most mentioned "
                                         "first; or one entity's profile")
    en.add_argument("entity", nargs="?", metavar="ENTITY",
                    help="an entity id <kind>:<key> (e.g. name:caroline): its profile")
    en.add_argument("--json", action="store_true", help=json_help)

    u = sub.add_parser("update", help="change a memory")
    u.add_argument("id")
    u.add_argument("--content")
    u.add_argument("--importance", type=float)
    u.add_argument("--tag", action="append", dest="tags")
    u.add_argument("--pin", action="store_true")
    u.add_argument("--unpin", action="store_true")

    sub.add_parser("stats", help="per-zone counts")
    rb = sub.add_parser("rebalance", help="re-place memories now")
    rb.add_argument("--dry-run", action="store_true")
    rb.add_argument("--full", action="store_true", help="rescore every memory (a scan)")

    co = sub.add_parser("consolidate", help="merge repeats stored before (dry run unless --apply)")
    co.add_argument("--apply", action="store_true", help="write the merges")

    ex = sub.add_parser("export", help="write the tenant's memories with vectors to a file")
    ex.add_argument("file", type=Path)
    ex.add_argument("--resume", action="store_true", help="continue a broken export of FILE")
    im = sub.add_parser("import", help="write memories from an export file into the tenant")
    im.add_argument("file", type=Path)
    im.add_argument("--skip", type=int, default=0, help="skip the first N records (resume)")
    im.add_argument("--replace", action="store_true",
                    help="overwrite memories the tenant already holds (default: leave them)")

    ev = sub.add_parser("eval", help="recall-quality benchmarks against a running server")
    ev.add_argument("benchmark", choices=["locomo"])
    ev.add_argument("path", type=Path, help="a LoCoMo JSON file or a folder of them")
    ev.add_argument("--k", type=int, nargs="+", default=[5, 10])

    mc = sub.add_parser("mcp", help="serve the memory's tools to an MCP host (needs the mcp extra)")
    mc.add_argument("--transport", choices=["stdio", "http"], default="stdio",
                    help="stdio (an MCP host starts this command) or streamable HTTP")
    mc.add_argument("--host", default="127.0.0.1", help="HTTP: the address to listen on")
    mc.add_argument("--port", type=int, default=8765, help="HTTP: the port (path /mcp)")
    mc.add_argument("--allow-remote", action="store_true",
                    help="HTTP: allow a non-loopback address (MCP has no authentication here)")
    mc.add_argument("--print-tools", action="store_true",
                    help="print the tools' names and schemas as JSON and exit")

    lg = sub.add_parser("ledger", help="evictions, archived, restored, purged and deleted "
                                       "memories, oldest first")
    lg.add_argument("--limit", type=int, default=50)
    lg.add_argument("--memory", default="", help="only this memory id")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command in SERVER_COMMANDS:
        _, module, _, runner = SERVER_COMMANDS[args.command]
        try:
            run = getattr(importlib.import_module(module), runner)
        except ImportError:
            print(f"{args.command} needs the server: pip install 'celestial-memory[server]'",
                  file=sys.stderr)
            return 2
        return int(run(args))
    if args.command == "eval":
        return run_eval(args)
    tls = TLS.from_files(args.tls_ca, args.tls_cert, args.tls_key) if args.tls_ca else None
    with CelestialClient(args.target, tenant=args.tenant, api_key=args.api_key,
                         tls=tls) as client:
        if args.command == "mcp":
            return run_mcp(args, client)
        try:
            print(run_reflect(args, client) if args.command == "reflect"
                  else run_command(args, client))
        except CelestialClientError as err:
            print(f"error ({err.code.name}): {err.details}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
