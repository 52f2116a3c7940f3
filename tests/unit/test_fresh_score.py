"""A memory at age zero scores exactly what docs/design.md defines (R = F = C = 0, I = w_a·A),
one by one and vectorised, and a last recall a hair after ``now`` (another clock's time) is
age zero too, never a tiny negative term."""

from __future__ import annotations

import math

import numpy as np
import pytest
from celestial_memory.domain.scoring import MemoryFunction

fn = MemoryFunction()
# Times as a server reads them: whole seconds, and time.time()'s fractions.
NOWS = [0.0, 1_000_000.0, 1_700_000_000.0, 1_785_000_000.123456, 1_796_920_570.548279762]
IMPORTANCES = [0.0, 0.3, 0.5, 0.8, 1.0]


def _is_plus_zero(x: float) -> bool:
    return x == 0.0 and math.copysign(1.0, x) == 1.0


@pytest.mark.parametrize("now", NOWS)
@pytest.mark.parametrize("importance", IMPORTANCES)
def test_a_new_memory_scores_exactly_a_quarter_of_its_importance(
    now: float, importance: float
) -> None:
    b = fn.breakdown(0, now, importance, 0.0, now)
    assert _is_plus_zero(b.recall) and _is_plus_zero(b.freshness) and _is_plus_zero(b.context)
    assert b.importance == importance
    assert b.total == fn.w_importance * importance  # exactly: no term adds a rounding error
    assert min(b.recall, b.freshness, b.importance, b.context, b.total) >= 0.0


def _skewed(now: float) -> list[float]:
    """Last-recall times just after ``now``: the next double, then a nanosecond, a microsecond and
    a millisecond later (where a double that large can tell them from ``now``)."""
    later = [float(np.nextafter(now, math.inf)), now + 1e-9, now + 1e-6, now + 1e-3]
    return [t if t > now else later[0] for t in later]


@pytest.mark.parametrize("now", NOWS)
def test_a_last_recall_a_hair_after_now_is_age_zero(now: float) -> None:
    for last in _skewed(now):
        b = fn.breakdown(0, last, 0.8, 0.0, now)
        assert _is_plus_zero(b.freshness), (now, last, b)
        assert b == fn.breakdown(0, now, 0.8, 0.0, now)


@pytest.mark.parametrize("now", NOWS)
def test_the_vectorised_path_agrees_at_age_zero_and_under_skew(now: float) -> None:
    last = np.array([now, *_skewed(now)] * len(IMPORTANCES))
    a = np.repeat(IMPORTANCES, 5)
    r, f, aa, c, total = fn.terms(np.zeros(len(last)), last, a, np.zeros(len(last)), now)
    for term in (r, f, c):
        assert (term == 0.0).all() and not np.signbit(term).any()
    np.testing.assert_array_equal(aa, a)
    np.testing.assert_array_equal(total, fn.w_importance * a)
    np.testing.assert_array_equal(fn.freshness(last, now), np.zeros(len(last)))
    assert not np.signbit(fn.freshness(last, now)).any()
    one = [fn.breakdown(0, float(t), float(x), 0.0, now).total for t, x in zip(last, a, strict=True)]
    np.testing.assert_array_equal(total, one)


def test_every_term_stays_within_its_defined_bounds_at_any_age() -> None:
    # R, A, C in [0, 1] and F in [-1, 0] (docs/design.md): only F, by design, goes below zero,
    # and only as the memory ages.
    rng = np.random.default_rng(7)
    now = 1_785_000_000.0
    last = now + rng.uniform(-3 * 86_400, 1.0, 2000)
    n = rng.integers(0, 5000, 2000)
    a = rng.uniform(0, 1, 2000)
    c = rng.uniform(-1, 1.5, 2000)
    r, f, _, cc, _ = fn.terms(n, last, a, c, now)
    assert ((r >= 0) & (r <= 1)).all() and ((cc >= 0) & (cc <= 1)).all()
    assert ((f >= -1) & (f <= 0)).all()
    assert not np.signbit(f[last >= now]).any()
