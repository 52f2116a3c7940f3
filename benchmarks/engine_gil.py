"""Whether the embedded engine lets other Python threads run while it searches.

    python benchmarks/engine_gil.py [--points 20000] [--queries 60]

Builds a Qdrant Edge shard of random 384-d vectors in a temporary folder, times one exhaustive
``query_batch`` alone, then the same call while another thread wakes every 0.5 ms, and prints the
longest the other thread went without running. A call that releases the GIL leaves gaps near
0.5 ms; one that holds it leaves a gap as long as the call. The answer bounds what threads can do
for many clients on the embedded store: ONNX Runtime releases the GIL while it encodes, so the
encoder runs beside Python; an engine call that holds the GIL runs beside nothing else in Python.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time

import numpy as np
import qdrant_edge as qe


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=20_000)
    ap.add_argument("--queries", type=int, default=60)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((args.points, 384)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        shard = qe.EdgeShard.create(tmp, qe.EdgeConfig(
            vectors={"d": qe.EdgeVectorParams(size=384, distance=qe.Distance.Cosine)}))
        for start in range(0, args.points, 2000):
            shard.update(qe.UpdateOperation.upsert_points([
                qe.Point(i, {"d": vectors[i].tolist()}, {})
                for i in range(start, min(start + 2000, args.points))]))
        batch = qe.QueryBatchRequest([
            qe.QueryRequest(limit=10, query=qe.Query.Nearest(vectors[i].tolist(), using="d"),
                            params=qe.SearchParams(exact=True))
            for i in range(args.queries)])
        shard.query_batch(batch)
        t = time.perf_counter()
        shard.query_batch(batch)
        alone = time.perf_counter() - t

        gaps: list[float] = []
        stop = threading.Event()

        def tick() -> None:
            last = time.perf_counter()
            while not stop.is_set():
                time.sleep(0.0005)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        ticker = threading.Thread(target=tick)
        ticker.start()
        time.sleep(0.05)
        t = time.perf_counter()
        shard.query_batch(batch)
        during = time.perf_counter() - t
        time.sleep(0.05)
        stop.set()
        ticker.join()
        shard.close()
    print(f"one query_batch of {args.queries} exhaustive searches over {args.points:,} points: "
          f"{alone * 1000:.0f} ms alone, {during * 1000:.0f} ms beside the ticking thread")
    print(f"the ticking thread's longest wait: {max(gaps) * 1000:.1f} ms "
          f"({'held' if max(gaps) > 0.5 * during else 'released'}: the GIL during the call)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
