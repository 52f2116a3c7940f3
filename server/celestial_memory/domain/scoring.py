"""The memory function I(m) = w_r·R + w_f·F + w_a·A + w_c·C (docs/design.md, "The memory function").

Scoring is vectorised: callers pass numpy arrays (or scalars) and get arrays back, so a
rebalance scores 100,000 memories in one pass. ``breakdown`` is the one-memory view.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from celestial_memory.config import Settings

FloatArray = npt.NDArray[np.float64]
ArrayLike = npt.ArrayLike


@dataclass(frozen=True, slots=True)
class ScoreBreakdown:
    recall: float
    freshness: float
    importance: float
    context: float
    total: float


@dataclass(frozen=True, slots=True)
class MemoryFunction:
    w_recall: float = 0.25
    w_freshness: float = 0.30
    w_importance: float = 0.25
    w_context: float = 0.20
    recall_cap: int = 1000
    alpha: float = 0.001
    floor: float = -86.4

    @classmethod
    def from_settings(cls, s: Settings) -> MemoryFunction:
        return cls(
            s.w_recall, s.w_freshness, s.w_importance, s.w_context,
            s.recall_cap, s.freshness_alpha, s.freshness_floor,
        )

    def recall_score(self, recall_count: ArrayLike) -> FloatArray:
        """R = min(1, ln(1+n)/ln(1+cap)): the log alone does not bound it for n > cap."""
        n = np.maximum(np.asarray(recall_count, dtype=np.float64), 0.0)
        return np.asarray(np.minimum(1.0, np.log1p(n) / np.log1p(self.recall_cap)), np.float64)

    def freshness(self, last_recalled_at: ArrayLike, now: float) -> FloatArray:
        """F = max(-alpha·Δt, floor)/|floor|: 0 at recall, -1 after |floor|/alpha seconds."""
        # An age is never negative: a last recall a hair after ``now`` (read from another clock,
        # or a moment later) is age zero, where F is 0, its maximum.
        dt = np.maximum(now - np.asarray(last_recalled_at, dtype=np.float64), 0.0)
        # + 0.0: at age zero exactly 0, not the -0.0 the product gives (JSON prints the sign).
        return np.maximum(-self.alpha * dt, self.floor) / abs(self.floor) + 0.0

    def total(
        self,
        recall_count: ArrayLike,
        last_recalled_at: ArrayLike,
        importance: ArrayLike,
        context: ArrayLike,
        now: float,
    ) -> FloatArray:
        return self.terms(recall_count, last_recalled_at, importance, context, now)[4]

    def terms(
        self,
        recall_count: ArrayLike,
        last_recalled_at: ArrayLike,
        importance: ArrayLike,
        context: ArrayLike,
        now: float,
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
        """R, F, A, C (clipped to [0, 1]) and the total, each an array."""
        r = self.recall_score(recall_count)
        f = self.freshness(last_recalled_at, now)
        a = np.asarray(importance, dtype=np.float64)
        c = np.clip(np.asarray(context, dtype=np.float64), 0.0, 1.0)
        return r, f, a, c, self._combine(r, f, a, c)

    def _combine(self, r: FloatArray, f: FloatArray, a: FloatArray, c: FloatArray) -> FloatArray:
        return (
            self.w_recall * r + self.w_freshness * f + self.w_importance * a + self.w_context * c
        )

    def breakdown(
        self,
        recall_count: int,
        last_recalled_at: float,
        importance: float,
        context: float,
        now: float,
    ) -> ScoreBreakdown:
        # One memory's terms in plain floats (a recall converts up to its limit of them; the
        # array forms above cost several times as much for one value), the same formulas.
        r = min(1.0, math.log1p(max(recall_count, 0)) / math.log1p(self.recall_cap))
        f = max(-self.alpha * max(now - last_recalled_at, 0.0), self.floor) / abs(self.floor)
        f += 0.0  # as in ``freshness``: never -0.0
        c = min(max(float(context), 0.0), 1.0)
        total = self.w_recall * r + self.w_freshness * f + self.w_importance * importance
        total += self.w_context * c
        return ScoreBreakdown(r, f, importance, c, total)
