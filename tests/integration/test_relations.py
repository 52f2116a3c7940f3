"""Connected memory on both engines: relations made by the caller and by session order, walks,
erasure, archive, export and import, repeats, entities, and graph expansion in recall."""

from __future__ import annotations

from pathlib import Path

import pytest
from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.domain.models import Memory, MemoryFilter
from celestial_memory.domain.requests import Imported, NewMemory, RecallQuery
from celestial_memory.domain.zones import Zone
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.errors import InvalidArgument, NotFound
from celestial_memory.memory.service import MemoryService

from tests.conftest import open_backend

T = "graph"
T0 = 1_700_000_000.0


def _session(service: MemoryService, texts: list[str], session: str = "s1",
             tenant: str = T) -> list[str]:
    items = [NewMemory(t, session_id=session, created_at=T0 + i, importance=0.5)
             for i, t in enumerate(texts)]
    return [m.id for m in service.store_many(tenant, items)]


def _all(service: MemoryService, tenant: str = T) -> list[Memory]:
    return [m for page in service.store.export_pages(tenant) for m in page]


def test_each_memory_follows_the_previous_one_of_its_session(service: MemoryService) -> None:
    a, b, c = _session(service, ["Caroline went to a support group", "It was powerful",
                                 "She wants to study counseling"])
    # One stored later, on its own, follows the session's latest.
    [d] = [m.id for m in service.store_many(T, [NewMemory("Melanie painted a sunrise",
                                                          session_id="s1", created_at=T0 + 9)])]
    edges = {m.id: m.edges for m in _all(service)}
    assert [(e.other, e.relation, e.outgoing) for e in edges[b]] == [
        (a, "follows", True), (c, "follows", False)]
    assert {(e.other, e.outgoing) for e in edges[d]} == {(c, True)}
    walk, _ = service.related(T, b, 2)
    order = [m.id for _, m, _ in walk]
    assert set(order[:2]) == {a, c} and order[2:] == [d]  # nearest first, equal weights by id
    reached = {m.id: r for _, m, r in walk}
    assert [(h.source, h.target) for h in reached[d].path] == [(c, b), (d, c)]


def test_relate_is_idempotent_scoped_and_unrelate_removes(service: MemoryService) -> None:
    a, b = _session(service, ["the trip to Boston", "the hotel booking"], session="")
    edge, created = service.relations.relate(T, a, b, "about", 0.8)
    assert created and edge.other == b and edge.weight == 0.8
    _, again = service.relations.relate(T, a, b, "about", 0.6)
    assert not again
    got = {m.id: m for m in _all(service)}
    assert [(e.other, e.weight, e.outgoing) for e in got[a].edges] == [(b, 0.6, True)]
    assert [(e.other, e.outgoing) for e in got[b].edges] == [(a, False)]
    [other] = _session(service, ["another tenant's memory"], session="", tenant="other")
    with pytest.raises(NotFound):
        service.relations.relate(T, a, other, "about")
    with pytest.raises(NotFound):
        service.related("other", a, 1)
    for bad in ("", "Has Space", "x" * 65):
        with pytest.raises(InvalidArgument):
            service.relations.relate(T, a, b, bad)
    with pytest.raises(InvalidArgument):
        service.relations.relate(T, a, a, "self")
    assert service.relations.unrelate(T, a, b) == 1
    assert service.relations.unrelate(T, a, b) == 0
    assert all(not m.edges for m in _all(service))


def test_erasure_leaves_no_relation_pointing_at_a_deleted_memory(service: MemoryService) -> None:
    a, b, c = _session(service, ["first turn", "second turn", "third turn"])
    service.relations.relate(T, c, b, "answers")
    assert service.delete(T, b)
    left = _all(service)
    assert {m.id for m in left} == {a, c}
    assert all(e.other != b for m in left for e in m.edges)
    # At the store level too: nothing indexed points at it.
    assert service.store.graph.pointing_at(T, [b]) == {}


def test_archive_export_and_import_keep_relations(tmp_path: Path, service: MemoryService,
                                                   backend_kind: str) -> None:
    a, b = _session(service, ["planning the garden", "buying the roses"])
    service.relations.relate(T, b, a, "part_of", 0.7)
    service.store.archive([a], T0 + 100)
    kept = {m.id: m.edges for m in _all(service)}
    assert {(e.other, e.relation) for e in kept[a]} == {(b, "follows"), (b, "part_of")}
    exported = [m for page in service.transfer.export_pages(T) for m in page]
    other = build_service(Settings(data_dir=tmp_path / "copy", rebalance_interval_s=0),
                          embedder=service.embedder,
                          store=open_backend(backend_kind, tmp_path / "copy"),
                          clock=ManualClock(T0 + 200))
    try:
        other.transfer.import_batch(T, [Imported(m, m.index.context_dense if m.index else None)
                                        for m in exported])
        assert {m.id: sorted((e.other, e.relation, e.outgoing) for e in m.edges)
                for m in _all(other)} == {
            mid: sorted((e.other, e.relation, e.outgoing) for e in es)
            for mid, es in kept.items()}
    finally:
        other.close()


def test_relations_survive_a_restart(tmp_path: Path, embedder: SentenceTransformerEmbedder,
                                     clock: ManualClock) -> None:
    settings = Settings(data_dir=tmp_path, rebalance_interval_s=0)
    first = build_service(settings, embedder=embedder, store=open_backend("edge", tmp_path),
                          clock=clock)
    a, b = _session(first, ["the first note", "the second note"])
    first.close()
    again = build_service(settings, embedder=embedder, store=open_backend("edge", tmp_path),
                          clock=clock)
    try:
        assert [m.id for _, m, _ in again.related(T, b, 1)[0]] == [a]
    finally:
        again.close()


def test_a_repeat_stands_in_its_session_as_the_memory_it_went_into(
        service: MemoryService) -> None:
    [kept] = _session(service, ["Alice drinks espresso every morning"], session="old")
    ids = _session(service, ["we talked about coffee", "Alice drinks espresso every morning"],
                   session="new")
    assert ids[1] == kept  # merged into the earlier memory
    edges = {m.id: m.edges for m in _all(service)}
    assert (ids[0], "follows", True) in {(e.other, e.relation, e.outgoing) for e in edges[kept]}


def test_entities_are_indexed_listed_and_profiled(service: MemoryService) -> None:
    _session(service, ["Caroline: I went to the support group in Boston",
                       "Melanie: Caroline told me about Boston on 7 May 2023",
                       "Jon lost his job"], session="")
    listed = {e.id: e.mentions for e in service.entities.listed(T)}
    assert listed["name:caroline"] == 2 and "date:2023-05-07" in listed
    assert listed["name:boston"] == 2  # a place after "in", a name after "about": one entity
    found = service.recall(T, RecallQuery("what happened", min_relevance=0.0, reinforce=False,
                                          filter=MemoryFilter(entities_any=["name:boston"])))
    assert len(found) == 2
    profile = service.entity_profile(T, "name:caroline")
    assert profile.entity.mentions == 2 and profile.first_seen == T0
    assert profile.last_seen == T0 + 1 and len(profile.most_recalled) == 2
    with pytest.raises(NotFound):
        service.entity_profile(T, "name:nobody")
    with pytest.raises(InvalidArgument):
        service.entity_profile(T, "no-kind")


def test_expansion_brings_a_seeds_neighbour_and_says_through_what(
        service: MemoryService) -> None:
    a, b = _session(service, ["Melanie: what did you paint last week?",
                              "Caroline: a lake at sunrise, with my kids"])
    q = RecallQuery("what did Melanie ask about painting", limit=2, reinforce=False,
                    min_relevance=0.0)
    plain = service.recall(T, q.__class__(**{**_fields(q), "expand": 0}))
    grown = service.recall(T, q.__class__(**{**_fields(q), "expand": 1}))
    assert all(r.via is None for r in plain)
    by_id = {r.memory.id: r for r in grown}
    assert by_id[a].via is None
    assert by_id[b].via is not None and by_id[b].via.source == a
    assert by_id[b].via.relation == "follows"
    plain_rel = {r.memory.id: r.relevance for r in plain}
    assert by_id[b].relevance > plain_rel[b]  # lifted by its seed
    assert by_id[a].relevance == pytest.approx(plain_rel[a])


def _fields(q: RecallQuery) -> dict[str, object]:
    return {f: getattr(q, f) for f in q.__slots__}  # type: ignore[attr-defined]


def test_candidates_say_which_query_entities_they_mention(service: MemoryService) -> None:
    a, b, c = _session(service, ["Caroline went to Sweden in May", "Melanie painted a lake",
                                 "Caroline likes jazz"], session="")
    text = "What did Caroline do in Sweden?"
    asked = service.retrieval.entities(text)
    assert asked == ["name:caroline", "name:sweden"]
    hq = service.retrieval.query(text, service.embedder.embed([text])[0])
    cands = service.store.candidates(T, hq, list(Zone), MemoryFilter(), 10, asked)
    assert cands.mentions is not None
    got = dict(zip(cands.ids, cands.mentions, strict=True))
    assert got == {a: ["name:caroline", "name:sweden"], b: [], c: ["name:caroline"]}
    # Without entities asked, nothing extra is read.
    assert service.store.candidates(T, hq, list(Zone), MemoryFilter(), 10).mentions is None
    # And the recall ranks the memory naming both first.
    top = service.recall(T, RecallQuery(text, limit=3, reinforce=False, min_relevance=0.0))
    assert top[0].memory.id == a
