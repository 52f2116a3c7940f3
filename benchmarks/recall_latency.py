"""Recall latency through gRPC at scale, on the embedded store, without the query embedding.

Loads N memories (default 100,000; precomputed 384-d vectors around 1,000 centres, ten-word
texts) into Qdrant Edge, builds the vector indexes as the server's background task does, then
serves the store over gRPC and times Recall calls that pass their query vector (so no model runs)
and a two-word keyword query: hybrid candidates in all five zones, rescoring, zone order and the
reinforcement. Reports p50 / p90 through gRPC with the default settings and, in-process, the
same recall three ways in one run, interleaved call by call (the machines are noisy): writing
the reinforcement through (the default), writing it behind (``reinforce_flush_ms`` 50), and not
reinforcing.

    python benchmarks/recall_latency.py [--memories 100000] [--calls 300]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from celestial_client import AsyncCelestialClient
from celestial_memory.clock import ManualClock
from celestial_memory.grpc_api.server import MemoryServer
from celestial_memory.service import MemoryService, RecallQuery

sys.path.insert(0, str(Path(__file__).parent))
from rebalance import DIM, NOISE, T0, TENANT, VOCAB, open_service, populate


def queries(rng: np.random.Generator, centres: np.ndarray, n: int) -> list[tuple[list[float], str]]:
    q = centres[rng.integers(0, len(centres), n)] + NOISE * rng.standard_normal((n, DIM))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    words = [f"{VOCAB[a]} {VOCAB[b]}" for a, b in rng.integers(0, len(VOCAB), (n, 2))]
    return list(zip(q.tolist(), words, strict=True))


def in_process(
    svc: MemoryService, qs: list[tuple[list[float], str]], reinforce: bool = True
) -> list[float]:
    times = []
    for vec, text in qs:
        t = time.perf_counter()
        svc.recall(TENANT, RecallQuery(query=text, query_vector=vec, limit=10, reinforce=reinforce))
        times.append((time.perf_counter() - t) * 1000)
    return times


def compare_modes(path: Path, qs: list[tuple[list[float], str]], rounds: int = 10) -> None:
    """Write-through, write-behind and no reinforcement, in rounds of a few calls each so that
    all three see the same machine (one process may open the store: each round reopens it)."""
    modes = {"write-through": (0.0, True), "write-behind (50 ms)": (50.0, True),
             "no reinforcement": (0.0, False)}
    times: dict[str, list[float]] = {m: [] for m in modes}
    per = max(1, len(qs) // rounds)
    for r in range(rounds):
        chunk = qs[r * per:(r + 1) * per]
        for mode, (flush_ms, reinforce) in modes.items():
            svc = open_service(path, ManualClock(T0), reinforce_flush_ms=flush_ms,
                               optimize_interval_s=0)
            in_process(svc, chunk[:5], reinforce)  # warm the caches after the reopen
            times[mode] += in_process(svc, chunk, reinforce)
            svc.close()
    for mode, ts in times.items():
        print(summary(f"in-process, {mode}", ts))


async def through_grpc(svc: MemoryService, qs: list[tuple[list[float], str]]) -> list[float]:
    srv = MemoryServer(svc, "127.0.0.1:0")
    await srv.start()
    times = []
    try:
        async with AsyncCelestialClient(f"127.0.0.1:{srv.port}", tenant=TENANT) as c:
            for vec, text in qs:
                t = time.perf_counter()
                await c.recall(text, 10, query_vector=vec)
                times.append((time.perf_counter() - t) * 1000)
    finally:
        await srv.stop(0)  # closes the service and its store
    return times


def summary(label: str, times: list[float]) -> str:
    s = sorted(times)
    return (f"{label}: p50 {statistics.median(s):.2f} ms, p90 {s[int(0.9 * len(s))]:.2f} ms "
            f"({len(s)} calls)")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--calls", type=int, default=300)
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((1000, DIM))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    with tempfile.TemporaryDirectory() as tmp:
        svc = open_service(Path(tmp), ManualClock(T0))
        svc.settings.optimize_interval_s = 0  # built once below, timed
        t = time.perf_counter()
        populate(svc, args.memories, rng, centres)
        print(f"loaded {args.memories:,} memories in {time.perf_counter() - t:.1f} s")
        print(summary("in-process before the index build", in_process(svc, queries(rng, centres, 30))))
        t = time.perf_counter()
        assert svc.store.optimize(), "nothing to build"
        print(f"vector indexes built in {time.perf_counter() - t:.1f} s")
        print(summary("through gRPC", asyncio.run(through_grpc(svc, queries(rng, centres, args.calls)))))
        compare_modes(Path(tmp), queries(rng, centres, args.calls))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
