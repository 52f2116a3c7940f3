"""A walk's later pages come from the walk its first page made, while its pages keep coming."""

from __future__ import annotations

import pytest
from celestial_memory.graph import walks

START = "00000000-0000-4000-8000-000000000001"


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    out: list[str] = []

    def counted(graph: object, tenant: str, start: str, depth: int,
                names: frozenset[str]) -> list[walks.Reached]:
        out.append(start)
        return [walks.Reached(id=f"walk-{len(out)}", path=[])]

    monkeypatch.setattr(walks, "walk", counted)
    return out


def test_pages_that_keep_coming_keep_their_walk(made: list[str]) -> None:
    clock = Clock()
    w = walks.Walks(graph=None, now=clock)  # type: ignore[arg-type]
    first = w.reached("t", START, 2)
    for _ in range(5):  # each later page well within the TTL of the one before, not of the first
        clock.t += walks.WALK_TTL_S * 0.6
        assert w.reached("t", START, 2, first_page=False) is first
    assert made == [START]


def test_a_later_page_after_the_ttl_walks_again(made: list[str]) -> None:
    clock = Clock()
    w = walks.Walks(graph=None, now=clock)  # type: ignore[arg-type]
    first = w.reached("t", START, 2)
    clock.t += walks.WALK_TTL_S + 1
    again = w.reached("t", START, 2, first_page=False)
    assert again is not first and made == [START, START]


def test_a_first_page_always_walks_again(made: list[str]) -> None:
    w = walks.Walks(graph=None, now=Clock())  # type: ignore[arg-type]
    w.reached("t", START, 2)
    w.reached("t", START, 2)
    assert made == [START, START]
