"""Recall over Connect JSON (the HTTP port) against the same over gRPC, one server, calls
interleaved.

    python benchmarks/connect_latency.py [--memories 10000] [--queries 300]

A server with its defaults runs as its own process over a fresh embedded store, with the HTTP
port on. 2,000 LoCoMo turns (repeated up to ``--memories`` with " (copy N)" appended;
synthetic sentences without the data) are
stored with StoreBatch, then each question is recalled as text, limit 10, not reinforced (so
the two transports see the same state), once through a gRPC stub and once as JSON through a
keep-alive HTTP/1.1 connection (httpx), in alternating order. Printed: p50 / p90 / p99 of
each and the ratio of the p50s (the aim is at most 1.3).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import grpc
import httpx
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grpc_latency import corpus, percentile
from load import free_port, start_server

TENANT = "connect-bench"


def line(name: str, ms: list[float]) -> str:
    return (f"{name:28s} n={len(ms)}  p50 {statistics.median(ms):6.2f} ms  "
            f"p90 {percentile(ms, 0.9):6.2f} ms  p99 {percentile(ms, 0.99):6.2f} ms")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=300)
    args = ap.parse_args()
    turns, questions = corpus(2000, args.queries)  # the dev split has 2,760 turns
    turns = turns[:2000]
    texts = [turns[i % len(turns)] + (f" (copy {i // len(turns)})" if i >= len(turns) else "")
             for i in range(args.memories)]
    http_address = f"127.0.0.1:{free_port()}"
    with tempfile.TemporaryDirectory(prefix="celestial-connect-") as data_dir:
        os.environ["CELESTIAL_HTTP_ADDRESS"] = http_address  # start_server passes it on
        proc, address = start_server("edge", data_dir)
        try:
            with grpc.insecure_channel(address) as channel, httpx.Client(
                    base_url=f"http://{http_address}", timeout=60) as http:
                stub = pb_grpc.MemoryServiceStub(channel)
                started = time.perf_counter()
                for i in range(0, len(texts), 1000):
                    stub.StoreBatch(iter([pb.StoreRequest(tenant=TENANT, content=t)
                                          for t in texts[i:i + 1000]]), timeout=1200)
                print(f"stored {len(texts):,} in {time.perf_counter() - started:.0f} s")
                time.sleep(5)
                ways: dict[str, list[float]] = {"gRPC": [], "Connect JSON": []}
                for i, q in enumerate(questions):
                    for way in (("gRPC", "Connect JSON") if i % 2 else ("Connect JSON", "gRPC")):
                        t = time.perf_counter()
                        if way == "gRPC":
                            stub.Recall(pb.RecallRequest(tenant=TENANT, query=q, limit=10,
                                                         no_reinforce=True), timeout=60)
                        else:
                            r = http.post("/celestial.v1.MemoryService/Recall", content=json.dumps(
                                {"tenant": TENANT, "query": q, "limit": 10, "noReinforce": True}),
                                headers={"content-type": "application/json"})
                            r.raise_for_status()
                            r.json()
                        ways[way].append((time.perf_counter() - t) * 1000)
        finally:
            proc.terminate()
            proc.wait(60)
    for way, ms in ways.items():
        print(line(f"Recall over {way}", ms))
    ratio = statistics.median(ways["Connect JSON"]) / statistics.median(ways["gRPC"])
    print(f"Connect JSON / gRPC, p50: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
