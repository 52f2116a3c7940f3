"""RAM per memory and recall latency with the original vectors in RAM and on disk
(``vectors_on_disk``: memory-mapped originals, int8 copies in RAM), on the embedded store.

    python benchmarks/vectors_on_disk.py [--memories 100000] [--calls 300]

For each way a child process loads N memories (the synthetic vectors and ten-word texts of
``rebalance.py``) and builds the indexes; then a fresh child process opens the store, runs
``--calls`` recalls with query vectors given (no model), and reports its resident memory beyond
what it held before opening the store: anonymous memory (the engine's own structures, always in
RAM) and file pages (memory-mapped files the process touched; the kernel may drop these under
pressure, so they are the part that vectors on disk lets go), per memory, with recall p50/p90.
"""

from __future__ import annotations

import argparse
import multiprocessing
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rebalance import DIM, T0, PrecomputedOnly, populate
from recall_latency import in_process, queries


def status_kib() -> dict[str, int]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
            out[key] = int(rest.split()[0])
    return out


def open_service(path: Path, on_disk: bool):  # type: ignore[no-untyped-def]
    from celestial_memory.clock import ManualClock
    from celestial_memory.config import Settings
    from celestial_memory.domain.importance import DefaultEvaluator
    from celestial_memory.service import MemoryService
    from celestial_memory.store import open_edge

    settings = Settings(data_dir=path, rebalance_interval_s=0, instance_id="bench",
                        optimize_interval_s=0, vectors_on_disk=on_disk)
    store = open_edge(path / "shard", DIM, on_disk)
    return MemoryService(settings, store, PrecomputedOnly(), ManualClock(T0), DefaultEvaluator())


def load(path: Path, on_disk: bool, n: int) -> None:
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((1000, DIM))
    svc = open_service(path, on_disk)
    populate(svc, n, rng, centres)
    svc.store.optimize(min_new=0)
    svc.close()


def measure(path: Path, on_disk: bool, n: int, calls: int) -> None:
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((1000, DIM))
    qs = queries(np.random.default_rng(11), centres, calls + 20)
    import celestial_memory.service  # noqa: F401  (imports before the baseline)

    before = status_kib()
    svc = open_service(path, on_disk)
    opened = status_kib()
    in_process(svc, qs[:20], reinforce=False)
    times = in_process(svc, qs[20:], reinforce=False)
    after = status_kib()
    svc.close()
    way = "on disk" if on_disk else "in RAM"
    per = {k: (after[k] - before[k]) * 1024 / n for k in ("VmRSS", "RssAnon", "RssFile")}
    disk = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / n
    print(f"| {way} | {n:,} | {statistics.median(times):.2f} | "
          f"{sorted(times)[int(0.9 * len(times))]:.2f} | {per['VmRSS']:,.0f} | "
          f"{per['RssAnon']:,.0f} | {per['RssFile']:,.0f} | "
          f"{(opened['VmRSS'] - before['VmRSS']) * 1024 / n:,.0f} | {disk:,.0f} |", flush=True)


def child(target, *args: object) -> None:  # type: ignore[no-untyped-def]
    proc = multiprocessing.get_context("spawn").Process(target=target, args=args)
    proc.start()
    proc.join()
    if proc.exitcode != 0:
        raise SystemExit(f"{target.__name__} failed ({proc.exitcode})")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--calls", type=int, default=300)
    args = ap.parse_args()
    print("| vectors | memories | recall p50 ms | p90 ms | RSS B/memory | anonymous | file pages "
          "| RSS after open only | disk B/memory |")
    print("|---|---|---|---|---|---|---|---|---|")
    for on_disk in (False, True):
        path = Path(tempfile.mkdtemp(prefix="celestial-ondisk-"))
        try:
            t = time.perf_counter()
            child(load, path, on_disk, args.memories)
            print(f"loaded and indexed in {time.perf_counter() - t:.0f} s", file=sys.stderr)
            child(measure, path, on_disk, args.memories, args.calls)
        finally:
            shutil.rmtree(path, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
