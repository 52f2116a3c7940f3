"""Rebalance and reinforcement benchmark on the embedded store, with precomputed vectors.

    make bench-rebalance        (or: python benchmarks/rebalance.py [--small])

1. A full rebalance of 100,000 memories (scan, vectorised rescoring, grouped writes).
2. An incremental rebalance of 1,000,000 memories where about 1% change zone (indexed drop
   times, filtered updates).
3. On the 100,000-memory store: Recall latency with reinforcement on and off, interleaved in one
   run (in-process service calls with query vectors, so embedding is excluded).

Memories: random 384-d vectors around 1,000 cluster centres; importance uniform; 5%
(--recent-share) recalled in the last two days, the rest 2 to 80 days ago (under the 90-day
forgetting); recall counts geometric. Each dataset is settled
by one untimed rebalance (capacity evictions of the initial placement), then the clock moves so
that the wanted share of memories is due. Peak memory is the process's resident high-water
mark during each timed step (reset through /proc/self/clear_refs before the step).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.domain.importance import DefaultEvaluator
from celestial_memory.domain.models import IndexVectors, Memory
from celestial_memory.domain.requests import RecallQuery
from celestial_memory.domain.trajectory import drop_times
from celestial_memory.domain.zones import Zone
from celestial_memory.memory.service import MemoryService
from celestial_memory.store import open_edge

DIM = 384
DAY = 86_400.0
T0 = 1_750_000_000.0
TENANT = "bench"
# Per-coordinate noise around a cluster centre: a memory is at cosine ~0.78 from its centre and
# ~0.6 from a query near it, so a recall finds its cluster above the relevance gate.
NOISE = 0.8 / np.sqrt(DIM)
# Memory texts: ten words drawn from 5,000 made-up ones, so keyword queries have real postings.
VOCAB = [f"w{i:04d}x" for i in range(5000)]


class PrecomputedOnly:
    """The benchmark never embeds text: every vector is given."""

    name = "precomputed"
    dimension = DIM

    def embed(self, texts: object) -> np.ndarray:
        raise AssertionError("the benchmark passes vectors; nothing should be embedded")


def rss_peak_reset() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def _status_mib(key: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1]) / 1024
    return float("nan")


def rss_peak_mib() -> float:
    return _status_mib("VmHWM:")


def rss_mib() -> float:
    return _status_mib("VmRSS:")


def populate(svc: MemoryService, n: int, rng: np.random.Generator, centres: np.ndarray,
             recent_share: float = 0.05) -> None:
    fn, zones = svc.fn, svc.zones
    batch = 5000
    started = time.perf_counter()
    for start in range(0, n, batch):
        k = min(batch, n - start)
        recent = rng.random(k) < recent_share
        # Older memories stay under the 90-day forgetting, so every memory is still there.
        age = np.where(recent, rng.uniform(0, 2 * DAY, k), rng.uniform(2 * DAY, 80 * DAY, k))
        last = T0 - age
        count = rng.geometric(0.3, k) - 1
        importance = rng.uniform(0, 1, k)
        score = fn.total(count, last, importance, 0.0, T0)
        zone = zones.zone_of(score)
        drops = drop_times(fn, zones, count, last, importance)
        vec = centres[rng.integers(0, len(centres), k)] + NOISE * rng.standard_normal((k, DIM))
        vec = (vec / np.linalg.norm(vec, axis=1, keepdims=True)).astype(np.float32)
        texts = [" ".join(VOCAB[j] for j in rng.integers(0, len(VOCAB), 10)) for _ in range(k)]
        kw = svc.retrieval.keywords
        svc.store.upsert([
            Memory(
                id=str(uuid.UUID(int=int(rng.integers(0, 2**62)) << 64 | start + i, version=4)),
                tenant=TENANT, content=texts[i], zone=Zone(int(zone[i])),
                score=float(score[i]), importance=float(importance[i]),
                recall_count=int(count[i]), created_at=float(last[i]) - DAY,
                last_recalled_at=float(last[i]), vector=vec[i],
                drop_times=(float(drops[i, 0]), float(drops[i, 1]), float(drops[i, 2]),
                            float(drops[i, 3])),
                written_at=T0,
                index=IndexVectors(vec[i], kw.document(texts[i]), kw.document(texts[i], True)),
            )
            for i in range(k)
        ])
        if (start // batch) % 20 == 0:
            done = start + k
            rate = done / (time.perf_counter() - started)
            print(f"  loaded {done:>9,} / {n:,}  ({rate:,.0f}/s)", file=sys.stderr, flush=True)


def clock_for_share(svc: MemoryService, share: float, total: int) -> tuple[float, int]:
    """A time after T0 at which about ``share`` of the memories would change zone, found by
    bisection on the dry run's count (cheap: indexed counts only)."""
    lo, hi = T0, T0 + 3 * DAY
    due = 0
    for _ in range(30):
        mid = (lo + hi) / 2
        svc.clock.set(mid)  # type: ignore[attr-defined]
        due = sum(svc.rebalance(TENANT, dry_run=True).moved.values())
        if due < share * total:
            lo = mid
        else:
            hi = mid
    return hi, due


def open_service(path: Path, clock: ManualClock, **overrides: object) -> MemoryService:
    settings = Settings(data_dir=path, rebalance_interval_s=0, instance_id="bench",
                        **overrides)  # type: ignore[arg-type]
    store = open_edge(path / "shard", DIM)
    return MemoryService(settings, store, PrecomputedOnly(), clock, DefaultEvaluator())


def timed_rebalance(svc: MemoryService, full: bool) -> tuple[float, str, int, int, int]:
    before = rss_mib()
    rss_peak_reset()
    t = time.perf_counter()
    rep = svc.rebalance(TENANT, full=full)
    seconds = time.perf_counter() - t
    memory = f"RSS {before:,.0f} MiB before, peak {rss_peak_mib():,.0f} MiB during"
    return seconds, memory, sum(rep.moved.values()), rep.evicted, rep.scanned


def bench_full(n: int, rng: np.random.Generator, centres: np.ndarray, workdir: Path,
               recent_share: float) -> MemoryService:
    clock = ManualClock(T0)
    svc = open_service(workdir / "full", clock)
    print(f"full rebalance: loading {n:,} memories", file=sys.stderr)
    populate(svc, n, rng, centres, recent_share)
    svc.rebalance(TENANT, full=True)  # settle: initial capacity evictions
    clock.set(clock_for_share(svc, 0.01, n)[0])
    seconds, peak, moved, evicted, scanned = timed_rebalance(svc, full=True)
    print(f"full rebalance of {n:,} memories: {seconds * 1000:.0f} ms "
          f"(rescored {scanned:,} that can move; {moved:,} moved = {moved / n:.2%}, "
          f"{evicted:,} evicted); {peak}")
    return svc


def bench_incremental(n: int, rng: np.random.Generator, centres: np.ndarray, workdir: Path) -> None:
    clock = ManualClock(T0)
    svc = open_service(workdir / "incremental", clock)
    print(f"incremental rebalance: loading {n:,} memories", file=sys.stderr)
    populate(svc, n, rng, centres)
    svc.rebalance(TENANT)  # settle
    clock.set(clock_for_share(svc, 0.01, n)[0])
    dry = svc.rebalance(TENANT, dry_run=True)
    seconds, peak, moved, evicted, scanned = timed_rebalance(svc, full=False)
    print(f"incremental rebalance of {n:,} memories: {seconds * 1000:.0f} ms "
          f"({scanned:,} due, selected by the engine; {moved:,} moved = {moved / n:.2%}; "
          f"{evicted:,} evicted; dry run had {sum(dry.moved.values()):,}); {peak}")
    svc.close()


def bench_recall(svc: MemoryService, rng: np.random.Generator, centres: np.ndarray,
                 calls: int) -> None:
    queries = centres[rng.integers(0, len(centres), 2 * calls)]
    queries += NOISE * rng.standard_normal(queries.shape)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    times: dict[bool, list[float]] = {True: [], False: []}
    hits = []
    for i, q in enumerate(queries):
        reinforce = i % 2 == 0  # interleaved, so drift on a noisy machine hits both alike
        t = time.perf_counter()
        res = svc.recall(TENANT, RecallQuery(query_vector=q.tolist(), limit=10,
                                             reinforce=reinforce))
        times[reinforce].append((time.perf_counter() - t) * 1000)
        hits.append(len(res))
    on, off = statistics.median(times[True]), statistics.median(times[False])
    print(f"recall at {svc.stats(TENANT).total:,} memories, limit 10 "
          f"(mean {np.mean(hits):.1f} results): reinforce on median {on:.2f} ms, "
          f"off {off:.2f} ms, on/off = {on / off:.3f} ({calls} calls each)")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true", help="10K / 100K instead of 100K / 1M")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--keep", action="store_true", help="keep the data folder")
    ap.add_argument("--recent-share", type=float, default=0.05,
                    help="share of memories recalled in the last two days (more: more can move)")
    ap.add_argument("--full-only", action="store_true", help="only the full rebalance")
    args = ap.parse_args()
    full_n, incr_n = (10_000, 100_000) if args.small else (100_000, 1_000_000)
    rng = np.random.default_rng(42)
    centres = rng.standard_normal((1000, DIM))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    workdir = Path(tempfile.mkdtemp(prefix="celestial-rebalance-"))
    try:
        svc = bench_full(full_n, rng, centres, workdir, args.recent_share)
        if not args.full_only:
            bench_recall(svc, rng, centres, args.calls)
        svc.close()
        if not args.full_only:
            bench_incremental(incr_n, rng, centres, workdir)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
