"""The five zones, their score thresholds, and capacity enforcement with cascade.

A score maps to the innermost zone whose threshold it reaches (``I >= threshold``). A zone over
capacity sends its lowest-priority memories one zone outward, which may overflow that zone in
turn (the cascade): eviction order is by ``keep`` rank first (pinned and just-recalled memories
leave last), then by score, lowest first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt
from celestial_memory.config import Settings

IntArray = npt.NDArray[np.int64]


class Zone(IntEnum):
    CORE = 0
    INNER = 1
    OUTER = 2
    BELT = 3
    CLOUD = 4

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class ZoneTable:
    # Minimum score of core, inner, outer, belt; the cloud takes everything below.
    thresholds: tuple[float, float, float, float] = (0.50, 0.30, 0.10, -0.10)
    # Capacity of each of the five zones; 0 means unbounded.
    capacities: tuple[int, int, int, int, int] = (20, 100, 1000, 0, 0)

    @classmethod
    def from_settings(cls, s: Settings) -> ZoneTable:
        t = s.zone_thresholds
        c = s.zone_capacities
        return cls((t[0], t[1], t[2], t[3]), (c[0], c[1], c[2], c[3], c[4]))

    def min_score(self, zone: Zone) -> float:
        return self.thresholds[zone] if zone < Zone.CLOUD else float("-inf")

    def zone_of(self, scores: npt.ArrayLike) -> IntArray:
        """Zone id of each score (vectorised)."""
        s = np.asarray(scores, dtype=np.float64)
        # thresholds are decreasing; count how many a score fails to reach.
        below = s[..., None] < np.asarray(self.thresholds)
        return np.asarray(np.sum(below, axis=-1), dtype=np.int64)

    def zone_of_score(self, score: float) -> Zone:
        return Zone(int(self.zone_of(score)))

    def enforce_capacity(
        self,
        zones: npt.ArrayLike,
        scores: npt.ArrayLike,
        keep: npt.ArrayLike | None = None,
    ) -> IntArray:
        """Zones after pushing the overflow of each bounded zone outward, Core first.

        ``keep`` ranks who stays when a zone overflows (higher stays); ties break by score.
        The input arrays describe every memory that can be in the bounded zones.
        """
        z = np.array(zones, dtype=np.int64, copy=True)
        s = np.asarray(scores, dtype=np.float64)
        k = np.zeros(len(z), dtype=np.int64) if keep is None else np.asarray(keep, np.int64)
        for zone in range(len(self.capacities) - 1):
            cap = self.capacities[zone]
            if cap <= 0:
                continue
            members = np.flatnonzero(z == zone)
            overflow = len(members) - cap
            if overflow <= 0:
                continue
            order = np.lexsort((s[members], k[members]))  # lowest keep, then lowest score
            z[members[order[:overflow]]] = zone + 1
        return z

    def capacity_of(self, zone: Zone) -> int:
        return self.capacities[zone]

    def bounded_zones(self) -> Sequence[Zone]:
        return [Zone(i) for i, c in enumerate(self.capacities) if c > 0]
