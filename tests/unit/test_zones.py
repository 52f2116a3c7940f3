"""Zone boundaries at the exact thresholds, and capacity with cascade."""

from __future__ import annotations

import numpy as np
import pytest
from celestial_memory.domain.zones import Zone, ZoneTable

table = ZoneTable()


@pytest.mark.parametrize(
    ("score", "zone"),
    [
        (0.70, Zone.CORE), (0.50, Zone.CORE), (np.nextafter(0.50, 0), Zone.INNER),
        (0.30, Zone.INNER), (np.nextafter(0.30, 0), Zone.OUTER),
        (0.10, Zone.OUTER), (np.nextafter(0.10, 0), Zone.BELT),
        (-0.10, Zone.BELT), (np.nextafter(-0.10, -1), Zone.CLOUD), (-0.55, Zone.CLOUD),
    ],
)
def test_zone_boundaries_are_inclusive_at_the_threshold(score: float, zone: Zone) -> None:
    assert table.zone_of_score(float(score)) == zone


def test_zone_of_is_vectorised() -> None:
    scores = np.array([0.6, 0.35, 0.2, 0.0, -0.3])
    assert table.zone_of(scores).tolist() == [0, 1, 2, 3, 4]


def test_capacity_evicts_the_lowest_scores_outward() -> None:
    t = ZoneTable(capacities=(2, 3, 0, 0, 0))
    zones = [0, 0, 0, 0]
    scores = [0.60, 0.55, 0.65, 0.52]
    out = t.enforce_capacity(zones, scores)
    assert out.tolist() == [0, 1, 0, 1]


def test_capacity_cascades_through_several_zones() -> None:
    t = ZoneTable(capacities=(1, 1, 1, 0, 0))
    out = t.enforce_capacity([0, 0, 0, 1], [0.9, 0.8, 0.7, 0.35])
    # core keeps 0.9; 0.8 and 0.7 go to inner, which with 0.35 holds three: keeps 0.8;
    # 0.7 and 0.35 go to outer, which keeps 0.7; 0.35 lands in the unbounded belt.
    assert out.tolist() == [0, 1, 2, 3]


def test_keep_rank_beats_score_when_evicting() -> None:
    t = ZoneTable(capacities=(1, 0, 0, 0, 0))
    out = t.enforce_capacity([0, 0], [0.9, 0.5], keep=[0, 1])
    assert out.tolist() == [1, 0]


def test_under_capacity_nothing_moves() -> None:
    zones = np.array([0] * 20 + [1] * 100 + [2] * 1000)
    out = table.enforce_capacity(zones, np.zeros(len(zones)))
    assert (out == zones).all()


def test_an_eviction_id_does_not_depend_on_the_last_bit_of_a_stored_importance() -> None:
    # The embedded store gave back 0.9055922699982611 for an importance of 0.9055922699982613:
    # the two engines must still name the same eviction alike.
    import numpy as np
    from celestial_memory.domain.selection import Members

    def members(importance: float) -> Members:
        one = np.array([1.0])
        return Members(["m"], np.array([2]), np.array([0]), one, one,
                       np.array([importance]), one, ["h"], np.array([1.7e9]))

    assert members(0.9055922699982611).version(0) == members(0.9055922699982613).version(0)
    assert members(0.5).version(0) != members(0.6).version(0)
