"""Learning from use: with CELESTIAL_RANKER_FEEDBACK, Feedback votes tune a tenant's layer over
the learned ranker. Votes for and against memories of one recall move the helpful one ahead of
the other; a burst of 1,000 not-helpful votes moves a memory by the bound at most, so it keeps
its relevance, passes the gate and places no lower than the bound allows; the layer is kept
beside the memories (a restart reads it back) and travels with Export and Import; another
tenant's ranking is untouched."""

from __future__ import annotations

import uuid
from pathlib import Path

import grpc
import numpy as np
import pytest
from celestial_client.v1 import memory_pb2 as pb
from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.domain.requests import NewMemory, RecallQuery
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.memory.service import MemoryService
from celestial_memory.ranking.features import FEATURES
from celestial_memory.ranking.tuning import standardized

from tests.conftest import open_backend
from tests.integration.conftest import running_server, stub_over
from tests.integration.test_ranking import NOTES, QUERY, rows_of

BOUND = 0.5


def tuned_service(path: Path, embedder: SentenceTransformerEmbedder, *, fresh: bool = True,
                  **settings: object) -> MemoryService:
    clock = ManualClock(1_700_000_000.0)
    fields = {"ranker": "learned", "ranker_feedback": True, "ranker_feedback_bound": BOUND,
              "ranker_feedback_rate": 0.2, **settings}
    svc = build_service(Settings(data_dir=path, rebalance_interval_s=0, **fields),  # type: ignore[arg-type]
                        embedder=embedder, store=open_backend("edge", path), clock=clock)
    for i, (text, session) in enumerate(NOTES if fresh else []):
        clock.set(1_700_000_000.0 + i)
        for tenant in ("t", "other"):
            svc.store_memory(tenant, NewMemory(content=text, session_id=session,
                                               id=f"00000000-0000-4000-8{tenant == 't':03d}-{i:012d}"))
    return svc


def recalled(svc: MemoryService, tenant: str = "t") -> list[tuple[str, float]]:
    r = svc.recall(tenant, RecallQuery(query=QUERY, limit=8, reinforce=False, ignore_zones=True))
    return [(x.memory.id, x.relevance) for x in r]


def model_rows(svc: MemoryService) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The candidates the model re-ranks, their feature rows and the model's own scores."""
    by_id = rows_of(svc)
    ranker = svc._candidates.ranker
    assert ranker is not None
    rows = np.stack(list(by_id.values()))
    return list(by_id), rows, ranker.scores(rows)


def test_a_vote_moves_the_voted_memory_its_way(tmp_path: Path,
                                               embedder: SentenceTransformerEmbedder) -> None:
    svc = tuned_service(tmp_path, embedder)
    try:
        first = recalled(svc)
        top, low = first[0][0], first[-1][0]
        ids, rows, _ = model_rows(svc)
        z = standardized(rows)
        for _ in range(3):
            svc.feedback.give("t", low, True)
            svc.feedback.give("t", top, False)
        shift = svc.tuning.shift("t", z)
        assert shift[ids.index(low)] > shift[ids.index(top)]
        assert not svc.tuning.shift("other", z).any()  # another tenant's layer is its own
        tuned = svc.tuning.exported("t")
        assert tuned is not None and tuned.votes == 6 and tuned.features == FEATURES
    finally:
        svc.close()


def test_a_burst_of_not_helpful_votes_moves_a_memory_by_the_bound_at_most(
        tmp_path: Path, embedder: SentenceTransformerEmbedder) -> None:
    svc = tuned_service(tmp_path, embedder)
    try:
        before = dict(recalled(svc))
        ids, rows, scores = model_rows(svc)
        x = ids[int(np.argmax(scores))]  # the model's first
        y = next(mid for mid, _ in before.items() if mid != x)
        svc.feedback.give("t", y, True)  # what the burst's votes are learnt against
        for _ in range(1000):
            svc.feedback.give("t", x, False)
        tuned = svc.tuning.exported("t")
        assert tuned is not None and tuned.votes == 1001
        assert max(abs(w) for w in tuned.weights) <= BOUND + 1e-12
        assert np.all(np.abs(svc.tuning.shift("t", standardized(rows))) <= BOUND + 1e-12)
        after = recalled(svc)
        # Still returned with the relevance the weights give it; no lower than the model's order
        # allows when it loses the bound and every other candidate gains it.
        assert dict(after)[x] == before[x]
        i = ids.index(x)
        worst = int(sum(scores[j] + BOUND > scores[i] - BOUND for j in range(len(ids)) if j != i))
        assert [mid for mid, _ in after].index(x) <= worst
        assert svc.tuning.shift("t", standardized(rows))[i] < 0
    finally:
        svc.close()


def test_a_vote_teaches_only_against_an_opposite_vote_on_the_same_recall(
        tmp_path: Path, embedder: SentenceTransformerEmbedder) -> None:
    svc = tuned_service(tmp_path, embedder)
    try:
        svc.feedback.give("t", "00000000-0000-4000-8001-000000000000", True)  # no recall yet
        assert svc.tuning.exported("t") is None
        got = recalled(svc)
        for mid, _ in got:  # all not helpful: nothing sets one apart from the others
            svc.feedback.give("t", mid, False)
        tuned = svc.tuning.exported("t")
        assert tuned is not None and tuned.votes == len(got) and not any(tuned.weights)
    finally:
        svc.close()


def test_without_the_setting_votes_leave_the_ranking_alone(
        tmp_path: Path, embedder: SentenceTransformerEmbedder) -> None:
    svc = tuned_service(tmp_path, embedder, ranker_feedback=False)
    try:
        first = recalled(svc)
        svc.feedback.give("t", first[0][0], False)
        assert svc.tuning.exported("t") is None
    finally:
        svc.close()


def test_the_layer_survives_a_restart(tmp_path: Path,
                                      embedder: SentenceTransformerEmbedder) -> None:
    svc = tuned_service(tmp_path, embedder)
    try:
        got = recalled(svc)
        svc.feedback.give("t", got[0][0], False)
        svc.feedback.give("t", got[1][0], True)
        kept = svc.tuning.exported("t")
    finally:
        svc.close()
    again = tuned_service(tmp_path, embedder, fresh=False)
    try:
        got = again.tuning.exported("t")
        assert kept is not None and got is not None and got.votes == kept.votes == 2
        assert got.features == kept.features and any(kept.weights)
        assert np.allclose(got.weights, kept.weights, rtol=0, atol=1e-12)  # as the store keeps them
    finally:
        again.close()


async def test_export_and_import_carry_the_layer(
        tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock) -> None:
    async with running_server(tmp_path, embedder, clock, ranker="learned", ranker_feedback=True,
                              ranker_feedback_bound=BOUND) as srv, stub_over("grpc", srv) as stub:
        for text, session in NOTES:
            await stub.Store(pb.StoreRequest(tenant="a", content=text, session_id=session))
        got = await stub.Recall(pb.RecallRequest(tenant="a", query=QUERY, limit=5))
        await stub.Feedback(pb.FeedbackRequest(tenant="a", id=got.results[0].memory.id,
                                               verdict=pb.VERDICT_NOT_HELPFUL))
        await stub.Feedback(pb.FeedbackRequest(tenant="a", id=got.results[1].memory.id,
                                               verdict=pb.VERDICT_HELPFUL))
        dump = [e async for e in stub.Export(pb.ExportRequest(tenant="a"))]
        assert dump[0].HasField("ranker_tuning") and dump[0].ranker_tuning.votes == 2
        assert not any(e.HasField("ranker_tuning") for e in dump[1:])
        layer = dump[0].ranker_tuning
        assert list(layer.features) == list(FEATURES)
        assert any(layer.weights) and max(map(abs, layer.weights)) <= BOUND
        with_ids = []
        for e in dump:
            copied = pb.ExportedMemory()
            copied.CopyFrom(e)
            copied.memory.id = str(uuid.uuid4())  # ids are global: new ones in the other tenant
            copied.ClearField("ranker_tuning")
            with_ids.append(copied)
        with_ids[0].tenant = "b"
        with_ids[0].ranker_tuning.CopyFrom(layer)
        assert (await stub.Import(iter(with_ids))).imported == len(NOTES)
        again = [e async for e in stub.Export(pb.ExportRequest(tenant="b"))]
        assert again[0].ranker_tuning == layer
        bad = pb.ExportedMemory(tenant="c", memory=pb.Memory(id=str(uuid.uuid4()), content="x"),
                                vector=dump[0].vector,
                                ranker_tuning=pb.RankerTuning(features=["dense"], weights=[]))
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.Import(iter([bad]))
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "ranker_tuning.weights" in str(refused.value.details())
