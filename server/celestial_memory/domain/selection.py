"""Sets of one tenant's memories that rebalancing works on, named in the domain's terms.

The rebalancer says *which* memories (in these zones, not pinned, due to fall from one zone to
another, neglected); the store says *how* to find them (``store/payload.py`` turns a Selection
into conditions on indexed payload fields), so the rebalancer names no payload field.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from celestial_memory.domain.zones import Zone


@dataclass(frozen=True, slots=True)
class Falling:
    """Memories whose resting score has fallen from zone ``src`` into zone ``dst`` by ``now``:
    the drop time for ``src`` has passed (since ``since``, or before it was last written), the
    one for ``dst - 1`` too, and the one for ``dst`` not yet (see domain/trajectory.py)."""

    src: Zone
    dst: Zone
    now: float
    since: float | None = None


@dataclass(frozen=True, slots=True)
class Selection:
    """Every set field restricts; an empty Selection is every live memory of the tenant (the
    archive only when ``archived`` is set)."""

    zones: tuple[Zone, ...] = ()  # in one of these zones
    unpinned: bool = False
    falling: Falling | None = None
    reaching_cloud_by: float | None = None  # in the cloud, or its resting score falls there by then
    not_recalled_since: float | None = None  # last recall (or creation) before this time
    # The archive instead of the zones (forgotten memories), archived before this time if set.
    archived: bool = False
    archived_before: float | None = None
    unprotected: bool = False  # not immutable (understanding/): what forgetting may take


@dataclass(slots=True)
class Members:
    """The state the memory function needs of a set of memories, as numpy columns."""

    ids: list[str]
    zone: npt.NDArray[np.int64]
    pinned: npt.NDArray[np.int64]
    recall_count: npt.NDArray[np.float64]
    last: npt.NDArray[np.float64]
    importance: npt.NDArray[np.float64]
    context: npt.NDArray[np.float64]
    content_hash: list[str]
    written_at: npt.NDArray[np.float64]

    def version(self, i: int) -> str:
        """The state of memory i's last write (a manual clock may repeat write times). The write
        time to the 0.1 ms it is stored with and the importance to 9 digits: engines may give a
        float back a bit or two off, and an event's id must not depend on which engine stored
        the memory."""
        return (f"{self.written_at[i]:.4f}:{self.recall_count[i]!r}:"
                f"{self.importance[i]:.9g}")

    def __len__(self) -> int:
        return len(self.ids)
