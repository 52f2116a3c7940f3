"""The agent tools' policy summary counts in words a model reads: one of a thing, two things."""

from __future__ import annotations

from celestial_client._core.turn_tools import _n


def test_counts_agree_with_their_nouns() -> None:
    assert _n(1, "bandit update") == "1 bandit update"
    assert [_n(n, "decision") for n in (0, 2)] == ["0 decisions", "2 decisions"]
