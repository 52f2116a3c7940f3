"""Three scenario cases of the memory function (docs/design.md, "The memory function"): black-hole
prevention, recall resets freshness, core capacity."""

from __future__ import annotations

import numpy as np
from celestial_memory.clock import ManualClock
from celestial_memory.domain.requests import NewMemory, RecallQuery
from celestial_memory.domain.scoring import MemoryFunction
from celestial_memory.domain.zones import Zone, ZoneTable
from celestial_memory.memory.service import MemoryService

from tests.conftest import unit_vectors

fn = MemoryFunction()
zones = ZoneTable()
DAY = 86_400.0


def test_blackhole_prevention() -> None:
    """A memory that is not recalled must drift outward."""
    t0 = 1_000_000.0
    s0 = fn.breakdown(recall_count=1000, last_recalled_at=t0, importance=1.0, context=0.0, now=t0)
    z0 = zones.zone_of_score(s0.total)
    assert z0 <= Zone.INNER
    s1 = fn.breakdown(1000, t0, 1.0, 0.0, t0 + DAY)
    assert zones.zone_of_score(s1.total) > z0
    s7 = fn.breakdown(1000, t0, 1.0, 0.0, t0 + 7 * DAY)
    # One might expect s7 < s1, but with F floored at -1 after one day (docs/design.md) the
    # score stops falling there: a week is no worse than a day.
    assert s7.total <= s1.total
    assert s7.total == s1.total


def test_no_memory_stays_in_core_a_day_without_recall() -> None:
    best = fn.total(10**6, 0.0, 1.0, 1.0, DAY)
    assert zones.zone_of_score(float(best)) > Zone.CORE


def test_recall_resets_freshness() -> None:
    t0 = 1_000_000.0
    stale = fn.breakdown(0, t0, 0.5, 0.0, t0 + DAY)
    fresh = fn.breakdown(1, t0 + DAY, 0.5, 0.0, t0 + DAY)
    assert fresh.freshness == 0.0
    assert fresh.total > stale.total


def test_recall_through_the_service_resets_freshness(
    service: MemoryService, clock: ManualClock
) -> None:
    v = unit_vectors(1)[0]
    m = service.store_memory("t", NewMemory("a fact", importance=0.5, vector=v.tolist()))
    clock.advance(DAY)
    assert service.breakdown(service.get("t", m.id)).freshness == -1.0
    (r,) = service.recall("t", RecallQuery(query_vector=v.tolist(), limit=1))
    assert r.breakdown.freshness == 0.0
    assert service.breakdown(service.get("t", m.id)).freshness == 0.0


def test_core_zone_capacity(service: MemoryService) -> None:
    """Core never holds more than 20, even when 30 memories earn it."""
    vectors = unit_vectors(30, seed=7)
    ids = [
        service.store_memory("t", NewMemory(f"important memory {i}", importance=1.0,
                                            vector=v.tolist())).id
        for i, v in enumerate(vectors)
    ]
    assert service.stats("t").zones[Zone.CORE].count == 0  # new memories score ≤ 0.25
    # Recalling each by its own vector (C = 1) twenty times earns Core: 0.25·R(20) + 0.45 > 0.5.
    assert fn.total(20, 0.0, 1.0, 1.0, 0.0) >= 0.5
    for _ in range(20):
        for v in vectors:
            service.recall("t", RecallQuery(query_vector=v.tolist(), limit=1))
    stats = service.stats("t")
    assert stats.zones[Zone.CORE].count == 20
    assert stats.zones[Zone.INNER].count == 10
    scores = np.array([service.get("t", i).score for i in ids])
    assert (scores >= 0.5).sum() == 30  # all 30 earned Core; capacity kept 10 out
