"""Property-based tests over random histories of store / recall / clock advance / pin /
rebalance (hypothesis), on the embedded store with small capacities so that capacity bites.

After every step: capacities hold. After each rebalance: every unpinned memory sits in the zone
of its score unless capacity pushed it further out; nothing unpinned stays in core a day without
a recall; the full and the incremental rebalance agree. A recall never moves what it returns
outward. Pinned memories are never forgotten.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.domain.models import MemoryFilter
from celestial_memory.domain.requests import MemoryChanges, NewMemory, RecallQuery
from celestial_memory.domain.zones import Zone
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.errors import FailedPrecondition
from celestial_memory.memory.service import MemoryService
from celestial_memory.store import open_edge
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.conftest import DIM, unit_vectors

T = "prop"
DAY = 86_400.0
CAPACITIES = [1, 2, 2, 0, 0]
# Lower inner thresholds than the defaults, so that a few recalls reach core and capacity bites.
THRESHOLDS = [0.30, 0.20, 0.10, -0.10]

recall_op = st.tuples(st.just("recall"), st.integers(0, 30), st.integers(1, 4))
store_op = st.tuples(st.just("store"), st.floats(0, 1), st.floats(0, 6 * 3600))
ops = st.one_of(
    store_op,
    store_op,
    st.tuples(st.just("store"), st.floats(0, 1), st.floats(0, 3 * DAY)),
    recall_op,
    recall_op,
    recall_op,
    st.tuples(st.just("advance"), st.floats(0, 6 * 3600)),
    st.tuples(st.just("advance"), st.floats(0, 2 * DAY)),
    st.tuples(st.just("rebalance"), st.booleans()),
    st.tuples(st.just("pin"), st.integers(0, 30), st.booleans()),
)


def check_capacities(svc: MemoryService) -> None:
    for z in svc.stats(T).zones:
        if z.capacity:
            assert z.count <= z.capacity, (z.zone, z.count)


def check_placement(svc: MemoryService, clock: ManualClock) -> None:
    now = clock.now()
    memories = [m for page in svc.store.scan(T, MemoryFilter()) for m in page]
    evicted = {e.memory_id for e in svc.ledger(T, limit=10_000) if e.reason == "capacity"}
    for m in memories:
        if m.pinned:
            continue
        by_score = svc.zones.zone_of_score(
            float(svc.fn.total(m.recall_count, m.last_recalled_at, m.importance, 0.0, now)))
        assert m.zone >= by_score, (m.zone, by_score)
        assert m.zone == by_score or m.id in evicted, (m.zone, by_score)
        if m.zone == Zone.CORE:
            assert now - m.last_recalled_at < DAY


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(initial=st.lists(store_op, min_size=3, max_size=12), then=st.lists(ops, max_size=60))
def test_random_histories_keep_the_zone_invariants(
    initial: list[tuple[Any, ...]], then: list[tuple[Any, ...]],
    embedder: SentenceTransformerEmbedder,
) -> None:
    history = initial + then
    with tempfile.TemporaryDirectory() as tmp:
        clock = ManualClock(1_700_000_000.0)
        store = open_edge(Path(tmp) / "s", DIM)
        svc = build_service(
            Settings(zone_capacities=CAPACITIES, zone_thresholds=THRESHOLDS, auto_forget_days=2.0),
            embedder=embedder, store=store, clock=clock,
        )
        vectors = unit_vectors(64, seed=1)
        ids: list[str] = []
        pinned: set[str] = set()
        try:
            for op in history:
                kind = op[0]
                if kind == "store":
                    _, importance, age = op
                    item = NewMemory(f"m{len(ids)}", importance=float(importance),
                                     vector=vectors[len(ids) % 64].tolist(),
                                     created_at=clock.now() - float(age))
                    ids.append(svc.store_memory(T, item).id)
                elif kind == "recall" and ids:
                    _, idx, limit = op
                    v = vectors[int(idx) % len(ids) % 64]
                    q = RecallQuery(query_vector=v.tolist(), limit=int(limit), min_relevance=0.5)
                    for r in svc.recall(T, q):
                        assert r.memory.zone <= r.found_in  # never outward
                elif kind == "advance":
                    clock.advance(float(op[1]))
                elif kind == "pin" and ids:
                    _, idx, pin = op
                    mid = ids[int(idx) % len(ids)]
                    try:
                        svc.update(T, mid, MemoryChanges(pinned=bool(pin)))
                    except FailedPrecondition as exc:  # forgotten already: archived
                        assert "archived" in str(exc)
                        continue
                    (pinned.add if pin else pinned.discard)(mid)
                elif kind == "rebalance":
                    full = bool(op[1])
                    dry_full = svc.rebalance(T, dry_run=True, full=True)
                    dry_incr = svc.rebalance(T, dry_run=True)
                    assert dry_full.moved == dry_incr.moved
                    rep = svc.rebalance(T, full=full)
                    check_placement(svc, clock)
                    # Seen with --hypothesis-show-statistics: the histories reach these states.
                    event(f"evicted: {rep.evicted > 0}")
                    event(f"forgotten: {rep.forgotten > 0}")
                    event(f"core occupied: {svc.stats(T).zones[Zone.CORE].count > 0}")
                    event(f"pinned present: {bool(pinned)}")
                check_capacities(svc)
            svc.rebalance(T)
            check_capacities(svc)
            kept = svc.store.get(T, list(pinned))  # pinned never forgotten
            assert set(kept) == pinned and not any(m.archived for m in kept.values())
            ledger = svc.ledger(T, limit=10_000)
            event(f"memories stored: {min(len(ids) // 5 * 5, 15)}+")
            event(f"history had a capacity eviction: {any(e.reason == 'capacity' for e in ledger)}")
        finally:
            svc.close()
