"""What a recall does to the memories it returns (and a repeat, counted as a mention, to the
memory it repeats): recall count + 1, freshness reset, C, a new score and zone (never outward) and
new drop times; and the memory function's breakdown of each, numpy over all of them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from celestial_memory.domain.models import Memory
from celestial_memory.domain.scoring import MemoryFunction, ScoreBreakdown
from celestial_memory.domain.trajectory import drop_times
from celestial_memory.domain.zones import Zone, ZoneTable


def reinforce(
    fn: MemoryFunction, zones: ZoneTable, mems: Sequence[Memory], context: Sequence[float],
    now: float, reinforce: bool, reinforced: Sequence[int] | None = None,
) -> list[ScoreBreakdown]:
    """The breakdown of each memory at ``now`` and, when ``reinforce``, the new state of those
    at ``reinforced`` (default: all), written into them."""
    if not mems:
        return []
    which = np.zeros(len(mems), dtype=bool)
    if reinforce:
        which[list(range(len(mems)) if reinforced is None else reinforced)] = True
    counts = np.array([m.recall_count for m in mems], dtype=np.int64) + which
    lasts = np.where(which, now, [m.last_recalled_at for m in mems])
    imps = np.array([m.importance for m in mems])
    r, f, _, c, totals = fn.terms(counts, lasts, imps, context, now)
    if which.any():
        # A recall never moves what it returns outward.
        placed = np.minimum([int(m.zone) for m in mems], zones.zone_of(totals))
        drops = drop_times(fn, zones, counts, lasts, imps)
        for i in map(int, np.flatnonzero(which)):
            m = mems[i]
            m.recall_count, m.last_recalled_at = int(counts[i]), now
            m.context_score, m.score = float(context[i]), float(totals[i])
            m.zone = Zone(int(placed[i]))
            m.drop_times = (float(drops[i, 0]), float(drops[i, 1]), float(drops[i, 2]),
                            float(drops[i, 3]))
            m.written_at = now
    return [
        ScoreBreakdown(float(r[i]), float(f[i]), m.importance, float(c[i]), float(totals[i]))
        for i, m in enumerate(mems)
    ]
