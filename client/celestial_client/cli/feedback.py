"""``celestial feedback``: say whether a memory a recall returned helped (the parser registers
it with ``add_feedback_command``; cli.py runs it)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from celestial_client.cli.output import Answer, show_memory
from celestial_client.cli.recording import RecordingClient

COMMANDS = {"feedback"}


def add_feedback_command(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    f = command("feedback", "say whether a recalled memory helped (moves its importance; a "
                            "ledger event)")
    f.add_argument("id", help="the memory a recall returned")
    verdict = f.add_mutually_exclusive_group(required=True)
    verdict.add_argument("--helpful", dest="helpful", action="store_true",
                         help="it helped: importance a step toward 1")
    verdict.add_argument("--not-helpful", dest="helpful", action="store_false",
                         help="it did not: importance a step toward 0")


def run_feedback(args: argparse.Namespace, client: RecordingClient) -> Answer:
    m = client.feedback(args.id, args.helpful)
    verdict = "helpful" if args.helpful else "not helpful"
    return Answer(f"{verdict}: importance now {m.importance:.2f}, zone {m.zone.value}\n"
                  f"type         {m.memory_type}   immutable {m.immutable}\n{show_memory(m)}",
                  client.answer())
