"""What the learned ranker costs a recall: one in-process service over 10,000 LoCoMo turns, each
question recalled with the learned ranker and with the weighted relevance alone, in alternating
order, nothing reinforced (so both see the same state). Printed: p50 / p90 of each, the p50
difference and ratio (the aim: at most 1.05x) and the ranking stage's own mean (its read of
the fields the features use, the features, the model; and, for comparison, what reading the
whole payloads would cost).

    python benchmarks/ranker_latency.py [--memories 10000] [--queries 300]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from celestial_memory.app import build_service
from celestial_memory.config import Settings
from celestial_memory.domain import validation as check
from celestial_memory.domain.requests import NewMemory, RecallQuery
from celestial_memory.memory.service import MemoryService
from celestial_memory.observability import metrics
from celestial_memory.ranking import learned
from celestial_memory.ranking.features import features
from grpc_latency import corpus, percentile

TENANT = "ranker-bench"


def breakdown(svc: MemoryService, model: learned.LearnedRanker,
              questions: list[str]) -> dict[str, list[float]]:
    """The ranking stage's parts, timed one by one over the same candidates a recall finds."""
    parts: dict[str, list[float]] = {"fields read": [], "features": [], "model": [],
                                     "whole payloads (not read)": []}
    for q in questions:
        query = RecallQuery(query=q, limit=10, reinforce=False)
        qvec = svc.embedder.embed([q])[0]
        found = svc._candidates.find(TENANT, query, q, qvec, check.memory_filter(
            query.filter, svc.settings), svc.settings.min_relevance, 10, metrics.Stages())
        best = np.argsort(-found.relevance, kind="stable")[:model.candidates]
        ids = [found.candidates.ids[i] for i in best]
        t0 = time.perf_counter()
        facts = svc.store.ranking_facts.read(TENANT, ids)
        t1 = time.perf_counter()
        rows = features(q, found.asked, found.candidates.signals[best], found.relevance[best],
                        facts)
        t2 = time.perf_counter()
        model.scores(rows)
        t3 = time.perf_counter()
        svc.store.get(TENANT, ids)  # what the ranker read before it read only its fields
        t4 = time.perf_counter()
        for name, a, b in (("fields read", t0, t1), ("features", t1, t2), ("model", t2, t3),
                           ("whole payloads (not read)", t3, t4)):
            parts[name].append((b - a) * 1000)
    return parts


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=300)
    args = ap.parse_args()
    turns, questions = corpus(2000, args.queries)
    turns = turns[:2000]
    texts = [turns[i % len(turns)] + (f" (copy {i // len(turns)})" if i >= len(turns) else "")
             for i in range(args.memories)]
    with tempfile.TemporaryDirectory(prefix="celestial-ranker-") as data_dir:
        svc = build_service(Settings(data_dir=Path(data_dir), rebalance_interval_s=0,
                                     ranker="learned"))
        try:
            model = svc._candidates.ranker
            assert model is not None, "the learned model did not load"
            started = time.perf_counter()
            for i in range(0, len(texts), 500):
                svc.store_batch(TENANT, [NewMemory(content=t, session_id=f"s{j // 20}")
                                         for j, t in enumerate(texts[i:i + 500], i)])
            print(f"stored {len(texts):,} in {time.perf_counter() - started:.0f} s")
            ms: dict[str, list[float]] = {"learned": [], "weights": []}
            for i, q in enumerate(questions * 2):
                for way in (("learned", "weights") if i % 2 else ("weights", "learned")):
                    svc._candidates.ranker = model if way == "learned" else None
                    t = time.perf_counter()
                    svc.recall(TENANT, RecallQuery(query=q, limit=10, reinforce=False))
                    ms[way].append((time.perf_counter() - t) * 1000)
            for way, xs in ms.items():
                print(f"recall, {way:8s} n={len(xs)}  p50 {statistics.median(xs):6.2f} ms  "
                      f"p90 {percentile(xs, 0.9):6.2f} ms")
            diff = statistics.median(ms["learned"]) - statistics.median(ms["weights"])
            print(f"learned - weights, p50: {diff:+.2f} ms "
                  f"({statistics.median(ms['learned']) / statistics.median(ms['weights']):.3f}x)")
            svc._candidates.ranker = None
            parts = breakdown(svc, model, questions)
            print("the ranking stage, mean ms: " + ", ".join(
                f"{name} {statistics.mean(xs):.3f}" for name, xs in parts.items()))
        finally:
            svc.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
