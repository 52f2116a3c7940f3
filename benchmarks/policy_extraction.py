"""What the turn policy saves the model: LoCoMo's turns through ``Observe`` in one in-process
service and stored one by one in another, both with the model extractor on (the scripted
OpenAI-compatible server the tests use, answering an empty understanding), then each queue
run until nothing waits. Printed per 100 turns: the model calls and the turns sent to the
model, for each.

    python benchmarks/policy_extraction.py [DATA] [--conversations N]

A skipped turn is archived and never queued; a kept one (SAVE, or a RETRIEVE that also keeps)
is queued as a stored one is. About 10 minutes on 2 cores for the five dev conversations.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' scripted model
sys.path.insert(0, str(Path(__file__).resolve().parent))

import policy_replay as replay
from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.domain.requests import NewMemory
from celestial_memory.memory.observing import ObservedTurn
from celestial_memory.memory.service import MemoryService

from tests.scripted_model import ScriptedModel

TENANT = "extraction"


def understanding(body: dict[str, Any]) -> str:
    """An empty understanding for each numbered memory of the request."""
    numbered = re.findall(r"^(\d+)\. ", body["messages"][1]["content"], re.M)
    return json.dumps({"memories": [{"n": int(n), "entities": [], "triples": []}
                                    for n in numbered]})


def drained(svc: MemoryService, clock: ManualClock) -> None:
    """The queue run until nothing waits; a minute passes whenever the tenant's budget of
    model calls a minute is spent (the default budget, as a server has it)."""
    queue = svc.understanding
    assert queue is not None, "the extractor is not on"
    while queue.waiting(TENANT):
        if queue.run_once().over_budget:
            clock.set(clock.now() + 61)


def sent(model: ScriptedModel) -> tuple[int, int]:
    """The model's calls, and the memories they carried."""
    return len(model.requests), sum(
        len(re.findall(r"^\d+\. ", body["messages"][1]["content"], re.M))
        for body in model.requests)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", nargs="?", type=Path, default=replay.DEFAULT_DATA)
    ap.add_argument("--conversations", type=int, default=0, help="the first N (0: all)")
    args = ap.parse_args(argv)
    convs = replay.load(args.data)
    convs = convs[:args.conversations] if args.conversations else convs
    turns = [(c, u) for c in convs for u in c.turns()]
    figures: dict[str, tuple[int, int]] = {}
    decisions: Counter[str] = Counter()
    for way in ("every turn stored", "through Observe"):
        model = ScriptedModel(understanding)
        try:
            with tempfile.TemporaryDirectory(prefix="celestial-extraction-") as tmp:
                clock = ManualClock()
                svc = build_service(Settings(
                    data_dir=Path(tmp), rebalance_interval_s=0, extractor="llm",
                    llm_base_url=model.url, llm_model="scripted"), clock=clock)
                try:
                    for i, (c, u) in enumerate(turns):
                        session = f"{c.name}/{u.session}"
                        if way == "through Observe":
                            got = svc.observing.observe(TENANT, ObservedTurn(
                                u.text, session=session, role=u.speaker))
                            decisions[got.decision.action.name] += 1
                        else:
                            svc.store_batch(TENANT, [NewMemory(content=u.text,
                                                               session_id=session)])
                        if i % 200 == 199:
                            print(f"{way}: {i + 1} of {len(turns)} turns", file=sys.stderr,
                                  flush=True)
                    drained(svc, clock)
                finally:
                    svc.close()
        finally:
            model.close()
        figures[way] = sent(model)
    print(f"{len(turns)} LoCoMo turns ({len(convs)} conversations); the decisions: "
          + ", ".join(f"{k} {v}" for k, v in sorted(decisions.items())))
    for way, (calls, memories) in figures.items():
        print(f"{way:18s}: model calls {100 * calls / len(turns):5.1f} per 100 turns, turns sent "
              f"to the model {100 * memories / len(turns):5.1f} per 100")
    return 0


if __name__ == "__main__":
    sys.exit(main())
