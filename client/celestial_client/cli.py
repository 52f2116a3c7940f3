"""``celestial``: serve, store, recall, get, update, delete, restore, archived, stats, rebalance,
consolidate, ledger, export, import, eval.

Every command but ``serve`` needs only the client; ``serve`` needs the server extra
(``pip install 'celestial-memory[server]'``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from celestial_client import dump_file
from celestial_client.client import CelestialClient
from celestial_client.connection import TLS
from celestial_client.errors import CelestialClientError
from celestial_client.progress import Progress
from celestial_client.types import Memory, RecallResult, Stats, ZoneEvent


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def _short(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _n(x: float, digits: int = 3) -> str:
    """A number for people: rounding first so that -0.0000001 reads 0.000, not -0.000."""
    return f"{round(x, digits) + 0.0:.{digits}f}"


def show_memory(m: Memory) -> str:
    b = m.breakdown
    lines = [
        f"id           {m.id}",
        f"content      {m.content}",
        f"zone         {m.zone.value}   score {_n(m.score)}   importance {_n(m.importance, 2)}",
        f"recalled     {m.recall_count} times, last {m.last_recalled_at:%Y-%m-%d %H:%M:%S}",
        f"created      {m.created_at:%Y-%m-%d %H:%M:%S}   pinned {m.pinned}",
    ]
    if m.archived_at is not None:
        lines.append(f"archived     {m.archived_at:%Y-%m-%d %H:%M:%S} (celestial restore {m.id})")
    if m.merged:
        lines.append(f"repeats      {len(m.merged)} merged in, the last: {m.merged[-1].content!r}")
    if m.tags:
        lines.append(f"tags         {', '.join(m.tags)}")
    if m.metadata:
        lines.append("metadata     " + ", ".join(f"{k}={v}" for k, v in m.metadata.items()))
    if b is not None:
        lines.append(
            f"now          R {_n(b.recall)}  F {_n(b.freshness)}  A {_n(b.importance, 2)}  "
            f"C {_n(b.context)}  I {_n(b.total)}"
        )
    return "\n".join(lines)


def show_recall(results: Sequence[RecallResult]) -> str:
    if not results:
        return "no memory passed the relevance gate"
    rows = [
        (i + 1, "archive" if r.archived else r.found_in.value, _n(r.relevance),
         _n(r.breakdown.total),
         r.memory.zone.value, r.memory.recall_count, _short(r.content), r.id)
        for i, r in enumerate(results)
    ]
    return table(["#", "zone", "relev", "score", "now in", "recalls", "content", "id"], rows)


def show_stats(s: Stats) -> str:
    rows = [
        (z.zone.value, z.count, z.capacity if z.capacity else "-",
         "-" if z.min_score is None else f"{z.min_score:.2f}")
        for z in s.zones
    ]
    return (
        table(["zone", "count", "capacity", "min score"], rows)
        + f"\ntotal {s.total}   archived {s.archived}   model {s.embedding_model} "
        f"({s.dimension}d)   backend {s.backend}"
    )


def show_ledger(events: Sequence[ZoneEvent]) -> str:
    if not events:
        return "no events"
    rows = [
        (f"{e.at:%Y-%m-%d %H:%M:%S}", e.reason, e.from_zone.value,
         e.to_zone.value if e.to_zone else f"({e.reason})", e.memory_id)
        for e in events
    ]
    return table(["at", "reason", "from", "to", "memory"], rows)


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


def _meta(pairs: Sequence[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--meta wants key=value, got {pair!r}")
        out[key] = value
    return out


def _run(args: argparse.Namespace, client: CelestialClient) -> str:
    c = args.command
    if c == "store":
        m = client.store(
            args.content, importance=args.importance, tags=args.tags,
            session_id=args.session or "", agent_id=args.agent or "", metadata=_meta(args.meta),
            pinned=args.pinned,
        )
        return show_memory(m)
    if c == "recall":
        results = client.recall(
            args.query, args.limit, zones=args.zones, tags_any=args.tags_any,
            reinforce=not args.no_reinforce, context=args.context,
            include_archived=args.archived,
        )
        return show_recall(results)
    if c == "restore":
        return show_memory(client.restore(args.id))
    if c == "archived":
        return "\n".join(show_memory(m) for m in client.recent(args.limit, archived=True)) or (
            "the archive is empty")
    if c == "consolidate":
        done = client.consolidate(dry_run=not args.apply)
        folded = sum(len(ids) for _, ids in done.merges)
        verb = "would merge" if done.dry_run else "merged"
        lines = [f"scanned {done.scanned}; {verb} {folded} repeats into {len(done.merges)} "
                 f"memories" + ("; run again with --apply to write" if done.dry_run and folded
                                else "")]
        lines += [f"  {into} <- {', '.join(ids)}" for into, ids in done.merges]
        return "\n".join(lines)
    if c == "get":
        return show_memory(client.get(args.id))
    if c == "delete":
        return "deleted" if client.delete(args.id) else "no such memory"
    if c == "update":
        pinned = True if args.pin else (False if args.unpin else None)
        changes = {
            k: v
            for k, v in (("content", args.content), ("importance", args.importance),
                         ("tags", args.tags), ("pinned", pinned))
            if v is not None
        }
        return show_memory(client.update(args.id, **changes))  # type: ignore[arg-type]
    if c == "stats":
        return show_stats(client.stats())
    if c == "ledger":
        return show_ledger(client.ledger(limit=args.limit, memory_id=args.memory))
    if c == "export":
        return _export(client, args.file, args.resume)
    if c == "import":
        return _import(client, args.file, args.skip, args.replace)
    rep = client.rebalance(dry_run=args.dry_run, full=args.full)
    if rep.skipped_by:
        return f"skipped: another instance ({rep.skipped_by}) is rebalancing"
    moves = ", ".join(f"{a.value}→{b.value}: {n}" for (a, b), n in rep.moved.items()) or "none"
    verb = "would move" if rep.dry_run else "moved"
    return (
        f"scanned {rep.scanned} in {rep.duration_ms:.1f} ms; {verb} {moves}; "
        f"evicted {rep.evicted}; archived {rep.forgotten}; purged {rep.purged}"
    )


def _export(client: CelestialClient, path: Path, resume: bool) -> str:
    done, end, after = dump_file.last_complete(path) if resume else (0, 0, "")
    if resume and path.exists():
        with path.open("r+b") as f:
            f.truncate(end)  # drop a partial last record
    bar = Progress(f"export {path.name}", client.stats().total)
    bar.update(done)
    with path.open("ab" if resume else "wb") as out:
        for _ in dump_file.write(out, client.export(after_id=after)):
            bar.update()
    rate = bar.close()
    return f"exported {bar.done:,} memories to {path} ({rate:,.0f}/s)"


def _import(client: CelestialClient, path: Path, skip: int, replace: bool) -> str:
    if not path.exists():
        raise SystemExit(f"no such file: {path}")
    total, _, _ = dump_file.last_complete(path)
    bar = Progress(f"import {path.name}", total)
    bar.update(min(skip, total))

    def records() -> Iterator[Any]:
        for i, r in enumerate(dump_file.read(path)):
            if i >= skip:
                bar.update()
                yield r

    done = client.import_memories(records(), replace=replace)
    rate = bar.close()
    held = f", {done.skipped:,} already there left as they were" if done.skipped else ""
    return f"imported {done.imported:,} memories from {path} ({rate:,.0f}/s){held}"


def _eval(args: argparse.Namespace) -> int:
    from celestial_client import locomo_eval

    path: Path = args.path
    paths = sorted(path.glob("*.json")) if path.is_dir() else [path]
    if not paths or any(k <= 0 for k in args.k):
        print(f"no LoCoMo files under {path}, or a k <= 0", file=sys.stderr)
        return 2
    try:
        scores = locomo_eval.run(
            args.target, paths, args.k, progress=lambda s: print(s, file=sys.stderr, flush=True)
        )
    except CelestialClientError as err:
        print(f"error ({err.code.name}): {err.details}", file=sys.stderr)
        return 1
    print(locomo_eval.report(scores, args.k))
    return 0


def _mcp(args: argparse.Namespace, client: CelestialClient) -> int:
    try:
        from celestial_client import mcp_server
    except ImportError:
        print("mcp needs the MCP SDK: pip install 'celestial-memory-client[mcp]'", file=sys.stderr)
        return 2
    return mcp_server.serve(args, client)


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
        return _eval(args)
    tls = TLS.from_files(args.tls_ca, args.tls_cert, args.tls_key) if args.tls_ca else None
    with CelestialClient(args.target, tenant=args.tenant, api_key=args.api_key,
                         tls=tls) as client:
        if args.command == "mcp":
            return _mcp(args, client)
        try:
            print(_run(args, client))
        except CelestialClientError as err:
            print(f"error ({err.code.name}): {err.details}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
