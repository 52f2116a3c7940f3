"""Relevance fusion and the zone order (recall/retrieval.py)."""

from __future__ import annotations

import numpy as np
import pytest
from celestial_memory.config import Settings
from celestial_memory.recall.keywords import expand_hangul
from celestial_memory.recall.retrieval import Retrieval, zone_order


class NoEmbedder:
    name = "none"
    dimension = 4

    def embed(self, texts: object) -> np.ndarray:
        raise AssertionError("not used")


def retrieval() -> Retrieval:
    return Retrieval(Settings(), NoEmbedder())


def test_relevance_weighs_cosines_and_keywords_relative_to_the_best() -> None:
    scores = np.array([[0.8, 0.6, 4.0, 2.0], [0.2, -0.3, 0.0, 4.0], [0.5, 0.5, 2.0, 0.0]])
    rel = retrieval().relevance(scores)
    # weights 1, .5, .5, .5 over 2.5; keywords over their best (4.0 and 4.0)
    assert rel == pytest.approx([
        (0.8 + 0.3 + 0.5 + 0.25) / 2.5, (0.2 + 0.0 + 0.0 + 0.5) / 2.5, (0.5 + 0.25 + 0.25) / 2.5
    ])


def test_a_query_without_keywords_is_weighed_on_the_dense_signals() -> None:
    rel = retrieval().relevance(np.array([[1.0, 1.0, 0.0, 0.0]]), keywords=False)
    assert rel == pytest.approx([1.0])


def test_zone_order_puts_near_ties_core_first_and_never_buries_a_clear_winner() -> None:
    rel = np.array([0.90, 0.85, 0.50, 0.10, 0.88])
    zones = [4, 0, 1, 0, 2]
    ids = [f"m{i}" for i in range(5)]
    order = [r.index for r in zone_order(ids, zones, rel, gate=0.2, margin=0.9, by_zone=True)]
    # 0.85 (core) and 0.88 (outer) are within 90% of 0.90: they go first by zone; 0.10 is gated.
    assert order == [1, 4, 0, 2]
    plain = [r.index for r in zone_order(ids, zones, rel, gate=0.2, margin=0.9, by_zone=False)]
    assert plain == [0, 4, 1, 2]
    assert zone_order([], [], np.zeros(0), 0.2, 0.9, True) == []


@pytest.mark.parametrize("by_zone", [True, False])
def test_exact_ties_go_by_memory_id_whatever_order_the_engine_listed_them_in(
    by_zone: bool,
) -> None:
    ids = ["c", "a", "d", "b"]
    rel = np.array([0.7, 0.7, 0.9, 0.7])
    for perm in ([0, 1, 2, 3], [3, 2, 1, 0], [1, 3, 0, 2]):
        got = zone_order([ids[i] for i in perm], [1] * 4, rel[perm], gate=0.2, margin=0.99,
                         by_zone=by_zone)
        assert [ids[perm[r.index]] for r in got] == ["d", "a", "b", "c"]
    # The learned ranker's key ties everywhere: only the near tie (by zone) lifts "d".
    key = np.array([0.5, 0.5, 0.5, 0.5])
    got = zone_order(ids, [1] * 4, rel, gate=0.2, margin=0.99, by_zone=by_zone, key=key)
    assert [ids[r.index] for r in got] == (["d", "a", "b", "c"] if by_zone else ["a", "b", "c", "d"])


def test_hangul_words_gain_their_syllable_bigrams() -> None:
    assert expand_hangul("요가 수업에 갔어요") == "요가 수업에 갔어요 수업 업에 갔어 어요"
    assert expand_hangul("plain English") == "plain English"
