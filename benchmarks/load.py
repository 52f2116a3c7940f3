"""Many clients at once: throughput, p50/p99 and errors by code, on both backends and with each
encoder (ONNX Runtime and torch), beside the raw model's batched encode rate of the same texts.

    make bench-load        (or: python benchmarks/load.py --clients 1,16 --seconds 20)

``--encoders onnx,torch`` (the default) runs every backend once per encoder in the same run; an
encoder may name its thread count (``onnx:2``), which the server gets as CELESTIAL_EMBED_THREADS;
``onnx-int8`` is ONNX Runtime on the model's int8 copy (CELESTIAL_EMBED_INT8).

For each backend (the embedded store, and qdrant-client's local ``:memory:`` mode) a server is
started as its own process on loopback with its default settings. N clients (asyncio tasks in
this process, each with its own channel, one tenant) then run three phases of ``--seconds`` each:
Store only, Recall only (over the preloaded memories), and a mix (20% Store, 50% Recall, 30%
Get). Texts are LoCoMo turns and questions (synthetic sentences if that folder is absent).

The physical limit on a small CPU is the embedding model: a Store or Recall is about one
single-sentence encode, and encoding many sentences at once roughly doubles the rate. So the
reference is the raw model encoding the same texts in batches of 64, measured in the same run
(torch's best over the thread counts tried), and the throughput of N clients is given as a share
of it; the last table gives each encoder's calls/s as a ratio to the last encoder's (torch's).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grpc_latency import ONNX_CACHE, corpus, encoder_settings, percentile

TENANT = "load"


@dataclass
class Tally:
    ms: dict[str, list[float]] = field(default_factory=dict)
    errors: Counter[str] = field(default_factory=Counter)

    def ok(self, op: str, ms: float) -> None:
        self.ms.setdefault(op, []).append(ms)


def raw_encode_rate(texts: list[str], threads: int) -> float:
    """Sentences per second for the bundled model encoding ``texts`` in batches of 64."""
    from celestial_memory.encoding.embedding import SentenceTransformerEmbedder

    emb = SentenceTransformerEmbedder(threads=threads)
    emb.embed(texts[:64])  # warm up
    t = time.perf_counter()
    for i in range(0, len(texts), 64):
        emb.embed(texts[i:i + 64])
    return len(texts) / (time.perf_counter() - t)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(
    backend: str, data_dir: str, checkout: str = "", encoder: str = "auto"
) -> tuple[subprocess.Popen[bytes], str]:
    address = f"127.0.0.1:{free_port()}"
    kind, int8, threads = encoder_settings(encoder)
    env = dict(os.environ, HF_HUB_OFFLINE="1", CELESTIAL_ADDRESS=address,
               CELESTIAL_DATA_DIR=data_dir, CELESTIAL_REBALANCE_INTERVAL_S="0",
               CELESTIAL_LOG_LEVEL="WARNING", CELESTIAL_EMBED_BACKEND=kind,
               CELESTIAL_EMBED_INT8=str(int8).lower(), CELESTIAL_EMBED_ONNX_DIR=str(ONNX_CACHE),
               CELESTIAL_EMBED_THREADS=str(threads))
    if backend == "memory":
        env.update(CELESTIAL_BACKEND="qdrant", CELESTIAL_QDRANT_URL=":memory:")
    if checkout:
        root = Path(checkout)
        env["PYTHONPATH"] = os.pathsep.join(str(root / d) for d in ("server", "client"))
    proc = subprocess.Popen([sys.executable, "-m", "celestial_memory.main"], env=env)
    from celestial_memory.ops.healthcheck import main as healthy

    deadline = time.monotonic() + 120
    while healthy(["", address]) != 0:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the {backend} server did not start")
        time.sleep(0.5)
    return proc, address


async def client(
    stub: pb_grpc.MemoryServiceStub, mix: dict[str, float], texts: list[str],
    questions: list[str], ids: list[str], until: float, tally: Tally, rng: random.Random,
) -> None:
    ops, weights = list(mix), list(mix.values())
    while time.monotonic() < until:
        op = rng.choices(ops, weights)[0]
        t = time.perf_counter()
        try:
            if op == "store":
                await stub.Store(pb.StoreRequest(tenant=TENANT, content=rng.choice(texts)),
                                 timeout=30)
            elif op == "recall":
                await stub.Recall(pb.RecallRequest(tenant=TENANT, query=rng.choice(questions),
                                                   limit=10), timeout=30)
            else:
                await stub.Get(pb.GetRequest(tenant=TENANT, id=rng.choice(ids)), timeout=30)
        except grpc.aio.AioRpcError as exc:
            tally.errors[f"{op} {exc.code().name}"] += 1
            continue
        tally.ok(op, (time.perf_counter() - t) * 1000)


async def phase(
    address: str, n: int, seconds: float, mix: dict[str, float], texts: list[str],
    questions: list[str], ids: list[str],
) -> tuple[Tally, float]:
    tally = Tally()
    channels = [grpc.aio.insecure_channel(address) for _ in range(n)]
    try:
        stubs = [pb_grpc.MemoryServiceStub(c) for c in channels]
        start = time.monotonic()
        await asyncio.gather(*(
            client(s, mix, texts, questions, ids, start + seconds, tally, random.Random(i))
            for i, s in enumerate(stubs)
        ))
        return tally, time.monotonic() - start
    finally:
        for c in channels:
            await c.close()


async def preload(address: str, texts: list[str]) -> list[str]:
    async with grpc.aio.insecure_channel(address) as ch:
        stub = pb_grpc.MemoryServiceStub(ch)
        reply = await stub.StoreBatch(
            iter([pb.StoreRequest(tenant=TENANT, content=t) for t in texts]), timeout=600)
        await stub.Recall(pb.RecallRequest(tenant=TENANT, query="warm up", limit=5), timeout=60)
        return list(reply.ids)


PHASES = {
    "store": {"store": 1.0},
    "recall": {"recall": 1.0},
    "mix": {"store": 0.2, "recall": 0.5, "get": 0.3},
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", default="1,16", help="comma-separated client counts")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--backends", default="edge,memory")
    ap.add_argument("--preload", type=int, default=1000)
    ap.add_argument("--phases", default=",".join(PHASES), help="of: " + ", ".join(PHASES))
    ap.add_argument("--encoders", default="onnx,torch",
                    help="server encoders, each onnx, onnx-int8 or torch, optionally :threads")
    ap.add_argument("--server-path", default="",
                    help="run the server from this checkout's server/ and client/ (comparisons)")
    args = ap.parse_args()
    counts = [int(x) for x in args.clients.split(",")]
    texts, questions = corpus(args.preload + 2000, 1000)
    stored, questions = texts[args.preload:], questions

    cores = os.cpu_count() or 1
    threads = sorted({max(1, cores // 2), cores})
    raw_store = {t: raw_encode_rate(stored[:1024], t) for t in threads}
    raw_recall = {t: raw_encode_rate(questions[:1024], t) for t in threads}
    best_store, best_recall = max(raw_store.values()), max(raw_recall.values())
    print("raw batched encode (64 per batch), sentences/s by torch threads:")
    print(f"  store texts   {', '.join(f'{t}: {r:.0f}' for t, r in raw_store.items())}")
    print(f"  recall texts  {', '.join(f'{t}: {r:.0f}' for t, r in raw_recall.items())}")

    encoders = args.encoders.split(",")
    print("\n| encoder | backend | clients | phase | op | calls/s | p50 ms | p99 ms | share of raw "
          "| errors |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    failed = 0
    rates: dict[tuple[str, str, int, str, str], float] = {}
    for backend, encoder in [(b, e) for b in args.backends.split(",") for e in encoders]:
        with tempfile.TemporaryDirectory(prefix="celestial-load-") as data_dir:
            proc, address = start_server(backend, data_dir, args.server_path, encoder)
            try:
                ids = asyncio.run(preload(address, texts[:args.preload]))
                for n in counts:
                    for name in args.phases.split(","):
                        mix = PHASES[name]
                        tally, took = asyncio.run(
                            phase(address, n, args.seconds, mix, stored, questions, ids))
                        errors = ", ".join(f"{k}: {v}" for k, v in tally.errors.items()) or "0"
                        failed += sum(tally.errors.values())
                        for op, ms in sorted(tally.ms.items()):
                            rate = len(ms) / took
                            rates[encoder, backend, n, name, op] = rate
                            ref = {"store": best_store, "recall": best_recall}.get(op)
                            share = f"{rate / ref:.0%}" if ref and name == op else ""
                            print(f"| {encoder} | {backend} | {n} | {name} | {op} | {rate:.1f} | "
                                  f"{percentile(ms, 0.5):.1f} | {percentile(ms, 0.99):.1f} | "
                                  f"{share} | {errors} |", flush=True)
            finally:
                proc.terminate()
                proc.wait(60)
    if len(encoders) > 1:
        base = encoders[-1]
        print(f"\ncalls/s as a ratio to {base}'s in this run:")
        print("| encoder | backend | clients | phase | op | ratio |\n|---|---|---|---|---|---|")
        for (encoder, backend, n, name, op), rate in rates.items():
            theirs = rates.get((base, backend, n, name, op))
            if encoder != base and theirs:
                print(f"| {encoder} | {backend} | {n} | {name} | {op} | {rate / theirs:.2f} |")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
