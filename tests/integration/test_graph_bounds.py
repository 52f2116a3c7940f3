"""Walks are bounded by what they answer, not by the graph: on a tenant of 2,100 memories with
256 relations each, four concurrent depth-3 Related walks, paged to the end, keep the server's
resident memory within 300 MB of where it started, and a later page is a slice of the first
page's walk rather than a new one. Through gRPC, on both engines."""

from __future__ import annotations

import asyncio
import gc
import uuid
from collections.abc import Iterator

import numpy as np
import pytest
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from celestial_memory.clock import ManualClock
from celestial_memory.domain.models import Edge, IndexVectors, Memory, Sparse
from celestial_memory.domain.zones import Zone
from celestial_memory.graph import walks
from celestial_memory.memory.service import MemoryService

from tests.conftest import unit_vectors
from tests.rss import peak_rss_growth

T = "dense"
N = 2100
DEGREE = 256
def _dense_graph(rng: np.random.Generator) -> list[set[int]]:
    """Each memory related to about DEGREE others, at most DEGREE: 128 random pairings, each
    relation kept at both ends (out at one, in at the other)."""
    out: list[set[int]] = [set() for _ in range(N)]
    inc: list[set[int]] = [set() for _ in range(N)]
    for _ in range(DEGREE // 2):
        for i, j in enumerate(rng.permutation(N)):
            if i != j and j not in out[i] and i not in out[j]:
                out[i].add(int(j))
                inc[int(j)].add(i)
    return [out[i] | {-1 - k for k in inc[i]} for i in range(N)]  # negative: incoming


def _memories(ids: list[str], now: float) -> Iterator[Memory]:
    rng = np.random.default_rng(7)
    graph = _dense_graph(rng)
    vectors = unit_vectors(N, seed=3)
    for i, mid in enumerate(ids):
        edges = [Edge(ids[j] if j >= 0 else ids[-1 - j], "about", 0.9, "caller", now,
                      outgoing=j >= 0) for j in sorted(graph[i])]
        yield Memory(id=mid, tenant=T, content=f"note {i} of the dense graph", zone=Zone.OUTER,
                     score=0.0, importance=0.5, recall_count=0, created_at=now,
                     last_recalled_at=now, written_at=now, vector=vectors[i], edges=edges,
                     index=IndexVectors(vectors[i], Sparse([], []), Sparse([], [])))


@pytest.fixture
async def dense(engine_server: tuple[MemoryService, pb_grpc.MemoryServiceStub], clock: ManualClock,
                ) -> tuple[pb_grpc.MemoryServiceStub, list[str]]:
    """The dense graph, written straight to the store with both ends of every relation, as
    Relate or an Import leaves them: the walks are what is measured, and an Import of it
    took most of a minute."""
    service, stub = engine_server
    ids = [str(uuid.UUID(int=i + 1, version=4)) for i in range(N)]
    memories = list(_memories(ids, clock.now()))
    for at in range(0, N, 300):
        service.store.upsert(memories[at:at + 300])
    assert (await stub.Stats(pb.StatsRequest(tenant=T))).total == N
    return stub, ids


async def _page_through(stub: pb_grpc.MemoryServiceStub, start: str) -> list[str]:
    token, seen = "", []
    while True:
        r = await stub.Related(pb.RelatedRequest(tenant=T, id=start, depth=3, page_size=500,
                                                 page_token=token), timeout=600)
        seen += [m.memory.id for m in r.memories]
        if not (token := r.next_page_token):
            return seen


async def test_concurrent_deep_walks_on_a_dense_graph_stay_bounded(
    dense: tuple[pb_grpc.MemoryServiceStub, list[str]], monkeypatch: pytest.MonkeyPatch,
) -> None:
    stub, ids = dense
    # One walk first, so that what any walk needs once (the engine's pages of the memories,
    # the allocator's arenas) is in the baseline; what four at once add is measured.
    assert len(await _page_through(stub, ids[-1])) == walks.MAX_REACHED
    gc.collect()
    made: list[str] = []
    real_walk = walks.walk

    def counted(*args: object, **kw: object) -> list[walks.Reached]:
        made.append(str(args[2]))
        return real_walk(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(walks, "walk", counted)
    # On a loaded machine four dense walks' pages can come minutes apart; expiry is not what
    # this test is about (test_walks_kept.py holds it to a clock).
    monkeypatch.setattr(walks, "WALK_TTL_S", 3600.0)
    starts = ids[:4]
    with peak_rss_growth() as growth:
        answered = await asyncio.gather(*(_page_through(stub, s) for s in starts))
    for start, seen in zip(starts, answered, strict=True):
        assert len(seen) == len(set(seen)) == walks.MAX_REACHED  # the whole walk, once each
        assert start not in seen
    assert sorted(made) == sorted(starts)  # one walk each, however many pages
    assert growth[0] < 300 * 2**20, f"resident memory grew {growth[0] / 2**20:.0f} MB"
