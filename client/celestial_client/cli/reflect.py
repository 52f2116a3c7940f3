"""``celestial reflect``: insights about the tenant's recent memories by the server's model (a
dry run unless --apply); the parser registers it with ``add_reflect_command``, cli.py runs it."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from celestial_client.cli.output import Answer, table
from celestial_client.client import CelestialClient
from celestial_client.types import Reflection

COMMANDS = {"reflect"}


def add_reflect_command(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    p = command("reflect", "insights about recent memories by the server's model (dry run "
                           "unless --apply)")
    p.add_argument("--apply", action="store_true", help="write the insights and summaries")
    p.add_argument("--window", type=int, default=0,
                   help="newest memories to read (0: the server's default)")
    p.add_argument("--entity", action="append", default=[],
                   help="only this entity (<kind>:<key>); may be repeated")


def run_reflect(args: argparse.Namespace, client: CelestialClient) -> Answer:
    r = client.reflect(dry_run=not args.apply, window=args.window, entities=args.entity)
    return Answer(show_reflection(r), {"reflection": r})


def show_reflection(r: Reflection) -> str:
    verb = "would write" if r.dry_run else "wrote"
    lines = [f"read {r.memories_read} memories; {r.model_calls} model calls, "
             f"{r.model_tokens} tokens; {verb} {len(r.insights)} insights and "
             f"{len(r.summaries)} entity summaries" + (" (dry run: --apply writes)"
                                                      if r.dry_run else "")]
    if r.insights:
        lines.append(table(["entity", "new", "insight", "from"], [
            (i.entity, "yes" if i.created else "no", i.content, len(i.source_ids))
            for i in r.insights]))
    if r.summaries:
        lines.append(table(["entity", "summary"], [(s.entity, s.summary) for s in r.summaries]))
    return "\n".join(lines)
