"""``celestial feedback``: say whether a memory a recall returned helped. Kept apart from the
other commands (cli.py registers it in two lines)."""

from __future__ import annotations

import argparse

from celestial_client.cli_output import as_json, show_memory
from celestial_client.client import CelestialClient

COMMANDS = {"feedback"}


def add_feedback_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    f = sub.add_parser("feedback", help="say whether a recalled memory helped (moves its "
                                        "importance; a ledger event)")
    f.add_argument("id")
    verdict = f.add_mutually_exclusive_group(required=True)
    verdict.add_argument("--helpful", dest="helpful", action="store_true")
    verdict.add_argument("--not-helpful", dest="helpful", action="store_false")
    f.add_argument("--json", action="store_true", help="print one JSON document instead of lines")


def run_feedback(args: argparse.Namespace, client: CelestialClient) -> str:
    m = client.feedback(args.id, args.helpful)
    if args.json:
        return as_json({"helpful": args.helpful, "memory": m})
    verdict = "helpful" if args.helpful else "not helpful"
    return (f"{verdict}: importance now {m.importance:.2f}, zone {m.zone.value}\n"
            f"type         {m.memory_type}   immutable {m.immutable}\n{show_memory(m)}")
