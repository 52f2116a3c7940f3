"""Poison input and crash ordering at the service: values that could not be sent back are refused
at the door, a bad record already stored does not fail its tenant, metadata keys follow one rule,
error messages stay short, qdrant-client's local mode takes concurrent calls, and a capacity
eviction is in the ledger before the memory moves."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.domain.models import MemoryFilter
from celestial_memory.domain.requests import NewMemory, RecallQuery
from celestial_memory.domain.zones import Zone
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.errors import InvalidArgument
from celestial_memory.memory.service import MemoryService
from celestial_memory.store.engine import MEMORIES, Point
from celestial_memory.store.payload import search_vectors, to_payload

from tests.conftest import open_backend, unit_vectors

T = "poison"


def vec(i: int) -> list[float]:
    return [float(x) for x in unit_vectors(1, seed=i)[0]]


@pytest.mark.parametrize("created_at", [2.0**63 - 1, 1e300, -1e300, float("inf")])
def test_times_that_cannot_be_sent_back_are_refused_and_nothing_is_written(
    service: MemoryService, created_at: float
) -> None:
    with pytest.raises(InvalidArgument, match="created_at"):
        service.store_memory(T, NewMemory("x", created_at=created_at, vector=vec(1)))
    assert service.stats(T).total == 0


@pytest.mark.parametrize("key", ["a:b", "a/b", "$x", "a*", "a b", "a\x00b", "a.b", "", "k" * 65])
def test_metadata_keys_follow_one_rule(service: MemoryService, key: str) -> None:
    with pytest.raises(InvalidArgument, match="metadata"):
        service.store_memory(T, NewMemory("x", metadata={key: "v"}, vector=vec(1)))
    with pytest.raises(InvalidArgument, match="metadata"):
        service.recall(T, RecallQuery(query_vector=vec(1), filter=MemoryFilter(metadata={key: "v"})))


def test_allowed_metadata_keys_are_stored_and_filtered(service: MemoryService) -> None:
    keys = {"lang": "en", "dia_id": "D1:3", "언어": "한국어", "x-y": "1"}
    m = service.store_memory(T, NewMemory("x", metadata=keys, vector=vec(2)))
    for k, v in keys.items():
        flt = MemoryFilter(metadata={k: v})
        got = service.recall(T, RecallQuery(query_vector=vec(2), filter=flt, reinforce=False))
        assert [r.memory.id for r in got] == [m.id], k


@pytest.mark.parametrize("field", ["session_id", "agent_id"])
def test_labels_are_bounded(service: MemoryService, field: str) -> None:
    with pytest.raises(InvalidArgument, match=field):
        service.store_memory(T, NewMemory("x", vector=vec(1), **{field: "s" * 257}))
    with pytest.raises(InvalidArgument, match="tags"):
        service.store_memory(T, NewMemory("x", vector=vec(1), tags=["t" * 257]))
    with pytest.raises(InvalidArgument, match="metadata"):
        service.store_memory(T, NewMemory("x", vector=vec(1), metadata={"k": "v" * 1025}))


def test_a_huge_bad_id_gets_a_short_message(service: MemoryService) -> None:
    with pytest.raises(InvalidArgument) as err:
        service.get(T, "x" * 20_000)
    assert len(str(err.value)) < 200


def test_a_bad_stored_record_does_not_fail_its_tenant(service: MemoryService) -> None:
    good = service.store_memory(T, NewMemory("a good memory", vector=vec(3)))
    bad = service.store_memory(T, NewMemory("a bad memory", vector=vec(3)))
    stored = service.store.get(T, [bad.id], with_vectors=True)[bad.id]
    stored.index = service.retrieval.index_vectors([stored.content], [""], [stored.vector],
                                                   [False])[0]
    payload = {**to_payload(stored), "created_at": 1e300, "last_recalled_at": 9.2e18}
    # Written straight through the engine, as an older version or a hand edit could have.
    service.store.engine.upsert(MEMORIES, [Point(bad.id, search_vectors(stored), payload)])
    assert [m.id for m in service.listing.recent(T, MemoryFilter(), 10)[0]] == [good.id]
    assert [m.id for page in service.transfer.export_pages(T) for m in page] == [good.id]
    got = service.recall(T, RecallQuery(query_vector=vec(3), limit=5))
    assert [r.memory.id for r in got] == [good.id]
    assert service.stats(T).total == 2  # counted, never returned


def test_concurrent_stores_and_recalls_on_every_backend(service: MemoryService) -> None:
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for j in range(8):
                service.store_memory(T, NewMemory(f"m{i}-{j}", vector=vec(100 + i * 8 + j)))
                service.recall(T, RecallQuery(query_vector=vec(100 + i * 8 + j), limit=3))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert service.stats(T).total == 48


def test_a_capacity_eviction_is_in_the_ledger_before_the_memory_moves(
    tmp_path: Path, backend_kind: str, embedder: SentenceTransformerEmbedder, clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = Settings(zone_capacities=[20, 100, 2, 0, 0], rebalance_interval_s=0)
    svc = build_service(settings, embedder=embedder, store=open_backend(backend_kind, tmp_path),
                        clock=clock)
    try:
        svc.store_many(T, [NewMemory(f"m{i}", importance=0.5, vector=vec(200 + i))
                           for i in range(2)])  # outer holds two

        def crash(*args: object, **kwargs: object) -> None:
            raise RuntimeError("killed before the move was written")

        monkeypatch.setattr(svc.store, "set_zone", crash)
        with pytest.raises(RuntimeError, match="killed"):
            svc.store_many(T, [NewMemory("one too many", importance=0.5, vector=vec(202))])
        (event,) = svc.store.read_events(T, None, 100)[0]  # in the ledger, though nothing moved
        assert (event.reason, event.from_zone, event.to_zone) == ("capacity", Zone.OUTER,
                                                                  Zone.BELT)
        assert svc.store.count_by_zone(T)[Zone.OUTER] == 3
        monkeypatch.undo()
        svc.placement.enforce(T)  # what the next write or rebalance does
        assert svc.store.count_by_zone(T)[Zone.OUTER] == 2
        assert [e.id for e in svc.store.read_events(T, None, 100)[0]] == [event.id]  # no copy
    finally:
        svc.close()
