"""Long memories' passages (store/payload.py PASSAGES), against every backend of the scenario
suite: found by their best passage, scored by it, and a store made before passages still works."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from celestial_memory.domain.models import IndexVectors, Memory, MemoryFilter
from celestial_memory.domain.zones import Zone
from celestial_memory.store import MemoryRepository, open_edge

from tests.conftest import unit_vectors
from tests.scenarios.test_store_scenarios import DIM, hq, mem


def _long(query: np.ndarray, content: str = "a long page of other talk") -> Memory:
    """A memory whose content vector points away from ``query`` and whose fourth passage is
    ``query`` itself."""
    m = mem(vector=-query, content=content)
    rows = unit_vectors(6, DIM, seed=31)
    rows[3] = query
    assert m.index is not None
    m.index = IndexVectors(m.index.context_dense, m.index.keywords, m.index.context_keywords,
                           passages=rows)
    return m


def test_a_long_memory_is_found_and_scored_by_its_best_passage(store: MemoryRepository) -> None:
    q = unit_vectors(1, DIM, seed=30)[0]
    noise = unit_vectors(8, DIM, seed=32)
    others = [mem(vector=q + 0.8 * noise[i]) for i in range(8)]
    long = _long(q)
    store.upsert([*others, long])
    (hits,) = store.search_zones("a", hq(q), [Zone.OUTER], MemoryFilter(), 3)
    assert hits[0] == long.id  # its content vector alone would rank it last
    scores = store.signal_scores("a", hq(q), [long.id, others[0].id])
    assert scores[0, 0] == pytest.approx(1.0, abs=2e-3)  # float16 passages
    assert scores[0, 1] == pytest.approx(1.0, abs=2e-3)  # no contextual vector: the content's
    cos = float(q @ others[0].vector) / float(np.linalg.norm(others[0].vector))
    assert scores[1, 0] == pytest.approx(cos, abs=1e-5)  # a short memory is scored as before
    got = store.candidates("a", hq(q), [Zone.OUTER], MemoryFilter(), 3)
    assert got.ids[0] == long.id and got.signals[0, 0] == pytest.approx(1.0, abs=2e-3)


def test_a_keyword_query_adds_a_long_memory_its_passages_found_to_the_candidates(
    store: MemoryRepository,
) -> None:
    q = unit_vectors(1, DIM, seed=33)[0]
    words = [mem(vector=-q, content=f"budget review number {i}") for i in range(6)]
    long = _long(q)
    store.upsert([*words, long])
    got = store.candidates("a", hq(q, "budget review"), [Zone.OUTER], MemoryFilter(), 3)
    assert long.id in got.ids
    row = got.ids.index(long.id)
    assert got.signals[row, 0] == pytest.approx(1.0, abs=2e-3) and got.signals[row, 2] == 0


def test_a_memory_rewritten_without_passages_loses_them(store: MemoryRepository) -> None:
    q = unit_vectors(1, DIM, seed=34)[0]
    long = _long(q)
    store.upsert([long])
    short = mem(vector=-q, content="now short")
    short.id = long.id
    store.upsert([short])
    assert store.signal_scores("a", hq(q), [long.id])[0, 0] == pytest.approx(-1.0, abs=1e-5)


def test_an_embedded_store_made_before_passages_opens_and_stores_long_memories_without_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from celestial_memory.store import edge_engine

    q = unit_vectors(1, DIM, seed=35)[0]
    with monkeypatch.context() as patched:  # as a shard made before passages was
        patched.setattr(edge_engine, "_stored_config", lambda path: {"vectors": {}})
        old = open_edge(tmp_path / "shard", DIM)
        old.upsert([mem(vector=q)])
        old.close()
    reopened = open_edge(tmp_path / "shard", DIM)
    try:
        assert not reopened.engine.passages
        long = _long(q)
        reopened.upsert([long])  # kept, without its passages
        assert reopened.signal_scores("a", hq(q), [long.id])[0, 0] == pytest.approx(-1.0, abs=1e-5)
        assert len(reopened.search_zones("a", hq(q), [Zone.OUTER], MemoryFilter(), 5)[0]) == 2
    finally:
        reopened.close()
