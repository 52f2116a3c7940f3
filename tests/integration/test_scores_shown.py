"""The numbers of one answer agree: a recall's memories carry their terms as of the recall's own
time, so a reinforced memory's breakdown is its result's, digit for digit; every computed term
and score, and a result's relevance, is sent to six decimal places, so that a clock's jitter
between two readings never shows as a freshness of -8e-09 on a memory stored a millisecond
before. Over gRPC and HTTP/JSON."""

from __future__ import annotations

from pathlib import Path

import pytest
from celestial_client.v1 import memory_pb2 as pb
from celestial_memory.clock import ManualClock
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder

from tests.integration.conftest import TRANSPORTS, running_server, stub_over

T = "shown"


class Ticking(ManualClock):
    """A clock that moves 1.37 ms at every reading, as a real one does between two readings."""

    def now(self) -> float:
        return self.advance(0.00137)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_one_answer_shows_one_score(tmp_path: Path, embedder: SentenceTransformerEmbedder,
                                          transport: str) -> None:
    async with running_server(tmp_path, embedder, Ticking(),
                              http_address="127.0.0.1:0") as srv, stub_over(transport, srv) as s:
        stored = (await s.Store(pb.StoreRequest(
            tenant=T, content="The Lisbon conference hotel is on Avenida da Liberdade"))).memory
        fresh = stored.breakdown.freshness
        assert fresh == 0.0 and str(fresh) == "0.0", fresh  # not -8e-09, nor -0.0
        assert stored.score == round(stored.score, 6)
        got = await s.Recall(pb.RecallRequest(tenant=T, query="Where is the conference hotel?",
                                              limit=3))
        assert got.results
        for r in got.results:
            m = r.memory
            # Reinforced by this recall: its terms now are the ones the recall computed.
            assert m.breakdown == r.breakdown
            for term in (m.breakdown.recall, m.breakdown.freshness, m.breakdown.context,
                         m.breakdown.total, m.score, r.relevance):
                assert term == round(term, 6) and str(term) != "-0.0", term
