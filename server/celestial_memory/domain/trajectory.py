"""When a memory will leave each zone if nobody recalls it.

Between writes a memory's resting score (C = 0, as the rebalance scores it) only falls, and at a
known rate: S(t) = base - w_f·min(alpha·(t - last)/|floor|, 1) with base = w_r·R + w_a·A. So at
every write the moment S drops below each zone threshold is known: ``drop_times``. These are
stored as indexed payload fields (store/payload.py ``DROP_FIELDS``), and a rebalance finds every
memory that must move with one range filter per zone instead of rescoring everything.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from celestial_memory.domain.scoring import MemoryFunction
from celestial_memory.domain.zones import ZoneTable

# Finite sentinels (payloads are JSON): "already below" and "never drops below".
ALREADY = -1e18
NEVER = 1e18

FloatArray = npt.NDArray[np.float64]


def resting_base(fn: MemoryFunction, recall_count: npt.ArrayLike, importance: npt.ArrayLike) -> FloatArray:
    return np.asarray(
        fn.w_recall * fn.recall_score(recall_count)
        + fn.w_importance * np.asarray(importance, np.float64),
        np.float64,
    )


def drop_times(
    fn: MemoryFunction,
    zones: ZoneTable,
    recall_count: npt.ArrayLike,
    last_recalled_at: npt.ArrayLike,
    importance: npt.ArrayLike,
) -> FloatArray:
    """Array (n, 4): the time the resting score falls below each threshold (core..belt).

    S(t) < threshold exactly when t > drop time, so a rebalance at ``now`` moves a memory out
    of zone k when ``drop_k < now``.
    """
    base = resting_base(fn, recall_count, importance)[..., None]
    last = np.asarray(last_recalled_at, np.float64)[..., None]
    thr = np.asarray(zones.thresholds, np.float64)
    # Seconds of decay the margin above a threshold buys: F falls alpha/|floor| per second.
    rate = fn.w_freshness * fn.alpha / abs(fn.floor)
    with np.errstate(divide="ignore"):
        t = last + (base - thr) / rate if rate > 0 else np.full(np.broadcast(base, thr).shape, NEVER)
    out = np.where(base < thr, ALREADY, t)
    # F stops at -1: a memory whose floor score still reaches the threshold never drops below.
    return np.where(base - fn.w_freshness >= thr, NEVER, out)

