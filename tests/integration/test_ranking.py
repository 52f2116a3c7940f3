"""The learned ranker: the shipped model loads and its hash is its card's; a missing, damaged or
foreign model falls back to the weighted relevance with one log line; the features are the same
on both engines; and a recall is ordered by the model's scores, the gate and the relevance it
reports left as they were, and each recall counted by the next."""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.domain import validation as check
from celestial_memory.domain.candidate_facts import CandidateFacts
from celestial_memory.domain.requests import NewMemory, RecallQuery
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.memory.service import MemoryService
from celestial_memory.observability import metrics
from celestial_memory.ranking import learned
from celestial_memory.ranking.features import FEATURES, features

from tests.conftest import open_backend

NOTES = [("Alice: I adopted a puppy named Biscuit last Saturday!", "s1"),
         ("Bob: Congrats! What breed is Biscuit?", "s1"),
         ("Alice: A beagle. She loves the park near Lisbon Street.", "s1"),
         ("Bob: My sister moved to Lisbon in May 2023.", "s2"),
         ("Alice: Did she like the food there?", "s2"),
         ("Bob: She loved the pastries, especially in Belém.", "s2"),
         ("Alice: I am training for a marathon in October.", "s3"),
         ("Bob: How far do you run each week?", "s3")]
QUERY = "What breed is Alice's dog Biscuit?"


def service_on(kind: str, tmp: Path, embedder: SentenceTransformerEmbedder,
               ranker: str = "learned") -> MemoryService:
    clock = ManualClock(1_700_000_000.0)
    svc = build_service(Settings(data_dir=tmp / kind, rebalance_interval_s=0, ranker=ranker),
                        embedder=embedder, store=open_backend(kind, tmp / kind), clock=clock)
    for i, (text, session) in enumerate(NOTES):
        clock.set(1_700_000_000.0 + i)
        svc.store_memory("t", NewMemory(content=text, session_id=session,
                                        id=f"00000000-0000-4000-8000-{i:012d}"))
    return svc


def rows_of(svc: MemoryService) -> dict[str, np.ndarray]:
    """Each candidate's feature row, by id, as the recall computes them."""
    q = RecallQuery(query=QUERY, limit=10, reinforce=False)
    qvec = svc.embedder.embed([QUERY])[0]
    found = svc._candidates.find("t", q, QUERY, qvec, check.memory_filter(q.filter, svc.settings),
                                 0.0, 10, metrics.Stages())
    ids = found.candidates.ids
    facts = svc.store.ranking_facts.read("t", ids)
    assert facts.ids == ids
    rows = features(QUERY, found.asked, found.candidates.signals, found.relevance, facts)
    # Training reads whole memories: the same rows from them.
    got = svc.store.get("t", ids)
    whole = features(QUERY, found.asked, found.candidates.signals, found.relevance,
                     CandidateFacts.of([got[i] for i in ids]))
    np.testing.assert_array_equal(rows, whole)
    return dict(zip(ids, rows, strict=True))


def test_the_shipped_model_loads_and_its_hash_is_the_cards() -> None:
    ranker = learned.read(learned.MODEL_DIR)
    card = json.loads((learned.MODEL_DIR / "card.json").read_text())
    data = (learned.MODEL_DIR / "ranker.txt").read_bytes()
    assert card["sha256"] == hashlib.sha256(data).hexdigest()
    assert card["features"] == list(FEATURES) and ranker.candidates == card["candidates"]
    assert "leave one conversation out" in card["figures"] and card["command"] == "make train-ranker"
    assert ranker.scores(np.zeros((3, len(FEATURES)))).shape == (3,)


def test_a_missing_damaged_or_foreign_model_falls_back_with_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    damaged = tmp_path / "damaged"
    shutil.copytree(learned.MODEL_DIR, damaged)
    data = bytearray((damaged / "ranker.txt").read_bytes())
    data[len(data) // 2] ^= 0x01
    (damaged / "ranker.txt").write_bytes(bytes(data))
    foreign = tmp_path / "foreign"
    shutil.copytree(learned.MODEL_DIR, foreign)
    card = json.loads((foreign / "card.json").read_text())
    card["features"] = card["features"][:-1]
    (foreign / "card.json").write_text(json.dumps(card))
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "ranker.txt").write_text("not a model")
    (garbage / "card.json").write_text(json.dumps({**card, "features": list(FEATURES),
                                                   "sha256": hashlib.sha256(b"not a model")
                                                   .hexdigest()}))
    for folder, why in ((tmp_path / "missing", "cannot read"), (damaged, "damaged or replaced"),
                        (foreign, "other features"), (garbage, "LightGBM text model")):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="celestial_memory.ranking.learned"):
            assert learned.load("learned", folder) is None
        lines = [r for r in caplog.records if r.name == "celestial_memory.ranking.learned"]
        assert len(lines) == 1 and lines[0].levelno == logging.WARNING, lines
        assert why in lines[0].getMessage() and "weighted relevance" in lines[0].getMessage()


def test_the_start_up_line_says_which_ranker_runs(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="celestial_memory.ranking.learned"):
        assert learned.load("weights") is None
        assert learned.load("learned") is not None
    said = [r.getMessage() for r in caplog.records]
    assert "weighted relevance orders recalls" in said[0]
    assert "learned model" in said[1] and "best candidates" in said[1]


def test_the_features_are_the_same_on_both_engines(
    tmp_path: Path, embedder: SentenceTransformerEmbedder,
) -> None:
    services = [service_on(kind, tmp_path, embedder) for kind in ("edge", "qdrant-local")]
    try:
        for svc in services:
            svc.relations.relate("t", "00000000-0000-4000-8000-000000000000",
                                 "00000000-0000-4000-8000-000000000003", "about")
        edge, local = (rows_of(svc) for svc in services)
        assert sorted(edge) == sorted(local) and len(edge) == len(NOTES)
        for mid, row in edge.items():
            np.testing.assert_allclose(row, local[mid], atol=1e-5, err_msg=mid)
        # The features see what they are meant to: the relation, the sessions, the entities.
        at = {name: i for i, name in enumerate(FEATURES)}
        first = edge["00000000-0000-4000-8000-000000000000"]
        assert first[at["related_best"]] > 0 and first[at["session_count"]] == 2
        assert first[at["asked_entities"]] >= 1 and first[at["entity_count"]] >= 1
        assert first[at["q_what"]] == 1 and first[at["time_words"]] >= 1
        results = [[r.memory.id for r in svc.recall("t", RecallQuery(
            query=QUERY, limit=5, reinforce=False))] for svc in services]
        assert results[0] == results[1]
    finally:
        for svc in services:
            svc.close()


def test_a_recall_follows_the_models_order_and_keeps_its_relevance(
    tmp_path: Path, embedder: SentenceTransformerEmbedder,
) -> None:
    svc = service_on("edge", tmp_path, embedder, ranker="weights")
    try:
        q = RecallQuery(query=QUERY, limit=5, reinforce=False, ignore_zones=True,
                        min_relevance=0.0)
        by_weights = svc.recall("t", q)

        class Reversed:  # a stand-in model: the lower the relevance, the higher its score
            def predict(self, rows: np.ndarray, num_threads: int = 1) -> np.ndarray:
                return np.asarray(-rows[:, FEATURES.index("relevance")])

        svc._candidates.ranker = learned.LearnedRanker(Reversed(), 3, "reversed")
        by_model = svc.recall("t", q)
        relevance = {r.memory.id: r.relevance for r in by_weights}
        all_relevance = sorted(rows_of(svc).items(), key=lambda kv: -kv[1][FEATURES.index(
            "relevance")])
        best3 = [mid for mid, _ in all_relevance[:3]]
        # The model's three, lowest relevance first, ahead of the rest by relevance.
        assert [r.memory.id for r in by_model][:3] == best3[::-1]
        assert [r.memory.id for r in by_model][3:] == [mid for mid, _ in all_relevance[3:5]]
        for r in by_model:  # what a result reports is still its relevance
            if r.memory.id in relevance:
                assert r.relevance == pytest.approx(relevance[r.memory.id])
        # A query given as a vector alone has no text to rank: the weights order it.
        vec = svc.embedder.embed([QUERY])[0]
        alone = svc.recall("t", replace(q, query="", query_vector=list(vec)))
        assert [r.relevance for r in alone] == sorted((r.relevance for r in alone), reverse=True)
    finally:
        svc.close()


def test_a_ranked_recall_counts_every_recall(
    tmp_path: Path, embedder: SentenceTransformerEmbedder,
) -> None:
    """With the learned ranker, each recall's memories carry the counts the recalls before left
    them (a reinforcement not yet written is counted), as in the weighted order."""
    svc = service_on("edge", tmp_path, embedder)
    try:
        q = RecallQuery(query=QUERY, limit=3)
        counts: list[dict[str, int]] = []
        for _ in range(3):
            got = svc.recall("t", q)
            counts.append({r.memory.id: r.memory.recall_count for r in got})
        for before, after in itertools.pairwise(counts):
            for mid in before.keys() & after.keys():
                assert after[mid] == before[mid] + 1, mid
        assert counts[0].keys() & counts[-1].keys()
    finally:
        svc.close()
