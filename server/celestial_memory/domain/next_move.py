"""A memory's next scheduled move, read from what its last write stored.

Every write stamps a memory with the times its resting score (C = 0, as the rebalance scores it)
falls below each zone threshold (``trajectory.py``). A rebalance moves a memory out of zone k
once ``drop_k`` has passed, into the first zone whose drop time has not (``zones/rebalancer.py``); in
the cloud, it archives a memory not recalled for ``auto_forget_days``. So the next move is known
without scoring anything: a recall or an update before it restamps the memory and changes it.

A recall that lifts a memory inward by its context score alone leaves ``drop_k`` at ALREADY (its
resting score is below that zone's threshold): the next rebalance moves it back out. Capacity
evictions depend on the other memories and are not predicted.
"""

from __future__ import annotations

from dataclasses import dataclass

from celestial_memory.domain.models import Memory
from celestial_memory.domain.trajectory import ALREADY, NEVER
from celestial_memory.domain.zones import Zone


@dataclass(frozen=True, slots=True)
class NextMove:
    zone: Zone | None  # None: into the archive
    at: float  # due: the first rebalance after this time makes the move

    @property
    def archive(self) -> bool:
        return self.zone is None


def next_move(m: Memory, forget_after_s: float, now: float) -> NextMove | None:
    """Where the rebalance takes ``m`` next and when, unless a recall or an update comes first;
    None when nothing is scheduled (pinned, archived, or never falling below its zone)."""
    if m.pinned or m.archived:
        return None
    if m.zone == Zone.CLOUD:
        return NextMove(None, m.last_recalled_at + forget_after_s)
    drops = m.drop_times
    if drops is None or drops[m.zone] >= NEVER:
        return None
    # ALREADY: due since its last write (a recall lifted it above its resting zone).
    due = m.written_at if drops[m.zone] <= ALREADY else drops[m.zone]
    # It lands in the first zone whose drop time is still ahead when it moves: at ``due``, or
    # at the next rebalance when that time has passed already.
    moves = max(due, now)
    to = next((Zone(k) for k in range(m.zone + 1, Zone.CLOUD) if drops[k] >= moves), Zone.CLOUD)
    return NextMove(to, due)
