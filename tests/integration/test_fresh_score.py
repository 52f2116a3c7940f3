"""A memory just stored through the service is answered at age zero: its breakdown holds exactly
what docs/design.md defines for a new memory (R = F = C = 0, A as given, I = w_a·A, the memory's
own score), with no term below zero, over gRPC and over Connect JSON; a repeat's answer, the
memory it merged into, is just recalled: F = 0 there too."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from celestial_client.v1 import memory_pb2 as pb
from celestial_memory.clock import ManualClock
from celestial_memory.domain.scoring import MemoryFunction
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder

from tests.integration.conftest import TRANSPORTS, running_server, stub_over

W_IMPORTANCE = 0.25  # the default weight of A (config.py)


class MovingClock(ManualClock):
    """Moves on a millisecond at every reading, as the wall clock does between the store's
    reading and any later one (a clock that stands still would hide a second reading)."""

    def now(self) -> float:
        return self.advance(0.001)


def _terms(b: pb.ScoreBreakdown) -> dict[str, float]:
    return {"recall": b.recall, "freshness": b.freshness, "importance": b.importance,
            "context": b.context, "total": b.total}


def _assert_new(m: pb.Memory, importance: float) -> None:
    terms = _terms(m.breakdown)
    assert all(v >= 0.0 and math.copysign(1.0, v) == 1.0 for v in terms.values()), terms
    assert terms == {"recall": 0.0, "freshness": 0.0, "importance": importance, "context": 0.0,
                     "total": W_IMPORTANCE * importance}
    assert m.score == m.breakdown.total and m.recall_count == 0


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_stored_memory_is_answered_at_age_zero(
    transport: str, tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    async with (running_server(tmp_path, embedder, MovingClock(1_785_000_000.0),
                               http_address="127.0.0.1:0") as srv,
                stub_over(transport, srv) as stub):
        given: Any = await stub.Store(pb.StoreRequest(
            tenant="t", content="Alice prefers espresso in the morning", importance=0.8))
        _assert_new(given.memory, 0.8)
        # No importance given: the rules find no cue in "hello" (A = 0), so every term is 0.
        rated: Any = await stub.Store(pb.StoreRequest(tenant="t", content="hello"))
        _assert_new(rated.memory, 0.0)
        assert given.created and rated.created


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_repeat_is_answered_with_the_memory_it_merged_into_at_age_zero(
    transport: str, tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    text = "Alice prefers espresso in the morning"
    async with (running_server(tmp_path, embedder, MovingClock(1_785_000_000.0),
                               http_address="127.0.0.1:0") as srv,
                stub_over(transport, srv) as stub):
        first: Any = await stub.Store(pb.StoreRequest(tenant="t", content=text, importance=0.8))
        again: Any = await stub.Store(pb.StoreRequest(tenant="t", content=text, importance=0.8))
    assert not again.created and again.merged_into == first.memory.id
    m = again.memory
    terms = _terms(m.breakdown)
    assert all(v >= 0.0 and math.copysign(1.0, v) == 1.0 for v in terms.values()), terms
    assert m.recall_count == 1 and terms["freshness"] == 0.0
    assert terms["recall"] == round(float(MemoryFunction().recall_score(1)), 6)  # as sent
    assert m.score == terms["total"]
