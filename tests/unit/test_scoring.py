"""R, F, A, C and I of docs/design.md, "The memory function" (R clamped, F = -1 after a day)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from celestial_memory.domain.scoring import MemoryFunction

fn = MemoryFunction()
DAY = 86_400.0


def test_recall_score_is_log_scaled_and_saturates_at_the_cap() -> None:
    assert fn.recall_score(0) == 0.0
    assert fn.recall_score(1) == pytest.approx(math.log(2) / math.log(1001))
    assert fn.recall_score(999) == pytest.approx(math.log(1000) / math.log(1001))
    assert fn.recall_score(1000) == 1.0


def test_recall_score_is_clamped_above_the_cap() -> None:
    # The claim that the log alone stays below 1 is false: ln(1+n)/ln(1001) > 1 here.
    assert math.log(1 + 5000) / math.log(1001) > 1.0
    assert fn.recall_score(5000) == 1.0
    assert fn.recall_score(10**9) == 1.0


def test_freshness_is_zero_at_recall_and_falls_linearly() -> None:
    t0 = 1_000_000.0
    assert fn.freshness(t0, t0) == 0.0
    assert fn.freshness(t0, t0 + DAY / 2) == pytest.approx(-0.5)
    assert fn.freshness(t0, t0 + 3600) == pytest.approx(-3600 * 0.001 / 86.4)


def test_freshness_reaches_minus_one_after_one_day_and_stays() -> None:
    t0 = 1_000_000.0
    assert fn.freshness(t0, t0 + DAY) == -1.0
    assert fn.freshness(t0, t0 + 7 * DAY) == -1.0
    assert fn.freshness(t0, t0 + DAY - 60) > -1.0


def test_freshness_ignores_a_last_recall_in_the_future() -> None:
    assert fn.freshness(2_000.0, 1_000.0) == 0.0


def test_context_is_clamped_to_unit_interval() -> None:
    assert fn.total(0, 0.0, 0.0, -0.7, 0.0) == 0.0
    assert fn.total(0, 0.0, 0.0, 1.5, 0.0) == pytest.approx(0.20)
    assert fn.total(0, 0.0, 0.0, 0.5, 0.0) == pytest.approx(0.10)


def test_importance_enters_with_its_weight() -> None:
    assert fn.total(0, 0.0, 1.0, 0.0, 0.0) == pytest.approx(0.25)
    assert fn.total(0, 0.0, 0.4, 0.0, 0.0) == pytest.approx(0.10)


def test_total_is_the_weighted_sum() -> None:
    now = 10_000.0
    b = fn.breakdown(recall_count=10, last_recalled_at=now - 3600, importance=0.6,
                     context=0.4, now=now)
    expected = 0.25 * b.recall + 0.30 * b.freshness + 0.25 * 0.6 + 0.20 * 0.4
    assert b.total == pytest.approx(expected)
    assert b.total == pytest.approx(float(fn.total(10, now - 3600, 0.6, 0.4, now)))


def test_maximum_score_is_0_70() -> None:
    assert fn.total(10**6, 0.0, 1.0, 1.0, 0.0) == pytest.approx(0.70)


def test_new_memory_scores_a_quarter_of_its_importance() -> None:
    for a in (0.0, 0.3, 1.0):
        assert fn.total(0, 5.0, a, 0.0, 5.0) == pytest.approx(0.25 * a)


def test_vectorised_scores_equal_one_by_one_scores() -> None:
    rng = np.random.default_rng(1)
    n = rng.integers(0, 3000, 500)
    last = rng.uniform(0, 3 * DAY, 500)
    a = rng.uniform(0, 1, 500)
    c = rng.uniform(-0.2, 1.2, 500)
    now = 3 * DAY
    vec = fn.total(n, last, a, c, now)
    one = [fn.breakdown(int(n[i]), last[i], a[i], c[i], now).total for i in range(500)]
    np.testing.assert_allclose(vec, one, rtol=0, atol=1e-12)
