"""RAM per memory and recall latency with the store in RAM and on disk, on the embedded store:
the original vectors (``vectors_on_disk``: memory-mapped originals and keyword indexes, int8
copies and the HNSW graph in RAM) and the payload (``payload_on_disk``: payload pages and the
float and keyword indexes memory-mapped).

    python benchmarks/vectors_on_disk.py [--memories 100000] [--calls 300] [--ways ram,vectors,all]
                                         [--breakdown]

For each way a child process loads N memories (the synthetic vectors and ten-word texts of
``rebalance.py``) and builds the indexes; then a fresh child process opens the store, runs
``--calls`` recalls with query vectors given (no model), and reports its resident memory beyond
what it held before opening the store: anonymous memory (the engine's own structures, always in
RAM) and file pages (memory-mapped files the process touched; the kernel may drop these under
pressure, so they are the part that the on-disk settings let go), per memory, with recall p50/p90.
Part of each figure does not grow with the store (about 190 MiB of the engine's heap and two
32 MiB write-ahead-log segments here), so the figures per memory fall as N grows. ``--breakdown``
adds, per way, the resident memory of each mapping (the heap, anonymous memory, each of the
store's files by kind) after the recalls.
"""

from __future__ import annotations

import argparse
import multiprocessing
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
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


WAYS = {  # name -> (vectors_on_disk, payload_on_disk)
    "ram": (False, False),
    "vectors": (True, False),
    "all": (True, True),
}
LABELS = {"ram": "in RAM", "vectors": "vectors on disk", "all": "vectors and payload on disk"}


def smaps_kib(root: Path) -> Counter[str]:
    """Resident KiB per mapping: the store's files grouped by kind (segment ids and page
    numbers dropped), shared libraries together, the heap and anonymous memory apart."""
    out: Counter[str] = Counter()
    name = ""
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
            parts = line.split(None, 5)
            name = parts[5] if len(parts) > 5 else "[anonymous]"
            if name.startswith(str(root)):
                name = re.sub(r"segments/[^/]+/", "", name[len(str(root)) + 1:])
                name = re.sub(r"payload_index/[^/]+-(\w+)/", r"payload_index/*-\1/", name)
                name = re.sub(r"(page_|closed-|open-)\d+", r"\1N", name)
            elif name.startswith("/"):
                name = "shared libraries"
        elif line.startswith("Rss:"):
            out[name] += int(line.split()[1])
    return out


def open_service(path: Path, way: str):  # type: ignore[no-untyped-def]
    from celestial_memory.clock import ManualClock
    from celestial_memory.config import Settings
    from celestial_memory.domain.importance import DefaultEvaluator
    from celestial_memory.memory.service import MemoryService
    from celestial_memory.store import open_edge

    vectors, payload = WAYS[way]
    settings = Settings(data_dir=path, rebalance_interval_s=0, instance_id="bench",
                        optimize_interval_s=0, vectors_on_disk=vectors, payload_on_disk=payload)
    store = open_edge(path / "shard", DIM, vectors, payload)
    return MemoryService(settings, store, PrecomputedOnly(), ManualClock(T0), DefaultEvaluator())


def load(path: Path, way: str, n: int) -> None:
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((1000, DIM))
    svc = open_service(path, way)
    populate(svc, n, rng, centres)
    print("  building the indexes", file=sys.stderr, flush=True)
    svc.store.optimize(min_new=0)
    svc.close()


def measure(path: Path, way: str, n: int, calls: int, breakdown: bool) -> None:
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((1000, DIM))
    qs = queries(np.random.default_rng(11), centres, calls + 20)
    import celestial_memory.memory.service  # noqa: F401  (imports before the baseline)

    before, maps_before = status_kib(), smaps_kib(path)
    svc = open_service(path, way)
    opened = status_kib()
    in_process(svc, qs[:20], reinforce=False)
    times = in_process(svc, qs[20:], reinforce=False)
    after, maps_after = status_kib(), smaps_kib(path)
    svc.close()
    per = {k: (after[k] - before[k]) * 1024 / n for k in ("VmRSS", "RssAnon", "RssFile")}
    disk = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / n
    print(f"| {LABELS[way]} | {n:,} | {statistics.median(times):.2f} | "
          f"{sorted(times)[int(0.9 * len(times))]:.2f} | {per['VmRSS']:,.0f} | "
          f"{per['RssAnon']:,.0f} | {per['RssFile']:,.0f} | "
          f"{(opened['VmRSS'] - before['VmRSS']) * 1024 / n:,.0f} | {disk:,.0f} |", flush=True)
    if breakdown:
        rows = sorted(((maps_after[k] - maps_before[k]) * 1024 / n, k) for k in maps_after)
        shown = [f"{b:,.0f} B {k}" for b, k in reversed(rows) if b >= 1]
        print(f"|  | resident after the recalls, per memory: {'; '.join(shown)} |||||||||",
              flush=True)


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
    ap.add_argument("--ways", default="ram,vectors,all",
                    help="comma-separated, of: ram (everything in RAM), vectors "
                         "(vectors_on_disk), all (vectors_on_disk and payload_on_disk)")
    ap.add_argument("--breakdown", action="store_true",
                    help="also print the resident memory of each mapping, per way")
    args = ap.parse_args()
    ways = [w.strip() for w in args.ways.split(",") if w.strip()]
    if set(ways) - set(WAYS):
        ap.error(f"unknown ways: {', '.join(sorted(set(ways) - set(WAYS)))}")
    print("| vectors | memories | recall p50 ms | p90 ms | RSS B/memory | anonymous | file pages "
          "| RSS after open only | disk B/memory |")
    print("|---|---|---|---|---|---|---|---|---|")
    for way in ways:
        path = Path(tempfile.mkdtemp(prefix="celestial-ondisk-"))
        try:
            t = time.perf_counter()
            print(f"{LABELS[way]}: loading {args.memories:,} memories", file=sys.stderr, flush=True)
            child(load, path, way, args.memories)
            print(f"loaded and indexed in {time.perf_counter() - t:.0f} s", file=sys.stderr)
            child(measure, path, way, args.memories, args.calls, args.breakdown)
        finally:
            shutil.rmtree(path, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
