"""What ``celestial``'s commands do once parsed: each turns the arguments into calls on the
client and answers the text to print (or, for eval and mcp, the exit status)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from celestial_client import dump_file
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
)
from celestial_client.client import CelestialClient
from celestial_client.errors import CelestialClientError
from celestial_client.progress import Progress


def _meta(pairs: Sequence[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--meta wants key=value, got {pair!r}")
        out[key] = value
    return out


def run_command(args: argparse.Namespace, client: CelestialClient) -> str:
    """A command that needs only the client (all but serve, keys, eval and mcp): the text to
    print."""
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
    if c in ("relate", "related", "entities"):
        return _graph(args, client)
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


def _graph(args: argparse.Namespace, client: CelestialClient) -> str:
    """relate, related and entities: lines for people, or with --json one document."""
    c = args.command
    if c == "relate":
        r = client.relate(args.from_id, args.to_id, args.relation, args.weight)
        if args.json:
            return as_json({"from_id": args.from_id, "relation": r})
        return show_relation(args.from_id, r)
    if c == "related":
        found = client.related(args.id, args.depth, args.relations)
        if args.json:
            return as_json({"id": args.id, "depth": args.depth, "memories": found})
        return show_related(args.id, found)
    if args.entity:
        profile = client.entity(args.entity)
        return as_json({"profile": profile}) if args.json else show_entity(profile)
    entities = client.entities()
    return as_json({"entities": entities}) if args.json else show_entities(entities)


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


def run_eval(args: argparse.Namespace) -> int:
    """``eval``: it makes its own clients (a tenant per conversation), so it takes none."""
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


def run_mcp(args: argparse.Namespace, client: CelestialClient) -> int:
    """``mcp``: serves until stopped; the MCP SDK is an extra, imported only here."""
    try:
        from celestial_client import mcp_server
    except ImportError:
        print("mcp needs the MCP SDK: pip install 'celestial-memory-client[mcp]'", file=sys.stderr)
        return 2
    return mcp_server.serve(args, client)
