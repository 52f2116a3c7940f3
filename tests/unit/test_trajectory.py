"""Drop times agree with the memory function: just before a drop time the resting score still
reaches the threshold, just after it does not."""

from __future__ import annotations

import numpy as np
from celestial_memory.domain.scoring import MemoryFunction
from celestial_memory.domain.trajectory import ALREADY, NEVER, drop_times
from celestial_memory.domain.zones import ZoneTable

fn = MemoryFunction()
zones = ZoneTable()


def test_drop_times_match_the_score_on_both_sides() -> None:
    rng = np.random.default_rng(3)
    n = rng.integers(0, 2000, 2000)
    last = rng.uniform(0, 1e6, 2000)
    a = rng.uniform(0, 1, 2000)
    times = drop_times(fn, zones, n, last, a)
    thresholds = np.asarray(zones.thresholds)
    finite = (times > ALREADY) & (times < NEVER)
    assert finite.any() and (times == ALREADY).any() and (times == NEVER).any()
    rows, cols = np.nonzero(finite)
    t = times[rows, cols]
    before = fn.total(n[rows], last[rows], a[rows], 0.0, t - 1e-3)
    after = fn.total(n[rows], last[rows], a[rows], 0.0, t + 1e-3)
    assert (before >= thresholds[cols]).all() and (after < thresholds[cols]).all()
    r, c = np.nonzero(times == ALREADY)
    assert (fn.total(n[r], last[r], a[r], 0.0, last[r]) < thresholds[c]).all()
    r, c = np.nonzero(times == NEVER)
    assert (fn.total(n[r], last[r], a[r], 0.0, last[r] + 1e9) >= thresholds[c]).all()


def test_zone_at_any_time_is_the_count_of_passed_drop_times() -> None:
    rng = np.random.default_rng(4)
    n, last, a = rng.integers(0, 50, 500), np.zeros(500), rng.uniform(0, 1, 500)
    times = drop_times(fn, zones, n, last, a)
    for now in (0.0, 3600.0, 40_000.0, 86_400.0, 10 * 86_400.0):
        by_score = zones.zone_of(fn.total(n, last, a, 0.0, now))
        assert (by_score == (times < now).sum(axis=1)).all()
