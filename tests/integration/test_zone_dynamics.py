"""Reinforcement write-behind, the ledger, forgetting, pinning and the rebalance lease, on every
backend (service level, manual clock, vectors given so the tests choose the similarities)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.domain.requests import MemoryChanges, NewMemory, RecallQuery
from celestial_memory.domain.zones import Zone
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.memory.service import MemoryService
from celestial_memory.store import open_edge
from celestial_memory.zones.reinforcement import ReinforcementQueue

from tests.conftest import open_backend, unit_vectors

DAY = 86_400.0
T = "dyn"


def store_vectors(svc: MemoryService, vectors: np.ndarray, importance: float = 0.5) -> list[str]:
    items = [NewMemory(f"memory {i}", importance=importance, vector=v.tolist())
             for i, v in enumerate(vectors)]
    return [m.id for m in svc.store_many(T, items)]


def recall(svc: MemoryService, v: np.ndarray, limit: int = 1, reinforce: bool = True) -> list[str]:
    # Own vectors score 1.0 and random others about 0: a gate of 0.5 finds exactly the intended.
    q = RecallQuery(query_vector=v.tolist(), limit=limit, reinforce=reinforce, min_relevance=0.5)
    return [r.memory.id for r in svc.recall(T, q)]


@pytest.fixture
def behind(
    tmp_path: Path, backend_kind: str, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> Iterator[MemoryService]:
    """A service that writes reinforcement behind (the default writes it through)."""
    settings = Settings(data_dir=tmp_path, rebalance_interval_s=0, reinforce_flush_ms=50)
    svc = build_service(settings, embedder=embedder, store=open_backend(backend_kind, tmp_path),
                        clock=clock)
    yield svc
    svc.close()


def test_recall_is_written_behind_and_read_back(behind: MemoryService) -> None:
    service = behind
    v = unit_vectors(1)[0]
    (mid,) = store_vectors(service, v[None])
    counts = []
    for _ in range(3):
        (r,) = service.recall(T, RecallQuery(query_vector=v.tolist(), limit=1, min_relevance=0.5))
        counts.append(r.memory.recall_count)
    # Each recall counts from the pending state, written or not, so none is lost...
    assert counts == [1, 2, 3]
    # ...and any read through the service flushes first.
    assert service.get(T, mid).recall_count == 3
    assert service.store.get(T, [mid])[mid].recall_count == 3


def test_write_through_is_in_the_store_when_the_recall_returns(
    tmp_path: Path, backend_kind: str, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    settings = Settings(data_dir=tmp_path, rebalance_interval_s=0, reinforce_flush_ms=0)
    svc = build_service(settings, embedder=embedder, store=open_backend(backend_kind, tmp_path),
                        clock=clock)
    try:
        v = unit_vectors(1, seed=3)[0]
        (mid,) = store_vectors(svc, v[None])
        for n in (1, 2, 3):
            clock.advance(60)
            recall(svc, v)
            assert svc.placement.queue.pending() == 0
            stored = svc.store.get(T, [mid])[mid]  # the store itself, no flush asked for
            assert (stored.recall_count, stored.last_recalled_at) == (n, clock.now())
    finally:
        svc.close()


def test_the_flusher_writes_without_being_asked(behind: MemoryService) -> None:
    service = behind
    v = unit_vectors(1, seed=1)[0]
    (mid,) = store_vectors(service, v[None])
    recall(service, v)
    for _ in range(100):  # the bound is 50 ms; allow a slow machine up to 5 s
        if service.store.get(T, [mid])[mid].recall_count == 1:
            break
        threading.Event().wait(0.05)
    assert service.store.get(T, [mid])[mid].recall_count == 1


def test_a_closing_queue_writes_everything_pending(tmp_path: Path) -> None:
    store = open_edge(tmp_path / "s", 4)
    from celestial_memory.domain.models import IndexVectors, Memory, Sparse

    v = np.ones(4, np.float32)
    m = Memory(id="00000000-0000-0000-0000-000000000001", tenant=T, content="x", zone=Zone.OUTER,
               score=0.1, importance=0.5, recall_count=0, created_at=0.0, last_recalled_at=0.0,
               vector=v, index=IndexVectors(v, Sparse([], []), Sparse([], [])))
    store.upsert([m])
    q = ReinforcementQueue(store, write_through=False)
    m.recall_count = 5
    assert q.submit(T, [m]) == set()  # queued, nothing written yet
    m.recall_count = 99  # the queue keeps its own copy of the state submitted
    assert q.pending() == 1 and store.get(T, [m.id])[m.id].recall_count == 0
    assert q.overlay(T, [m.id])[m.id].recall_count == 5
    assert q.close() == {T: {m.id}}
    assert q.pending() == 0
    store.close()
    assert open_edge(tmp_path / "s", 4).get(T, [m.id])[m.id].recall_count == 5
    with pytest.raises(RuntimeError):
        q.submit(T, [m])


def test_recall_without_reinforcement_queues_nothing(service: MemoryService) -> None:
    v = unit_vectors(1, seed=2)[0]
    (mid,) = store_vectors(service, v[None])
    recall(service, v, reinforce=False)
    assert service.placement.queue.pending() == 0
    assert service.get(T, mid).recall_count == 0


def test_capacity_evictions_are_in_the_ledger(service: MemoryService) -> None:
    vectors = unit_vectors(25, seed=5)
    ids = store_vectors(service, vectors, importance=1.0)
    for _ in range(20):
        for v in vectors:
            recall(service, v)
    assert service.stats(T).zones[Zone.CORE].count == 20
    events = service.ledger(T)
    assert len(events) >= 5
    assert all(e.reason == "capacity" and e.to_zone == Zone(e.from_zone + 1) for e in events)
    assert {e.memory_id for e in events} <= set(ids)
    assert len({e.id for e in events}) == len(events)


def test_a_crash_between_the_ledger_and_the_zone_write_leaves_the_event_first(
    tmp_path: Path, backend_kind: str, embedder: SentenceTransformerEmbedder, clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = Settings(data_dir=tmp_path, rebalance_interval_s=0, zone_capacities=[0, 0, 3, 0, 0])
    svc = build_service(settings, embedder=embedder, store=open_backend(backend_kind, tmp_path),
                        clock=clock)
    ids = store_vectors(svc, unit_vectors(3, seed=8))
    assert [svc.get(T, i).zone for i in ids] == [Zone.OUTER] * 3

    def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("killed between the two writes")

    with monkeypatch.context() as m:
        m.setattr(svc.store, "set_zone", crash)
        with pytest.raises(RuntimeError):
            store_vectors(svc, unit_vectors(2, seed=9))
    events = svc.ledger(T)
    assert len(events) == 2 and {e.to_zone for e in events} == {Zone.BELT}
    # The move is not written yet: the next enforcement makes it, under the same event ids.
    assert sum(svc.get(T, e.memory_id).zone == Zone.OUTER for e in events) == 2
    svc.placement.enforce(T)
    assert {svc.get(T, e.memory_id).zone for e in events} == {Zone.BELT}
    assert [e.id for e in svc.ledger(T)] == [e.id for e in events]
    svc.close()


def test_forgetting_archives_and_the_ledger_remembers(
    service: MemoryService, clock: ManualClock
) -> None:
    vectors = unit_vectors(3, seed=6)
    forget_me, pinned, recent = store_vectors(service, vectors, importance=0.0)
    service.update(T, pinned, MemoryChanges(pinned=True))
    clock.advance(89 * DAY)
    recall(service, vectors[2])  # keeps `recent` alive
    clock.advance(2 * DAY)
    dry = service.rebalance(T, dry_run=True)
    assert dry.forgotten == 1 and service.stats(T).total == 3
    rep = service.rebalance(T)
    assert rep.forgotten == 1
    assert service.get(T, forget_me).archived and service.stats(T).total == 2
    assert service.get(T, pinned).pinned and service.get(T, recent).id == recent
    (event,) = [e for e in service.ledger(T) if e.reason == "forgotten"]
    assert (event.memory_id, event.from_zone, event.to_zone) == (forget_me, Zone.CLOUD, None)
    service.rebalance(T)
    assert [e.id for e in service.ledger(T, memory_id=forget_me)] == [event.id]


def test_pinned_memories_do_not_decay_and_unpinning_restores_it(
    service: MemoryService, clock: ManualClock
) -> None:
    v = unit_vectors(2, seed=8)
    pinned, free = store_vectors(service, v, importance=0.8)
    service.update(T, pinned, MemoryChanges(pinned=True))
    clock.advance(3 * DAY)
    service.rebalance(T)
    assert service.get(T, pinned).zone == Zone.OUTER
    assert service.get(T, free).zone == Zone.BELT
    service.update(T, pinned, MemoryChanges(pinned=False))
    service.rebalance(T)
    assert service.get(T, pinned).zone == Zone.BELT


def test_full_and_incremental_rebalances_agree(service: MemoryService, clock: ManualClock) -> None:
    rng = np.random.default_rng(9)
    vectors = unit_vectors(40, seed=9)
    items = [NewMemory(f"m{i}", importance=float(rng.uniform()), vector=v.tolist(),
                       created_at=clock.now() - float(rng.uniform(0, 2 * DAY)))
             for i, v in enumerate(vectors)]
    service.store_many(T, items)
    for v in vectors[:15]:
        recall(service, v, limit=3)
    for hours in (1, 5, 13, 30):
        clock.advance(hours * 3600)
        full = service.rebalance(T, dry_run=True, full=True)
        incremental = service.rebalance(T, dry_run=True)
        assert full.moved == incremental.moved
        service.rebalance(T)
        assert service.rebalance(T, dry_run=True, full=True).moved == {}


def test_rebalance_lease_keeps_replicas_apart(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    store = open_backend("edge", tmp_path)
    a = build_service(Settings(instance_id="A"), embedder=embedder, store=store, clock=clock)
    b = build_service(Settings(instance_id="B"), embedder=embedder, store=store, clock=clock)
    store_vectors(a, unit_vectors(30, seed=10), importance=0.8)
    clock.advance(DAY)
    assert store.acquire_lease(f"rebalance:{T}", "A", clock.now(), 60) == "A"
    assert b.rebalance(T).skipped_by == "A"
    assert a.rebalance(T).moved == {(Zone.OUTER, Zone.BELT): 30}  # A renews its own lease
    clock.advance(DAY)
    assert b.rebalance(T).skipped_by == ""  # A released it when done
    assert store.acquire_lease(f"rebalance:{T}", "A", clock.now(), 60) == "A"
    clock.advance(61)  # A crashed holding it: it expires
    assert b.rebalance(T).skipped_by == ""
    a.placement.close()
    b.close()


def test_concurrent_replicas_rebalance_once(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    store = open_backend("edge", tmp_path)
    settings = Settings(zone_capacities=[20, 100, 10, 0, 0])
    replicas = [build_service(settings.model_copy(update={"instance_id": f"r{i}"}),
                              embedder=embedder, store=store, clock=clock) for i in range(2)]
    store_vectors(replicas[0], unit_vectors(10, seed=11), importance=1.0)
    vectors = unit_vectors(40, seed=12)
    store_vectors(replicas[0], vectors, importance=0.2)
    for v in vectors:
        recall(replicas[0], v)
    replicas[0].stats(T)
    reports = []

    def run(svc: MemoryService) -> None:
        reports.append(svc.rebalance(T))

    threads = [threading.Thread(target=run, args=(r,)) for r in replicas for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done = [r for r in reports if not r.skipped_by]
    assert done, "somebody rebalanced"
    counts = replicas[1].stats(T).zones
    assert counts[Zone.OUTER].count <= 10
    events = replicas[1].ledger(T)
    assert len({e.id for e in events}) == len(events)
    assert len({e.memory_id for e in events}) == len(events)
    replicas[0].placement.close()
    replicas[1].close()


def test_a_restarted_server_takes_back_the_lease_its_killed_predecessor_held(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    store = open_backend("edge", tmp_path)
    settings = Settings(address="localhost:50999", rebalance_interval_s=0)
    other = Settings(address="localhost:50998", rebalance_interval_s=0)  # a replica beside it
    assert settings.instance_id.endswith("/localhost:50999")
    assert settings.instance_id != other.instance_id
    lease = f"rebalance:{T}"
    # The predecessor, same host and address, was killed while it held the lease.
    assert store.acquire_lease(lease, settings.instance_id, clock.now(), 60) == settings.instance_id
    restarted = build_service(settings, embedder=embedder, store=store, clock=clock)
    replica = build_service(other, embedder=embedder, store=store, clock=clock)
    assert restarted.rebalance(T).skipped_by == ""  # no wait for the expiry
    store.acquire_lease(lease, settings.instance_id, clock.now(), 60)
    assert replica.rebalance(T).skipped_by == settings.instance_id  # others still wait
    restarted.placement.close()
    replica.close()


def test_a_write_counts_only_the_zones_its_memories_entered(
    tmp_path: Path, backend_kind: str, embedder: SentenceTransformerEmbedder, clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # New memories land in the outer zone (3 places); the belt holds 2; the inner zone 2.
    settings = Settings(data_dir=tmp_path, rebalance_interval_s=0,
                        zone_capacities=[0, 2, 3, 2, 0])
    svc = build_service(settings, embedder=embedder, store=open_backend(backend_kind, tmp_path),
                        clock=clock)
    try:
        counted: list[tuple[Zone, ...]] = []
        count = svc.store.count

        def spy(tenant: str, selection: Any) -> int:
            counted.append(tuple(selection.zones))
            return count(tenant, selection)

        monkeypatch.setattr(svc.store, "count", spy)
        store_vectors(svc, unit_vectors(3, seed=3))
        assert counted and set(counted) == {(Zone.OUTER,)}  # never the inner zone or the belt
        counted.clear()
        store_vectors(svc, unit_vectors(4, seed=4))  # the outer zone overflows into the belt
        zones = svc.stats(T).zones
        assert zones[Zone.OUTER].count == 3 and zones[Zone.BELT].count <= 2
        assert zones[Zone.CLOUD].count >= 2  # the belt's overflow went on
        assert (Zone.BELT,) in counted and (Zone.INNER,) not in counted
        assert counted.index((Zone.OUTER,)) < counted.index((Zone.BELT,))
    finally:
        svc.close()
