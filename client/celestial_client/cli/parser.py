"""``celestial``'s arguments: every command and flag, with its help.

The connection flags (``--target``, ``--tenant``, the key and TLS files) and ``--json`` are
accepted before the command or after it (``celestial recall coffee --json``,
``celestial mcp --target host:50052``): an MCP host's command line lists them wherever it likes.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NoReturn

from celestial_client.cli.feedback import add_feedback_command
from celestial_client.cli.policy import add_policy_commands
from celestial_client.cli.reflect import add_reflect_command
from celestial_client.cli.settings import UsageError
from celestial_client.types import MEMORY_TYPES

DESCRIPTION = """\
Celestial Memory from the command line: store and recall memories; browse them (list, recent,
get, archived); edit them (update, delete, restore, feedback); let the turn policy decide what
to keep of a conversation (observe, policy); connect them (relate, unrelate, related, entities);
reflect on them with the server's model (reflect, and follow its operation:
operation); look after the zones
(stats, rebalance, consolidate, ledger); move them between servers (export, import); measure
recall (eval); serve the tools to an MCP host (mcp); show the configuration, the running server's
too (config);
run the server (serve, keys).
"""

EPILOG = """\
exit status: 0 done; 1 the service refused the request (bad argument, failed precondition, ...);
2 bad usage (arguments, a missing file or extra); 3 not found; 4 the server cannot be reached
(unavailable, deadline exceeded); 5 not authenticated or not allowed; 130 interrupted.
Every command takes --json: one JSON document on stdout (errors too, as {"error": ...}, on
stderr). See docs/cli.md.
"""

# Commands the server package provides: help, module, the function adding its arguments, and
# the one running it.
SERVER_COMMANDS = {
    "serve": ("run the server", "celestial_memory.main", "add_serve_arguments", "serve_main"),
    "keys": ("manage the server's API keys (create, list, revoke)",
             "celestial_memory.access.keys_cli", "add_keys_arguments", "keys_main"),
}

ZONES = ["core", "inner", "outer", "belt", "cloud"]
JSON_HELP = "print one JSON document instead of text"
CONTENT_LIMIT = ("at most 32,768 characters unless the server's CELESTIAL_MAX_CONTENT_CHARS "
                 "says otherwise")


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors (an unknown flag, a missing argument, a bad choice)
    are raised as UsageError when the command line asked for --json, so that they too print the
    JSON error document; otherwise argparse's own usage text and exit status 2."""

    json_errors = False

    def error(self, message: str) -> NoReturn:
        if self.json_errors:
            raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")
        super().error(message)


def asks_for_json(argv: Sequence[str]) -> bool:
    """Whether ``--json`` is on the command line, anywhere before a ``--`` (after which
    everything is an argument: ``celestial store -- --json`` stores the text "--json")."""
    end = list(argv).index("--") if "--" in argv else len(argv)
    return "--json" in argv[:end]


def positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"want a whole number of at least 1, got {text!r}")
    return n


def _connection(suppress: bool) -> Parser:
    """The flags every client command takes. After the command they default to SUPPRESS, so
    that leaving them out there keeps what was given before it."""
    p = Parser(add_help=False)
    d = argparse.SUPPRESS if suppress else None
    g = p.add_argument_group("connection (flags win over the environment)")
    g.add_argument("--target", default=d, metavar="HOST:PORT",
                   help="the server (CELESTIAL_TARGET; default localhost:50051)")
    g.add_argument("--tenant", default=d,
                   help="the tenant to act in (CELESTIAL_TENANT; default: the key's own)")
    g.add_argument("--api-key", default=d, metavar="KEY",
                   help="API key (CELESTIAL_API_KEY); visible to other users in ps: prefer "
                        "--api-key-file")
    g.add_argument("--api-key-file", default=d, type=Path, metavar="FILE",
                   help="read the API key from FILE's first line (CELESTIAL_API_KEY_FILE)")
    g.add_argument("--tls-ca", default=d, metavar="PEM",
                   help="connect with TLS, trusting this CA (CELESTIAL_TLS_CA)")
    g.add_argument("--tls-cert", default=d, metavar="PEM",
                   help="client certificate, for mTLS (CELESTIAL_TLS_CLIENT_CERT)")
    g.add_argument("--tls-key", default=d, metavar="PEM",
                   help="the client certificate's key (CELESTIAL_TLS_CLIENT_KEY)")
    p.add_argument("--json", action="store_true", default=d, help=JSON_HELP)
    return p


def _filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--zone", action="append", default=[], dest="zones", choices=ZONES,
                   help="only this zone (repeat for several)")
    p.add_argument("--tag", action="append", default=[], dest="tags_any", metavar="TAG",
                   help="only memories with this tag (repeat: any of them)")
    p.add_argument("--session", default="", help="only this session's memories")
    p.add_argument("--agent", default="", help="only this agent's memories")
    p.add_argument("--archived", action="store_true",
                   help="the archive's (forgotten) memories instead of the zones'")


def build(json_errors: bool = False) -> argparse.ArgumentParser:
    """The parser; ``json_errors``: raise usage errors as UsageError (Parser) instead of
    printing them."""
    p = Parser(
        prog="celestial", description=DESCRIPTION, epilog=EPILOG, parents=[_connection(False)],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = [_connection(True)]

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_text, description=help_text, parents=common)

    # The server's own commands; on a client-only install they explain themselves when run.
    for name, (help_text, module, adder, _) in SERVER_COMMANDS.items():
        server = sub.add_parser(name, help=help_text, description=help_text)
        if name == "serve":
            server.add_argument("--json", action="store_true",
                                help="log JSON lines (as CELESTIAL_LOG_FORMAT=json)")
        with contextlib.suppress(ImportError):
            getattr(importlib.import_module(module), adder)(server)

    s = command("store", "store a memory")
    s.add_argument("content", nargs="?", metavar="TEXT",
                   help=f"the text to remember; - reads it from stdin ({CONTENT_LIMIT})")
    s.add_argument("--file", type=Path, metavar="FILE",
                   help="read the text from FILE (UTF-8; - for stdin) instead of TEXT")
    s.add_argument("--importance", type=float, help="0 to 1 (default: the server's rules)")
    s.add_argument("--tag", action="append", default=[], dest="tags", help="a label (repeat)")
    s.add_argument("--session", help="the conversation or session it came from")
    s.add_argument("--agent", help="the agent storing it")
    s.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE",
                   help="metadata (repeat)")
    s.add_argument("--pinned", action="store_true", help="never decays out of its zone")
    s.add_argument("--type", choices=MEMORY_TYPES, help="what it is (default: episode)")
    s.add_argument("--immutable", action="store_true",
                   help="never updated, merged into or forgotten; only an admin key deletes it")

    r = command("recall", "recall memories by meaning (reinforces what it returns)")
    r.add_argument("query", help="what to look for, in words")
    r.add_argument("--limit", type=positive, default=5, help="at most this many (default 5)")
    r.add_argument("--zone", action="append", default=[], dest="zones", choices=ZONES,
                   help="search only this zone (repeat for several)")
    r.add_argument("--tag", action="append", default=[], dest="tags_any", metavar="TAG",
                   help="only memories with this tag (repeat: any of them)")
    r.add_argument("--no-reinforce", action="store_true",
                   help="a read-only look: count no recall, move nothing")
    r.add_argument("--context", default="",
                   help="the conversation now: lifts the memories it matches (score C)")
    r.add_argument("--type", action="append", default=[], dest="types", choices=MEMORY_TYPES,
                   help="only memories of this type (repeat: any of them)")
    r.add_argument("--archived", action="store_true",
                   help="search the archive (forgotten memories) too")
    r.add_argument("--session", default="", help="only this session's memories")
    r.add_argument("--agent", default="", help="only this agent's memories")
    r.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE",
                   help="only memories with this metadata (repeat: all of them)")

    ls = command("list", "the memories in id order, a page at a time (filters combine)")
    ls.add_argument("--limit", type=positive, default=50, help="this many (default 50)")
    ls.add_argument("--page-token", default="", metavar="TOKEN",
                    help="continue where a --json answer's next_page_token left off")
    _filters(ls)
    rc = command("recent", "the newest memories first")
    rc.add_argument("--limit", type=positive, default=10, help="this many (default 10)")
    _filters(rc)
    ar = command("archived", "the archive's newest memories (forgotten ones)")
    ar.add_argument("--limit", type=positive, default=20, help="this many (default 20)")

    command("get", "a memory by id, with its next scheduled move").add_argument(
        "id", help="the memory's id")
    command("delete", "delete a memory by id (exit 3 when there is none)").add_argument(
        "id", help="the memory's id")
    command("restore", "bring an archived memory back").add_argument(
        "id", help="the archived memory's id")

    u = command("update", "change a memory (only what is given)")
    u.add_argument("id", help="the memory's id")
    u.add_argument("--content", metavar="TEXT",
                   help="new text (embedded again); - reads it from stdin")
    u.add_argument("--file", type=Path, metavar="FILE",
                   help="read the new text from FILE (UTF-8; - for stdin)")
    u.add_argument("--importance", type=float, help="0 to 1")
    u.add_argument("--tag", action="append", dest="tags",
                   help="replace the tags with these (repeat)")
    pin = u.add_mutually_exclusive_group()
    pin.add_argument("--pin", action="store_true", help="pin it: it no longer decays")
    pin.add_argument("--unpin", action="store_true", help="let it decay again")

    _graph(command)

    command("stats", "per-zone counts and capacities")
    rb = command("rebalance", "re-place memories now")
    rb.add_argument("--dry-run", action="store_true", help="count the moves, make none")
    rb.add_argument("--full", action="store_true", help="rescore every memory (a scan)")
    co = command("consolidate", "merge repeats stored before (dry run unless --apply)")
    co.add_argument("--apply", action="store_true", help="write the merges")
    lg = command("ledger", "evictions, archived, restored, purged and deleted memories, "
                           "oldest first")
    lg.add_argument("--limit", type=positive, default=50, help="this many (default 50)")
    lg.add_argument("--memory", default="", metavar="ID", help="only this memory's events")

    ex = command("export", "write the tenant's memories with vectors to a file")
    ex.add_argument("file", type=Path, help="the file to write")
    ex.add_argument("--resume", action="store_true", help="continue a broken export of FILE")
    im = command("import", "write memories from an export file into the tenant")
    im.add_argument("file", type=Path, help="a file celestial export wrote")
    im.add_argument("--skip", type=int, default=0, help="skip the first N records (resume)")
    im.add_argument("--replace", action="store_true",
                    help="overwrite memories the tenant already holds (default: leave them)")

    ev = command("eval", "recall-quality benchmarks against a running server")
    ev.add_argument("benchmark", choices=["locomo"], help="the benchmark")
    ev.add_argument("path", type=Path, help="a LoCoMo JSON file or a folder of them")
    ev.add_argument("--k", type=int, nargs="+", default=[5, 10],
                    help="the cut-offs to score (default 5 10)")
    ev.add_argument("--policy", action="store_true",
                    help="every turn through the turn policy (Observe) beside storing every "
                         "turn: skip rate, evidence kept, recall of both")

    mc = command("mcp", "serve the memory's tools to an MCP host (needs the mcp extra); "
                        "put --target and --api-key-file in the host's args: hosts do not "
                        "pass the environment through")
    mc.add_argument("--transport", choices=["stdio", "http"], default="stdio",
                    help="stdio (an MCP host starts this command) or streamable HTTP")
    mc.add_argument("--host", default="127.0.0.1", help="HTTP: the address to listen on")
    mc.add_argument("--port", type=int, default=8765, help="HTTP: the port (path /mcp)")
    mc.add_argument("--allow-remote", action="store_true",
                    help="HTTP: allow a non-loopback address (MCP has no authentication here)")
    mc.add_argument("--print-tools", action="store_true",
                    help="print the tools' names and schemas as JSON and exit")

    cf = command("config", "the effective configuration: this client's, what serve would use "
                           "here, and the running server's (an admin key); every value with "
                           "where it came from (flag, env, default); secrets redacted")
    with contextlib.suppress(ImportError):  # the server's flags, to see what serve would use
        importlib.import_module("celestial_memory.main").add_serve_arguments(cf)
    for parser in _every_parser(p):  # sub-commands' parsers report their own usage errors
        if isinstance(parser, Parser):
            parser.json_errors = json_errors
    return p


def _every_parser(p: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield p
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _every_parser(sub)


def _graph(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """relate, unrelate, related and entities."""
    add_feedback_command(command)
    add_policy_commands(command)
    add_reflect_command(command)
    rl = command("relate", "relate two memories: a named, weighted edge FROM -> TO (relating "
                           "them again sets the weight)")
    rl.add_argument("from_id", metavar="FROM", help="the memory the relation starts at")
    rl.add_argument("to_id", metavar="TO", help="the memory it points to")
    rl.add_argument("relation", metavar="RELATION",
                    help="its name: lower-case letters, digits, '_' or '-' (e.g. about)")
    rl.add_argument("--weight", type=float, help="0 to 1 (default 1)")
    ur = command("unrelate", "remove the relations FROM -> TO (one name, or all of them); "
                             "exit 3 when there were none")
    ur.add_argument("from_id", metavar="FROM", help="the memory the relation starts at")
    ur.add_argument("to_id", metavar="TO", help="the memory it points to")
    ur.add_argument("relation", metavar="RELATION", nargs="?", default="",
                    help="only this relation (default: every relation FROM -> TO)")
    rd = command("related", "the memories reached from a memory along relations (either "
                            "direction), nearest first, with their paths")
    rd.add_argument("id", metavar="ID", help="the memory the walk starts at")
    rd.add_argument("--depth", type=int, choices=[1, 2, 3], default=1, help="steps (default 1)")
    rd.add_argument("--relation", action="append", default=[], dest="relations", metavar="R",
                    help="follow only this relation (repeat for more; default: all)")
    en = command("entities", "the entities the memories mention, most mentioned first; or one "
                             "entity's profile")
    en.add_argument("entity", nargs="?", metavar="ENTITY",
                    help="an entity id <kind>:<key> (e.g. name:caroline): its profile")
