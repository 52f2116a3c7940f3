"""Forgetting that loses nothing: the archive, deep recall, restore, retention and erasure, on
every backend (service level, manual clock, vectors given so the tests choose the
similarities)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.domain.models import REINFORCED, MemoryFilter
from celestial_memory.domain.requests import Imported, MemoryChanges, NewMemory, RecallQuery
from celestial_memory.domain.zones import Zone
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.errors import FailedPrecondition, InvalidArgument, NotFound
from celestial_memory.memory.service import MemoryService
from celestial_memory.store.engine import LEDGER, MEMORIES
from celestial_memory.store.payload import DENSE

from tests.conftest import open_backend, unit_vectors

DAY = 86_400.0
T = "arch"


@pytest.fixture
def svc(
    tmp_path: Path, backend_kind: str, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> Iterator[MemoryService]:
    settings = Settings(data_dir=tmp_path, rebalance_interval_s=0, archive_retention_days=30)
    s = build_service(settings, embedder=embedder, store=open_backend(backend_kind, tmp_path),
                      clock=clock)
    yield s
    s.close()


def recall(svc: MemoryService, v: np.ndarray, **kw: object) -> list[tuple[str, bool]]:
    # Own vectors score 1.0 and random others about 0: a gate of 0.5 finds exactly the intended.
    q = RecallQuery(query_vector=v.tolist(), limit=kw.pop("limit", 1),  # type: ignore[arg-type]
                    min_relevance=0.5, **kw)  # type: ignore[arg-type]
    return [(r.memory.id, r.archived) for r in svc.recall(T, q)]


def forgotten_one(svc: MemoryService, clock: ManualClock) -> tuple[list[str], np.ndarray]:
    """Three memories: the first neglected for 91 days (archived by the rebalance), the second
    recalled on day 89, the third pinned."""
    v = unit_vectors(3, seed=21)
    ids = [m.id for m in svc.store_many(T, [
        NewMemory(f"memory {i}", importance=0.0, vector=x.tolist(), session_id="s1")
        for i, x in enumerate(v)])]
    svc.update(T, ids[2], MemoryChanges(pinned=True))
    recall(svc, v[0])  # one recall, so the history has something to keep
    clock.advance(89 * DAY)
    recall(svc, v[1])
    clock.advance(2 * DAY)
    assert svc.rebalance(T).forgotten == 1
    return ids, v


def test_a_forgotten_memory_is_archived_outside_recall_capacity_and_stats(
    svc: MemoryService, clock: ManualClock
) -> None:
    ids, v = forgotten_one(svc, clock)
    m = svc.get(T, ids[0])
    assert m.archived and m.archived_at == clock.now() and m.recall_count == 1
    stats = svc.stats(T)
    assert stats.total == 2 and stats.archived == 1
    assert sum(z.count for z in stats.zones) == 2
    # Not in a plain recall, nor in List and Recent; the archive lists it.
    assert recall(svc, v[0], deep=False) == []
    assert ids[0] not in [x.id for x in svc.listing.in_id_order(T, MemoryFilter(), 10)[0]]
    assert ids[0] not in [x.id for x in svc.listing.recent(T, MemoryFilter(), 10)[0]]
    assert [x.id for x in svc.listing.in_id_order(T, MemoryFilter(), 10, archived=True)[0]] == [
        ids[0]]
    assert [x.id for x in svc.listing.recent(T, MemoryFilter(session_id="s1"), 10,
                                             archived=True)[0]] == [ids[0]]
    with pytest.raises(InvalidArgument, match=r"filter\.zones"):
        svc.listing.in_id_order(T, MemoryFilter(zones=[Zone.CLOUD]), 10, archived=True)
    # Capacity counts only the zones: a tiny Cloud-bound count has nothing of the archive.
    assert svc.store.count_by_zone(T)[Zone.CLOUD] + svc.store.count_by_zone(T)[Zone.BELT] <= 2
    # Nothing is forgotten twice.
    assert svc.rebalance(T).forgotten == 0
    assert [e.reason for e in svc.ledger(T, memory_id=ids[0])] == ["forgotten"]
    # It can only be restored or deleted.
    with pytest.raises(FailedPrecondition, match="archived"):
        svc.update(T, ids[0], MemoryChanges(importance=0.9))


def test_deep_recall_finds_the_archive_only_when_the_zones_fall_short(
    svc: MemoryService, clock: ManualClock
) -> None:
    ids, v = forgotten_one(svc, clock)
    # The zones have nothing above the gate for v[0]: the deep recall (the default) searches
    # the archive, marks what it found there and does not reinforce it.
    assert recall(svc, v[0]) == [(ids[0], True)]
    assert svc.get(T, ids[0]).recall_count == 1 and svc.get(T, ids[0]).archived
    assert recall(svc, v[0], deep=False) == []
    # A limit the zones fill: the archive is not searched; asked for, it is.
    assert recall(svc, v[1]) == [(ids[1], False)]
    both = recall(svc, (v[1] + v[0]) / np.linalg.norm(v[1] + v[0]), limit=1,
                  include_archived=True)
    assert len(both) == 1
    got = dict(recall(svc, v[0], limit=5, include_archived=True))
    assert got == {ids[0]: True}
    # A filter that names zones keeps to them.
    q = RecallQuery(query_vector=v[0].tolist(), limit=1, min_relevance=0.5,
                    include_archived=True, filter=MemoryFilter(zones=[Zone.CLOUD]))
    assert svc.recall(T, q) == []


def test_restore_brings_it_back_with_its_history(svc: MemoryService, clock: ManualClock) -> None:
    ids, v = forgotten_one(svc, clock)
    clock.advance(DAY)
    m = svc.restore(T, ids[0])
    assert not m.archived and m.recall_count == 1 and m.last_recalled_at == clock.now()
    assert m.zone == svc.zones.zone_of_score(m.score)
    assert svc.get(T, ids[0]).zone == m.zone and not svc.get(T, ids[0]).archived
    events = svc.ledger(T, memory_id=ids[0])
    assert [(e.reason, e.from_zone, e.to_zone) for e in events] == [
        ("forgotten", Zone.CLOUD, None), ("restored", Zone.CLOUD, m.zone)]
    assert svc.stats(T).archived == 0 and svc.stats(T).total == 3
    assert recall(svc, v[0], deep=False) == [(ids[0], False)]
    assert svc.restore(T, ids[0]).id == ids[0]  # a retry answers it as it is
    with pytest.raises(NotFound):
        svc.restore(T, "00000000-0000-4000-8000-000000000000")
    # Neglected again, it is archived again, as a new event.
    clock.advance(91 * DAY)
    assert svc.rebalance(T).forgotten >= 1
    assert [e.reason for e in svc.ledger(T, memory_id=ids[0])] == [
        "forgotten", "restored", "forgotten"]


def test_retention_purges_the_archive_for_good(svc: MemoryService, clock: ManualClock) -> None:
    ids, _ = forgotten_one(svc, clock)
    clock.advance(29 * DAY)
    rep = svc.rebalance(T, dry_run=True)
    assert rep.purged == 0
    clock.advance(2 * DAY)
    assert svc.rebalance(T, dry_run=True).purged == 1 and svc.get(T, ids[0]).archived
    assert svc.rebalance(T, forget=False).purged == 0  # no forgetting this time, no purge
    assert svc.rebalance(T).purged == 1
    with pytest.raises(NotFound):
        svc.get(T, ids[0])
    assert svc.store.engine.retrieve(MEMORIES, [ids[0]], vectors=[DENSE]) == []
    purged = svc.ledger(T, memory_id=ids[0])[-1]
    assert purged.reason == "purged" and purged.content_hash
    assert svc.stats(T).archived == 0


def test_delete_erases_an_archived_memory_and_its_vectors(
    svc: MemoryService, clock: ManualClock
) -> None:
    ids, v = forgotten_one(svc, clock)
    clock.advance(60)  # events of one time are read in id order
    assert svc.delete(T, ids[0])
    assert svc.store.engine.retrieve(MEMORIES, [ids[0]], vectors=[DENSE]) == []
    assert recall(svc, v[0], include_archived=True) == []
    events = svc.ledger(T, memory_id=ids[0])
    assert [e.reason for e in events] == ["forgotten", "deleted"]
    assert all(e.content_hash == "" for e in events)  # the tombstone, and nothing to match
    assert not svc.delete(T, ids[0])
    # A live one too, and by filter (which reaches the archive as well).
    assert svc.delete(T, ids[1])
    assert [e.reason for e in svc.ledger(T, memory_id=ids[1])] == ["deleted"]
    clock.advance(91 * DAY)
    svc.update(T, ids[2], MemoryChanges(pinned=False))
    clock.advance(91 * DAY)
    assert svc.rebalance(T).forgotten == 1
    assert svc.delete_by_filter(T, MemoryFilter(session_id="s1")) == 1
    assert svc.store.engine.count(MEMORIES, []) == 0
    assert all(r.payload.get("content_hash", "") == ""
               for r in svc.store.engine.scroll(LEDGER, [], 100, None)[0]
               if r.payload.get("kind") == "event")


def test_export_and_import_carry_the_archive(
    svc: MemoryService, clock: ManualClock, tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    ids, v = forgotten_one(svc, clock)
    exported = [m for page in svc.transfer.export_pages(T) for m in page]
    assert {m.id: m.archived for m in exported} == {ids[0]: True, ids[1]: False, ids[2]: False}
    other = build_service(Settings(data_dir=tmp_path / "b", rebalance_interval_s=0),
                          embedder=embedder, store=open_backend("edge", tmp_path / "b"),
                          clock=clock)
    try:
        items = [Imported(m, m.index.context_dense if m.index else None) for m in exported]
        assert other.transfer.import_batch("b", items) == (3, 0)
        m = other.get("b", ids[0])
        assert m.archived and m.archived_at == svc.get(T, ids[0]).archived_at
        assert other.stats("b").archived == 1 and other.stats("b").total == 2
        q = RecallQuery(query_vector=v[0].tolist(), limit=1, min_relevance=0.5)
        assert [(r.memory.id, r.archived) for r in other.recall("b", q)] == [(ids[0], True)]
    finally:
        other.close()


def test_a_late_reinforcement_never_brings_back_an_archived_memory(
    svc: MemoryService, clock: ManualClock
) -> None:
    ids, _ = forgotten_one(svc, clock)
    m = svc.get(T, ids[0])
    m.zone, m.recall_count = Zone.INNER, 7  # a reinforcement queued before the forgetting
    svc.store.save(T, [m], REINFORCED)
    got = svc.get(T, ids[0])
    assert got.archived and got.recall_count == 1 and svc.stats(T).archived == 1


def test_deleting_an_id_again_after_it_was_stored_again_leaves_two_tombstones(
    svc: MemoryService, clock: ManualClock
) -> None:
    mid = "00000000-0000-4000-8000-0000000000aa"
    for _ in range(2):
        svc.store_memory(T, NewMemory("a note", id=mid, vector=unit_vectors(1)[0].tolist()))
        clock.advance(60)
        assert svc.delete(T, mid)
        clock.advance(60)
    assert [e.reason for e in svc.ledger(T, memory_id=mid)] == ["deleted", "deleted"]
