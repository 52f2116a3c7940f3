"""Memory types and the feedback step, without a store: the type checks, the conditions a type
filter becomes, and how a vote moves importance."""

from __future__ import annotations

import pytest
from celestial_memory.domain import memory_types as types
from celestial_memory.domain.selection import Selection
from celestial_memory.errors import InvalidArgument
from celestial_memory.store.payload import AnyOf, Eq, Neither, selection_conditions, type_condition
from celestial_memory.understanding.feedback import moved
from hypothesis import given
from hypothesis import strategies as st


def test_a_type_is_checked_and_empty_is_an_episode() -> None:
    assert types.checked("") == "episode"
    assert types.checked("fact") == "fact"
    with pytest.raises(InvalidArgument, match="memory_type"):
        types.checked("rumour")
    assert types.checked_many(["episode", "fact", "fact"], "f") == ["fact", "episode"]
    with pytest.raises(InvalidArgument, match=r"f\[1\]"):
        types.checked_many(["fact", "unspecified"], "f")


def test_a_filter_naming_episodes_also_matches_memories_without_a_type() -> None:
    assert type_condition(["fact", "insight"]) == AnyOf("memory_type", ("fact", "insight"))
    # Episodes: none of the other types, which a point without the field satisfies.
    assert type_condition(["episode", "fact"]) == Neither(
        (AnyOf("memory_type", ("preference", "triple", "insight")),))


def test_forgetting_selects_only_memories_not_immutable() -> None:
    conds = selection_conditions("t", Selection(unprotected=True))
    assert Neither((Eq("immutable", 1),)) in conds
    assert not any(isinstance(c, Neither) for c in selection_conditions("t", Selection()))


@given(st.floats(0, 1), st.floats(0.01, 1))
def test_a_vote_stays_in_the_unit_interval_and_moves_the_right_way(a: float, step: float) -> None:
    up, down = moved(a, True, step), moved(a, False, step)
    assert a <= up <= 1 and 0 <= down <= a
    assert up - a == pytest.approx(step * (1 - a)) and a - down == pytest.approx(step * a)


def test_the_default_step_from_a_half() -> None:
    a = 0.5
    ups = []
    for _ in range(5):
        a = moved(a, True, 0.2)
        ups.append(round(a, 4))
    assert ups == [0.6, 0.68, 0.744, 0.7952, 0.8362]  # the fifth vote passes 0.8
    assert moved(moved(0.5, True, 0.2), False, 0.2) == pytest.approx(0.48)
