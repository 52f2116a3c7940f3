"""``celestial export``, ``import``, ``eval`` and ``mcp``: the commands that move many memories
or keep running. Progress goes to stderr, so that ``--json`` leaves one document on stdout."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from celestial_client.cli import dump_file
from celestial_client.cli.output import Answer
from celestial_client.cli.progress import Progress
from celestial_client.cli.settings import UsageError
from celestial_client.client import CelestialClient


def export(args: argparse.Namespace, client: CelestialClient) -> Answer:
    path: Path = args.file
    done, end, after = dump_file.last_complete(path) if args.resume else (0, 0, "")
    if args.resume and path.exists():
        with path.open("r+b") as f:
            f.truncate(end)  # drop a partial last record
    bar = Progress(f"export {path.name}", client.stats().total)
    bar.update(done)
    with path.open("ab" if args.resume else "wb") as out:
        for _ in dump_file.write(out, client.export(after_id=after)):
            bar.update()
    rate = bar.close()
    return Answer(f"exported {bar.done:,} memories to {path} ({rate:,.0f}/s)",
                  {"file": str(path), "exported": bar.done, "per_second": round(rate, 1)})


def import_(args: argparse.Namespace, client: CelestialClient) -> Answer:
    path: Path = args.file
    if not path.exists():
        raise UsageError(f"no such file: {path}")
    total, _, _ = dump_file.last_complete(path)
    bar = Progress(f"import {path.name}", total)
    bar.update(min(args.skip, total))

    def records() -> Iterator[Any]:
        for i, r in enumerate(dump_file.read(path)):
            if i >= args.skip:
                bar.update()
                yield r

    done = client.import_memories(records(), replace=args.replace)
    rate = bar.close()
    held = f", {done.skipped:,} already there left as they were" if done.skipped else ""
    return Answer(f"imported {done.imported:,} memories from {path} ({rate:,.0f}/s){held}",
                  {"file": str(path), "imported": done.imported, "skipped": done.skipped,
                   "per_second": round(rate, 1)})


def run_eval(args: argparse.Namespace, target: str) -> Answer:
    """``eval``: it makes its own clients (a tenant per conversation), so it takes none."""
    from celestial_client.cli import locomo_eval

    path: Path = args.path
    paths = sorted(path.glob("*.json")) if path.is_dir() else [path]
    if not paths or any(k <= 0 for k in args.k):
        raise UsageError(f"no LoCoMo files under {path}, or a k <= 0")
    def progress(s: str) -> None:
        print(s, file=sys.stderr, flush=True)

    if args.policy:
        from celestial_client.cli import locomo_policy

        sc = locomo_policy.run(target, paths, args.k, progress)
        return Answer(locomo_policy.report(sc, args.k),
                      {"benchmark": args.benchmark, "k": args.k, "policy": True,
                       **locomo_policy.summary(sc, args.k)})
    scores = locomo_eval.run(target, paths, args.k, progress)
    # Per setting (zone order, relevance alone, ...): recall at each k, as the table shows.
    data = {"benchmark": args.benchmark, "k": args.k, "settings": {
        name: {f"R@{k}": _mean(s.hits.get(k, [])) for k in args.k}
        | {"forgotten": s.forgotten, "archived": s.archived, "merged": s.merged,
           "recall_ms_mean": _mean(s.recall_ms)}
        for name, s in scores.items()}}
    return Answer(locomo_eval.report(scores, args.k), data)


def _mean(xs: list[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


def run_mcp(args: argparse.Namespace, client: CelestialClient, target: str) -> int:
    """``mcp``: serves until stopped; the MCP SDK is an extra, imported only here."""
    try:
        from celestial_client import mcp_server
    except ImportError:
        raise UsageError("mcp needs the MCP SDK: pip install 'celestial-memory-client[mcp]'"
                         ) from None
    return mcp_server.serve(args, client, target)
