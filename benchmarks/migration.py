"""Export / Import throughput through gRPC: embedded -> file -> qdrant-client :memory: -> file ->
embedded, N memories (default 10,000) with 384-d vectors given (no embedding), timed per leg.

    python benchmarks/migration.py [--memories 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import numpy as np
from celestial_client import CelestialClient
from celestial_client.cli import dump_file
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.domain.importance import DefaultEvaluator
from celestial_memory.domain.requests import NewMemory
from celestial_memory.memory.service import MemoryService
from celestial_memory.store import MemoryRepository, open_edge, open_qdrant

DIM = 384
T = "bench"


class NoEmbedder:
    name = "precomputed"
    dimension = DIM

    def embed(self, texts: object) -> np.ndarray:
        raise AssertionError("vectors are given")


def service(store: MemoryRepository, path: Path) -> MemoryService:
    s = Settings(data_dir=path, rebalance_interval_s=0, optimize_interval_s=0)
    return MemoryService(s, store, NoEmbedder(), ManualClock(1_750_000_000.0), DefaultEvaluator())


def leg(label: str, src: int, dst: int, path: Path, n: int) -> None:
    with CelestialClient(f"127.0.0.1:{src}", tenant=T) as a, \
            CelestialClient(f"127.0.0.1:{dst}", tenant=T) as b:
        t = time.perf_counter()
        with path.open("wb") as out:
            count = sum(1 for _ in dump_file.write(out, a.export()))
        exp = time.perf_counter() - t
        t = time.perf_counter()
        imported = b.import_memories(dump_file.read(path)).imported
        imp = time.perf_counter() - t
    assert count == imported == n
    print(f"{label}: export {n / exp:,.0f}/s ({exp:.2f} s), import {n / imp:,.0f}/s ({imp:.2f} s), "
          f"file {path.stat().st_size / 2**20:.1f} MiB")


async def main_async(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        a = service(open_edge(root / "a", DIM), root)
        rng = np.random.default_rng(1)
        vec = rng.standard_normal((n, DIM)).astype(np.float32)
        a.store_many(T, [NewMemory(f"memory {i}", vector=v, tags=["t"], metadata={"i": str(i)},
                                   context="previous" if i % 2 else "")
                         for i, v in enumerate(vec)])
        b = service(open_qdrant(":memory:", DIM, "bench"), root)
        c = service(open_edge(root / "c", DIM), root)
        servers = [MemoryServer(s, "127.0.0.1:0") for s in (a, b, c)]
        for srv in servers:
            await srv.start()
        try:
            await asyncio.to_thread(leg, "embedded -> :memory:", servers[0].port, servers[1].port,
                                    root / "1.bin", n)
            await asyncio.to_thread(leg, ":memory: -> embedded", servers[1].port, servers[2].port,
                                    root / "2.bin", n)
        finally:
            for srv in servers:
                await srv.stop(0)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=10_000)
    asyncio.run(main_async(ap.parse_args().memories))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
