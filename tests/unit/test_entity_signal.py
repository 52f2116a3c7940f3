"""The entity signal of recall (recall/retrieval.py): a query's entities that a candidate mentions,
weighed by their IDF among the candidates, lift its relevance, within [0, 1]."""

from __future__ import annotations

import numpy as np
import pytest
from celestial_memory.config import Settings
from celestial_memory.recall.retrieval import Retrieval


class NoEmbedder:
    dimension = 384

    def embed(self, texts: object) -> list[object]:
        raise AssertionError("not needed")


def retrieval(weight: float = 0.1) -> Retrieval:
    return Retrieval(Settings(entity_weight=weight), NoEmbedder())  # type: ignore[arg-type]


def test_query_entities_come_from_the_rules_and_the_weight_can_turn_them_off() -> None:
    assert retrieval().entities("When did Caroline go to Sweden in May 2023?") == [
        "name:caroline", "name:sweden", "date:2023-05"]
    assert retrieval(0.0).entities("When did Caroline go to Sweden?") == []
    assert retrieval().entities("what did we talk about") == []


def test_a_rare_entity_counts_more_than_one_every_candidate_mentions() -> None:
    r = retrieval()
    asked = ["name:caroline", "name:sweden"]
    mentions = [["name:caroline"], ["name:caroline", "name:sweden"], ["name:caroline"], []]
    base = np.full(4, 0.5)
    got = r.with_entities(base, asked, mentions)
    assert got[1] == pytest.approx(0.6)  # mentions both: the whole weight
    assert got[3] == 0.5  # mentions neither
    # Caroline is in 3 of 4 candidates: her share is small; Sweden (1 of 4) carries most.
    idf_c, idf_s = np.log1p(4 / 4), np.log1p(4 / 2)
    assert got[0] == pytest.approx(0.5 + 0.1 * idf_c / (idf_c + idf_s))
    assert got[0] == got[2] and got[0] < 0.5 + 0.05


def test_nothing_changes_without_query_entities_or_mentions_and_it_stays_in_range() -> None:
    r = retrieval(1.0)
    base = np.array([0.2, 0.95])
    assert r.with_entities(base, [], [["name:x"], []]) is base
    assert r.with_entities(base, ["name:x"], None) is base
    assert r.with_entities(base, ["name:x"], [["name:x"], []]).tolist() == [1.0, 0.95]
