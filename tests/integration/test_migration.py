"""Export / Import through gRPC: 2,000 memories embedded -> qdrant-client :memory: -> embedded,
with ids, contents and payloads equal and vectors equal to float32 rounding; and a resumed
export."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
from celestial_client import CelestialClient
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.domain.models import Memory
from celestial_memory.domain.requests import NewMemory, RecallQuery
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.memory.service import MemoryService
from celestial_memory.store import open_edge, open_qdrant
from celestial_memory.store.payload import to_payload

from tests.conftest import unit_vectors

# Export pages of 64 (memory/transfer.py): 2,000 memories are 32 pages of each stream, in every
# zone the scores reach, pinned or not, recalled or not. More would only add pages of the same
# kind (10,000 took a minute and a half, most of it in qdrant-client's local mode).
N = 2_000
T = "mig"


def service(kind: str, path: Path, embedder: SentenceTransformerEmbedder,
            clock: ManualClock) -> MemoryService:
    store = (open_edge(path / "edge", embedder.dimension) if kind == "edge"
             else open_qdrant(":memory:", embedder.dimension, "mig"))
    return build_service(Settings(data_dir=path, rebalance_interval_s=0,
                                  optimize_interval_s=0), embedder=embedder, store=store,
                         clock=clock)


def populate(svc: MemoryService, clock: ManualClock) -> None:
    vectors = unit_vectors(N, svc.store.dimension, seed=11)
    rng = np.random.default_rng(3)
    items = [
        NewMemory(f"memory {i} about topic {i % 97}", vector=vectors[i].tolist(),
                  importance=float(rng.uniform()), tags=[f"t{i % 5}"], session_id=f"s{i % 13}",
                  agent_id="agent", metadata={"n": str(i)}, pinned=i % 50 == 0,
                  context=f"previous turn {i - 1}" if i % 3 == 0 else "",
                  created_at=clock.now() - i * 60.0)
        for i in range(N)
    ]
    svc.store_many(T, items)
    for v in vectors[:40]:  # some recall history: counts, freshness, C, zones
        svc.recall(T, RecallQuery(query_vector=v.tolist(), limit=3))
    clock.advance(3600)
    svc.rebalance(T)


def snapshot(svc: MemoryService) -> dict[str, Memory]:
    return {m.id: m for page in svc.store.export_pages(T) for m in page}


async def serve(svc: MemoryService) -> MemoryServer:
    srv = MemoryServer(svc, "127.0.0.1:0")
    await srv.start()
    return srv


def copy(src_port: int, dst_port: int) -> int:
    with CelestialClient(f"127.0.0.1:{src_port}", tenant=T) as src, \
            CelestialClient(f"127.0.0.1:{dst_port}", tenant=T) as dst:
        return dst.import_memories(src.export()).imported


async def test_round_trip_embedded_memory_embedded_loses_nothing(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    clock = ManualClock(1_750_000_000.0)
    a, b, c = (service(k, tmp_path / n, embedder, clock)
               for k, n in (("edge", "a"), ("qdrant-local", "b"), ("edge", "c")))
    populate(a, clock)
    before = snapshot(a)
    assert len(before) == N
    servers = [await serve(s) for s in (a, b, c)]
    try:
        assert await asyncio.to_thread(copy, servers[0].port, servers[1].port) == N
        assert await asyncio.to_thread(copy, servers[1].port, servers[2].port) == N
        after = snapshot(c)
    finally:
        for srv in servers:
            await srv.stop(0)
    assert after.keys() == before.keys()
    for mid, m in before.items():
        got = after[mid]
        assert to_payload(got) == to_payload(m), mid
        # Equal to float32 rounding: a cosine collection normalises what it is given, and
        # normalising a unit vector again may move its last bit (seen: at most 1.5e-8).
        assert got.vector is not None and m.vector is not None
        np.testing.assert_allclose(got.vector, m.vector, rtol=0, atol=1e-7)
        assert got.index is not None and m.index is not None
        np.testing.assert_allclose(got.index.context_dense, m.index.context_dense, rtol=0,
                                   atol=1e-7)


async def test_export_resumes_after_the_last_id(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    clock = ManualClock(1_750_000_000.0)
    svc = service("edge", tmp_path, embedder, clock)
    vectors = unit_vectors(30, embedder.dimension, seed=5)
    svc.store_many(T, [NewMemory(f"m{i}", vector=v.tolist()) for i, v in enumerate(vectors)])
    srv = await serve(svc)
    try:
        def export(after: str = "") -> list[str]:
            with CelestialClient(f"127.0.0.1:{srv.port}", tenant=T) as cl:
                return [r.memory.id for r in cl.export(after_id=after)]

        full = await asyncio.to_thread(export)
        rest = await asyncio.to_thread(export, full[11])
    finally:
        await srv.stop(0)
    assert len(full) == 30 and full == sorted(full)
    assert rest == full[12:]
