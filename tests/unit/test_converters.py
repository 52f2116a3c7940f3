"""``memory_size_bound`` is never below what ``memory_to_pb`` makes of a memory, whatever it
holds: a recall trusts it to skip measuring its answer (api/grpc/servicer.py, ``_fit``). And a
recall result's relevance is sent to the same six decimal places as the scores beside it."""

from __future__ import annotations

from celestial_memory.api.grpc.converters import (
    memory_size_bound,
    memory_to_pb,
    recall_result_to_pb,
)
from celestial_memory.domain.models import Edge, Memory, Provenance, RecallResult
from celestial_memory.domain.next_move import NextMove
from celestial_memory.domain.scoring import ScoreBreakdown
from celestial_memory.domain.zones import Zone
from hypothesis import given, settings
from hypothesis import strategies as st

text = st.text(alphabet=st.characters(codec="utf-8"), max_size=60)
labels = st.lists(text, max_size=6)
meta = st.dictionaries(text, text, max_size=4)
edges = st.lists(st.builds(Edge, text, text, st.floats(0, 1), text, st.floats(0, 4e9),
                           st.booleans()), max_size=5)
merged = st.lists(st.builds(Provenance, text, st.floats(0, 4e9), text, text, text, meta, text),
                  max_size=3)
triples = st.lists(st.tuples(text, text, text), max_size=3)
huge = st.sampled_from([0, 1, 2**53, 2**62])


@st.composite
def memories(draw: st.DrawFn) -> Memory:
    m = Memory(draw(text), draw(text), draw(text), draw(st.sampled_from(list(Zone))),
               draw(st.floats(-1e6, 1e6)), draw(st.floats(0, 1)), draw(huge),
               draw(st.floats(-6e10, 2.5e11)), draw(st.floats(-6e10, 2.5e11)))
    m.context, m.summary, m.session_id, m.agent_id = (draw(text) for _ in range(4))
    m.tags, m.entities, m.metadata = draw(labels), draw(labels), draw(meta)
    m.edges, m.merged, m.triples = draw(edges), draw(merged), draw(triples)
    m.understand_error = draw(text)
    m.archived_at = draw(st.one_of(st.none(), st.floats(0, 4e9)))
    return m


@settings(max_examples=300, deadline=None)
@given(memories(), st.floats(-1e9, 1e9), st.floats(0, 4e9))
def test_the_bound_holds(m: Memory, x: float, at: float) -> None:
    b = ScoreBreakdown(x, x, x, x, x)
    move = NextMove(Zone.CLOUD, at)
    assert memory_to_pb(m, b, move).ByteSize() <= memory_size_bound(m)


def test_the_bound_holds_where_every_character_takes_four_bytes() -> None:
    """Emoji leave the bound no slack but its fixed part: each field counted must be there."""
    e = "😀"
    m = Memory(e * 36, e * 10, e * 500, Zone.BELT, -1e6, 1.0, 2**62, -6e10, 2.5e11)
    m.context, m.summary, m.session_id, m.agent_id = e * 300, e * 200, e * 64, e * 64
    m.tags, m.entities = [e * 64] * 20, [e * 64] * 64
    m.metadata = {e * 64: e * 256} | {str(i): e * 256 for i in range(15)}
    m.edges = [Edge(e * 36, e * 64, 0.5, e * 8, 4e9, False)] * 256
    m.merged = [Provenance(e * 500, 4e9, e * 36, e * 64, e * 64, {e: e * 100}, e * 300)] * 8
    m.triples = [(e * 120, e * 120, e * 120)] * 16
    m.understand_error, m.archived_at = e * 200, 4e9
    size = memory_to_pb(m, ScoreBreakdown(-1e9, -1e9, -1e9, -1e9, -1e9),
                        NextMove(None, 4e9)).ByteSize()
    assert size <= memory_size_bound(m) <= size * 1.1 + 1024  # and not far above it


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 1), st.floats(-2, 2))
def test_a_results_relevance_is_rounded_as_its_scores_are(relevance: float, x: float) -> None:
    m = Memory("00000000-0000-4000-8000-000000000001", "t", "text", Zone.OUTER, x, 0.5, 0,
               0.0, 0.0)
    b = ScoreBreakdown(x, x, 0.5, x, x)
    r = recall_result_to_pb(RecallResult(m, Zone.OUTER, relevance, b), b)
    assert r.relevance == round(relevance, 6) and str(r.relevance) != "-0.0"
    for term in (r.breakdown.recall, r.breakdown.total, r.memory.score):
        assert term == round(x, 6) + 0.0  # one stated precision for every number of the answer
    assert recall_result_to_pb(RecallResult(m, Zone.OUTER, 0.12345678949, b), b
                               ).relevance == 0.123457
