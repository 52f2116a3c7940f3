"""The graph under hostile input, through gRPC on both engines: Import holds relations and
entities to the rules Relate and the extractor follow (naming the record's position); a tenant
holding what an older server let in (ids that are no UUIDs, weights outside [0, 1]) still reads
without INTERNAL; and a relation change cut between its two ends is finished on the next start.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.domain.models import Edge
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.memory.service import MemoryService
from celestial_memory.store.engine import MEMORIES

from tests.conftest import open_backend, unit_vectors

T = "hostile"
NOT_UUID = "not-a-uuid"


def _vec(i: int) -> list[float]:
    return [float(x) for x in unit_vectors(1, seed=i)[0]]


async def _store(stub: pb_grpc.MemoryServiceStub, text: str, i: int) -> str:
    r = await stub.Store(pb.StoreRequest(tenant=T, content=text, vector=_vec(i)))
    return str(r.memory.id)


async def _record(stub: pb_grpc.MemoryServiceStub, mid: str) -> pb.ExportedMemory:
    async for e in stub.Export(pb.ExportRequest(tenant=T)):
        if e.memory.id == mid:
            return e
    raise AssertionError(mid)


def _relation(other: str, weight: float = 0.5, name: str = "about", **kw: Any) -> pb.Relation:
    return pb.Relation(id=other, relation=name, weight=weight, made_by=kw.get("made_by", "caller"),
                       outgoing=kw.get("outgoing", True))


async def _import(stub: pb_grpc.MemoryServiceStub, *records: pb.ExportedMemory) -> Any:
    async def feed() -> AsyncIterator[pb.ExportedMemory]:
        for r in records:
            out = pb.ExportedMemory()
            out.CopyFrom(r)
            out.tenant = T
            yield out
    return await stub.Import(feed())


async def _no_internal_reading(stub: pb_grpc.MemoryServiceStub, ids: list[str]) -> None:
    """Every read that follows relations answers, and no relevance passes 1."""
    for mid in ids:
        for depth in (1, 2, 3):
            await stub.Related(pb.RelatedRequest(tenant=T, id=mid, depth=depth))
    for expand in (1, 2):
        r = await stub.Recall(pb.RecallRequest(tenant=T, query="alpha", limit=6, expand=expand))
        assert all(0.0 <= x.relevance <= 1.0 + 1e-6 for x in r.results)
    await stub.Context(pb.ContextRequest(recall=pb.RecallRequest(tenant=T, query="alpha"),
                                         max_tokens=2000, neighbours=True))


HOSTILE_RELATIONS = {
    "relations[0].id": [_relation(NOT_UUID)],
    "relations[1].weight": [_relation("00000000-0000-4000-8000-000000000001"),
                            _relation("00000000-0000-4000-8000-000000000002", float("nan"))],
    "relations[0].weight": [_relation("00000000-0000-4000-8000-000000000001", float("inf"))],
    "relations[0].relation": [_relation("00000000-0000-4000-8000-000000000001", name="Bad Name")],
    "relations[0].made_by": [_relation("00000000-0000-4000-8000-000000000001",
                                       made_by="\x1b[2J")],
    "memory.relations": [_relation(f"00000000-0000-4000-8000-{i:012d}") for i in range(1, 258)],
}
for w in (-5.0, 50.0, 1e300):
    HOSTILE_RELATIONS[f"weight {w}"] = [_relation("00000000-0000-4000-8000-000000000001", w)]
HOSTILE_ENTITIES = ["", "nokind", "name:" + "k" * 50_000, "name:\x1b[2J", "name:Caroline",
                    "planet:mars"]


async def test_import_refuses_hostile_relations_and_entities_naming_the_record(
    engine_server: tuple[MemoryService, pb_grpc.MemoryServiceStub],
) -> None:
    _, stub = engine_server
    a = await _store(stub, "alpha note one", 1)
    good = await _record(stub, a)
    for shape, relations in HOSTILE_RELATIONS.items():
        rec = pb.ExportedMemory()
        rec.CopyFrom(good)
        del rec.memory.relations[:]
        rec.memory.relations.extend(relations)
        spare = pb.ExportedMemory()
        spare.CopyFrom(good)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await _import(stub, spare, rec)  # the second record: its position is named
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, shape
        assert "memories[1].memory.relations" in (err.value.details() or ""), shape
    for entity in HOSTILE_ENTITIES:
        rec = pb.ExportedMemory()
        rec.CopyFrom(good)
        rec.memory.entities[:] = [entity]
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await _import(stub, rec)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, entity
        assert "memories[0].memory.entities[0]" in (err.value.details() or ""), entity
    # Nothing of the refused records was written: the memory is as it was.
    assert (await _record(stub, a)).memory.relations == good.memory.relations
    await _no_internal_reading(stub, [a])
    # What an export holds imports again, relations and entities included.
    b = await _store(stub, "alpha note two about Caroline in Lisbon", 2)
    await stub.Relate(pb.RelateRequest(tenant=T, from_id=a, to_id=b, relation="about", weight=0.7))
    exported = [await _record(stub, a), await _record(stub, b)]
    assert exported[1].memory.entities
    done = await _import(stub, *exported)
    assert done.skipped == 2  # held already: the same records pass every check


async def test_a_tenant_holding_what_an_older_server_let_in_reads_without_internal(
    engine_server: tuple[MemoryService, pb_grpc.MemoryServiceStub],
) -> None:
    service, stub = engine_server
    a = await _store(stub, "alpha note one", 1)
    b = await _store(stub, "alpha beta gamma", 2)
    c = await _store(stub, "an unrelated note on gardening", 3)
    # Written under the store, as an import before the checks could: an id that is no UUID,
    # weights out of range, a relation to a memory that is gone.
    service.store.graph.write_edges(T, {
        a: [Edge(NOT_UUID, "about", 1.0, "caller", 0.0), Edge(c, "about", 50.0, "caller", 0.0),
            Edge("00000000-0000-4000-8000-000000000009", "about", 1.0, "caller", 0.0)],
        c: [Edge(a, "about", 7.0, "caller", 0.0, False)],
    })
    service.store.engine.set_payload(MEMORIES, {"entities": ["name:\x1b[2J", ""]}, ids=[b])
    await _no_internal_reading(stub, [a, b, c])
    related = await stub.Related(pb.RelatedRequest(tenant=T, id=a, depth=2))
    assert [m.memory.id for m in related.memories] == [c]  # the rest lead nowhere
    assert related.memories[0].path[0].weight == 1.0  # 50 is read as 1: no path passes 1
    await stub.Entities(pb.EntitiesRequest(tenant=T))


async def test_a_relation_change_cut_between_its_ends_is_finished_on_the_next_start(
    tmp_path: Path, backend_kind: str, embedder: SentenceTransformerEmbedder, clock: ManualClock,
) -> None:
    """The process dies after the first end is written (the engine refuses the second): the
    next service over the same store finishes the change, so both ends agree."""
    settings = Settings(data_dir=tmp_path, rebalance_interval_s=0)
    store = open_backend(backend_kind, tmp_path)
    service = build_service(settings, embedder=embedder, store=store, clock=clock)
    from celestial_memory.domain.requests import NewMemory

    a = service.store_memory(T, NewMemory("first", vector=_vec(1))).id
    b = service.store_memory(T, NewMemory("second", vector=_vec(2))).id
    engine = store.engine
    real = engine.set_payloads

    def dies_after_the_first_end(part: Any, updates: Any, where: Any) -> None:
        real(part, updates[:1], where)
        raise SystemExit("killed")

    engine.set_payloads = dies_after_the_first_end  # type: ignore[method-assign]
    with pytest.raises(SystemExit):
        service.relations.relate(T, a, b, "about", 0.5)
    engine.set_payloads = real  # type: ignore[method-assign]
    ends = store.graph.edges_of(T, [a, b])
    assert len(ends[a]) + len(ends[b]) == 1  # torn: one end only
    again = build_service(settings, embedder=embedder, store=store, clock=clock)
    ends = again.store.graph.edges_of(T, [a, b])
    assert [(e.other, e.relation, e.outgoing) for e in ends[a]] == [(b, "about", True)]
    assert [(e.other, e.relation, e.outgoing) for e in ends[b]] == [(a, "about", False)]
    assert again.store.graph.finish_pending() == 0  # finished once, then gone
    again.close()


def _one_sided(service: MemoryService, ids: list[str]) -> list[tuple[str, str, str, bool]]:
    edges = service.store.graph.edges_of(T, ids)
    ends = {(mid, e.other, e.relation, e.outgoing) for mid, es in edges.items() for e in es}
    return [x for x in ends if x[1] in edges and (x[1], x[0], x[2], not x[3]) not in ends]


async def test_an_erasure_cut_before_its_delete_leaves_no_relation_at_one_end(
    engine_server: tuple[MemoryService, pb_grpc.MemoryServiceStub],
) -> None:
    """The erased memory's own relations go in the same change as its neighbours' mirrors: a
    process that dies before the delete leaves it with none, not its neighbours without."""
    service, stub = engine_server
    ids = [await _store(stub, f"note {i}", i) for i in range(3)]
    for other in ids[1:]:
        await stub.Relate(pb.RelateRequest(tenant=T, from_id=ids[0], to_id=other, relation="about"))
    engine = service.store.engine
    real = engine.delete

    def dies(part: Any, where: Any) -> None:
        if part == MEMORIES:
            raise SystemExit("killed")
        real(part, where)

    engine.delete = dies  # type: ignore[method-assign]
    with pytest.raises(SystemExit):
        service.archive.delete(T, ids[0])
    engine.delete = real  # type: ignore[method-assign]
    assert _one_sided(service, ids) == []
    assert service.store.graph.edges_of(T, [ids[0]]) == {ids[0]: []}


async def test_a_relation_past_the_cap_goes_at_both_ends(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock, backend_kind: str,
) -> None:
    """A memory at max_relations that follows a new memory of its session drops its oldest
    relation, and that relation's other end drops it too."""
    from celestial_memory.domain.requests import NewMemory

    service = build_service(Settings(data_dir=tmp_path, rebalance_interval_s=0, max_relations=2),
                            embedder=embedder, store=open_backend(backend_kind, tmp_path),
                            clock=clock)
    p = service.store_memory(T, NewMemory("first of the session", vector=_vec(1),
                                          session_id="s")).id
    a, b = (service.store_memory(T, NewMemory(t, vector=_vec(i))).id
            for i, t in ((2, "alpha"), (3, "beta")))
    service.relations.relate(T, p, a, "about")
    service.relations.relate(T, p, b, "about")
    clock.advance(1)
    nxt = service.store_memory(T, NewMemory("next of the session", vector=_vec(4),
                                            session_id="s")).id
    edges = service.store.graph.edges_of(T, [p, a, b, nxt])
    assert len(edges[p]) == 2 and (nxt, "follows") in {(e.other, e.relation) for e in edges[p]}
    assert edges[a] == []  # the oldest, dropped at p, is gone at a too
    assert _one_sided(service, [p, a, b, nxt]) == []
    service.close()


async def test_the_pages_of_one_walk_are_one_snapshot(
    engine_server: tuple[MemoryService, pb_grpc.MemoryServiceStub],
) -> None:
    _, stub = engine_server
    ids = [await _store(stub, f"note {i}", i) for i in range(12)]
    for other in ids[1:11]:
        await stub.Relate(pb.RelateRequest(tenant=T, from_id=ids[0], to_id=other, relation="r"))
    first = await stub.Related(pb.RelatedRequest(tenant=T, id=ids[0], page_size=4))
    await stub.Relate(pb.RelateRequest(tenant=T, from_id=ids[0], to_id=ids[11], relation="r",
                                       weight=1.0))  # between pages: would sort first
    await stub.Unrelate(pb.UnrelateRequest(tenant=T, from_id=ids[0], to_id=ids[10]))
    seen, token = [m.memory.id for m in first.memories], first.next_page_token
    while token:
        page = await stub.Related(pb.RelatedRequest(tenant=T, id=ids[0], page_size=4,
                                                    page_token=token))
        seen += [m.memory.id for m in page.memories]
        token = page.next_page_token
    assert sorted(seen) == sorted(ids[1:11])  # the first page's walk: no repeat, no gap
    again = await stub.Related(pb.RelatedRequest(tenant=T, id=ids[0], page_size=50))
    assert sorted(m.memory.id for m in again.memories) == sorted([*ids[1:10], ids[11]])


async def test_an_import_leaves_every_relation_known_at_both_ends(
    engine_server: tuple[MemoryService, pb_grpc.MemoryServiceStub],
) -> None:
    """A relation to another tenant's memory is dropped, one to a memory the tenant holds gets
    its mirror (one to an id no one holds waits for the rest of the import), and a replacing
    import that drops relations takes them from the other ends too."""
    service, stub = engine_server
    foreign = (await stub.Store(pb.StoreRequest(tenant="other", content="theirs",
                                                vector=_vec(9)))).memory.id
    y = await _store(stub, "why", 2)
    z = await _store(stub, "zed", 3)
    await stub.Relate(pb.RelateRequest(tenant=T, from_id=y, to_id=z, relation="about"))
    unused = "00000000-0000-4000-8000-0000000000ee"
    x = pb.ExportedMemory()
    x.CopyFrom(await _record(stub, y))
    x.memory.id = "00000000-0000-4000-8000-0000000000e1"
    x.memory.content = "ex"
    del x.memory.relations[:]
    x.memory.relations.extend([_relation(foreign), _relation(unused), _relation(y)])
    await _import(stub, x)
    got = (await stub.Get(pb.GetRequest(tenant=T, id=x.memory.id))).memory
    assert [r.id for r in got.relations] == [unused, y]
    ids = [x.memory.id, y, z]
    assert _one_sided(service, ids) == []
    # The id no one held arrives later in the import, with its side of the relation.
    later = pb.ExportedMemory()
    later.CopyFrom(x)
    later.memory.id, later.memory.content = unused, "later"
    del later.memory.relations[:]
    later.memory.relations.append(_relation(x.memory.id, outgoing=False))
    await _import(stub, later)
    assert _one_sided(service, [*ids, unused]) == []
    # Replaced without its relations: y's relations to x and z leave x and z too.
    bare = await _record(stub, y)
    del bare.memory.relations[:]
    bare.replace = True
    await _import(stub, bare)
    assert _one_sided(service, ids) == []
    assert service.store.graph.edges_of(T, [z])[z] == []
