"""Recall latency in the minute after a large StoreBatch, against the same once the server is
idle: whether the background work a batch sets off (keyword and entity indexing, understanding,
reinforcement flushes, the vector index build) yields to requests.

    make bench-after-writes     (or: python benchmarks/after_writes.py --batch 2000)

A server with its default settings runs as its own process over a fresh embedded store (as
``make bench-load`` starts it). One client stores ``--batch`` LoCoMo turns in one StoreBatch,
then recalls LoCoMo questions one at a time for ``--seconds``; the server is then left alone for
``--settle`` seconds (past its first scheduled index build) and the same questions are recalled
again for ``--seconds``. Printed: p50 and p99 of each period, the first period by ten-second
windows, and the ratio of the two p50s (the aim is at most 1.2).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import grpc
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grpc_latency import corpus, percentile
from load import start_server

TENANT = "after-writes"


def recalls(stub: pb_grpc.MemoryServiceStub, questions: list[str],
            seconds: float) -> list[tuple[float, float]]:
    """(seconds since the start, milliseconds) of each recall for ``seconds``."""
    out: list[tuple[float, float]] = []
    start = time.perf_counter()
    i = 0
    while (now := time.perf_counter()) - start < seconds:
        stub.Recall(pb.RecallRequest(tenant=TENANT, query=questions[i % len(questions)],
                                     limit=10), timeout=60)
        out.append((now - start, (time.perf_counter() - now) * 1000))
        i += 1
    return out


def summary(name: str, rows: list[tuple[float, float]]) -> float:
    ms = [m for _, m in rows]
    p50 = statistics.median(ms)
    print(f"{name:<28} n={len(ms):5d}  p50 {p50:7.2f} ms  p99 {percentile(ms, 0.99):7.2f} ms")
    return p50


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=2000)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--settle", type=float, default=90,
                    help="seconds left alone between the two periods")
    ap.add_argument("--server-path", default="",
                    help="run the server from this checkout's server/ and client/ (comparisons)")
    args = ap.parse_args()
    texts, questions = corpus(args.batch, 300)
    with tempfile.TemporaryDirectory(prefix="celestial-after-writes-") as data_dir:
        proc, address = start_server("edge", data_dir, args.server_path)
        try:
            with grpc.insecure_channel(address) as channel:
                stub = pb_grpc.MemoryServiceStub(channel)
                started = time.perf_counter()
                stub.StoreBatch(iter([pb.StoreRequest(tenant=TENANT, content=t)
                                      for t in texts[:args.batch]]), timeout=1200)
                print(f"StoreBatch of {args.batch} in {time.perf_counter() - started:.1f} s")
                after = recalls(stub, questions, args.seconds)
                time.sleep(args.settle)
                idle = recalls(stub, questions, args.seconds)
        finally:
            proc.terminate()
            proc.wait(60)
    busy_p50 = summary("the minute after the batch", after)
    for w in range(0, int(args.seconds), 10):
        summary(f"  {w:3d}-{w + 10:3d} s", [r for r in after if w <= r[0] < w + 10])
    idle_p50 = summary("idle", idle)
    print(f"after the batch / idle, p50: {busy_p50 / idle_p50:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
