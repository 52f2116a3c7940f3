"""One storage scenario suite, run against every backend: Qdrant Edge, qdrant-client
``:memory:``, and a real Qdrant server through testcontainers where a Docker engine answers
(the ``store`` fixture, conftest.py).
"""

from __future__ import annotations

import uuid
import zlib
from pathlib import Path

import numpy as np
import pytest
from celestial_memory.domain.models import (
    HybridQuery,
    IndexVectors,
    Memory,
    MemoryFilter,
    ZoneEvent,
)
from celestial_memory.domain.zones import Zone
from celestial_memory.recall.keywords import KeywordEncoder
from celestial_memory.store import MemoryRepository, open_edge

from tests.conftest import unit_vectors
from tests.scenarios.conftest import DIM

KEYWORDS = KeywordEncoder(1.2, 0.4, 14.0, 34.0)


def mem(
    tenant: str = "a",
    zone: Zone = Zone.OUTER,
    vector: np.ndarray | None = None,
    **kw: object,
) -> Memory:
    fields: dict[str, object] = {
        "content": "some text", "score": 0.2, "importance": 0.5, "recall_count": 0,
        "created_at": 1000.0, "last_recalled_at": 1000.0,
    }
    fields.update(kw)
    v = vector if vector is not None else unit_vectors(1, DIM, seed=zlib.crc32(str(kw).encode()) % 1000)[0]
    m = Memory(id=str(uuid.uuid4()), tenant=tenant, zone=zone, vector=v, **fields)  # type: ignore[arg-type]
    joined = f"{m.context}\n{m.content}" if m.context else m.content
    m.index = IndexVectors(v, KEYWORDS.document(m.content), KEYWORDS.document(joined, True))
    return m


def hq(vector: np.ndarray, text: str = "") -> HybridQuery:
    return HybridQuery(vector, KEYWORDS.query(text))


def ids(hits: list[str]) -> list[str]:
    return hits


def test_upsert_then_get_round_trips_every_field(store: MemoryRepository) -> None:
    m = mem(tags=["x", "y"], session_id="s1", agent_id="ag", metadata={"k": "v"}, pinned=True,
            content_hash="abc", context_score=0.4)
    store.upsert([m])
    got = store.get("a", [m.id], with_vectors=True)[m.id]
    for name in ("content", "zone", "score", "importance", "recall_count", "created_at",
                 "last_recalled_at", "tags", "session_id", "agent_id", "metadata", "pinned",
                 "content_hash", "context_score"):
        assert getattr(got, name) == getattr(m, name), name
    assert got.vector is not None
    np.testing.assert_allclose(got.vector, m.vector, atol=1e-6)


def test_get_omits_missing_and_foreign_ids(store: MemoryRepository) -> None:
    mine, theirs = mem("a"), mem("b")
    store.upsert([mine, theirs])
    got = store.get("a", [mine.id, theirs.id, str(uuid.uuid4())])
    assert set(got) == {mine.id}


def test_set_fields_changes_only_the_tenants_memories(store: MemoryRepository) -> None:
    mine, theirs = mem("a"), mem("b")
    store.upsert([mine, theirs])
    mine.zone, mine.score, theirs.zone = Zone.CORE, 0.6, Zone.CORE
    store.save("a", [mine, theirs], ("zone", "score"))
    assert store.get("a", [mine.id])[mine.id].zone == Zone.CORE
    assert store.get("a", [mine.id])[mine.id].score == 0.6
    assert store.get("b", [theirs.id])[theirs.id].zone == Zone.OUTER


def test_delete_is_scoped_and_counts(store: MemoryRepository) -> None:
    mine, theirs = mem("a"), mem("b")
    store.upsert([mine, theirs])
    assert store.delete("a", [theirs.id]) == 0
    assert store.delete("a", [mine.id]) == 1
    assert store.delete("a", [mine.id]) == 0
    assert store.get("b", [theirs.id])


def test_search_zones_is_one_query_per_zone_scoped_to_the_tenant(store: MemoryRepository) -> None:
    q = unit_vectors(1, DIM, seed=42)[0]
    near = q + 0.05 * unit_vectors(1, DIM, seed=1)[0]
    core, belt, far = mem(zone=Zone.CORE, vector=near), mem(zone=Zone.BELT, vector=q), mem(
        zone=Zone.BELT, vector=-q)
    store.upsert([core, belt, far, mem("b", zone=Zone.CORE, vector=q)])
    res = store.search_zones("a", hq(q), list(Zone), MemoryFilter(), limit=5)
    assert [ids(r) for r in res] == [[core.id], [], [], [belt.id, far.id], []]


def test_candidates_are_the_zone_searches_then_their_signal_scores(store: MemoryRepository) -> None:
    q = unit_vectors(1, DIM, seed=11)[0]
    noise = unit_vectors(12, DIM, seed=12)
    zones = [Zone.CORE, Zone.OUTER, Zone.BELT, Zone.CLOUD]
    words = ["budget review", "yoga class", "budget", "trip to Busan"]
    memories = [mem(zone=zones[i % 4], vector=q + 0.3 * noise[i], content=words[i % 4])
                for i in range(12)]
    store.upsert([*memories, mem("b", vector=q, content="budget")])
    for flt in (MemoryFilter(), MemoryFilter(zones=[Zone.OUTER, Zone.CLOUD])):
        zs = sorted(set(flt.zones)) if flt.zones else list(Zone)
        got = store.candidates("a", hq(q, "budget"), zs, flt, 2)
        first: dict[str, int] = {}  # each id and the first zone that found it
        for z, hits in zip(zs, store.search_zones("a", hq(q, "budget"), zs, flt, 2), strict=True):
            for i in hits:
                first.setdefault(i, int(z))
        assert got.ids == list(first) and got.zones == list(first.values())
        np.testing.assert_allclose(
            got.signals, store.signal_scores("a", hq(q, "budget"), got.ids), atol=1e-6)
        by_id = {m.id: m for m in memories}
        assert set(got.ids) <= set(by_id)  # the tenant's only
        assert len(got.ids) == 2 * len([z for z in zs if z != Zone.INNER])  # 3 in each other
        assert all(int(by_id[i].zone) == z for i, z in zip(got.ids, got.zones, strict=True))
        assert (got.signals[:, 2] > 0).sum() == sum(
            "budget" in by_id[i].content for i in got.ids)


def test_search_limits_candidates_and_ranks_by_fusion(store: MemoryRepository) -> None:
    q = unit_vectors(1, DIM, seed=3)[0]
    noise = unit_vectors(6, DIM, seed=4)
    memories = [mem(vector=q + 0.1 * (i + 1) * noise[i]) for i in range(6)]
    store.upsert(memories)
    (hits,) = store.search_zones("a", hq(q), [Zone.OUTER], MemoryFilter(), 3)
    cos = [float(q @ m.vector / np.linalg.norm(m.vector)) for m in memories]  # type: ignore[operator]
    assert ids(hits) == [memories[i].id for i in np.argsort(cos)[::-1][:3]]


def test_keywords_find_what_the_vector_misses(store: MemoryRepository) -> None:
    q = unit_vectors(1, DIM, seed=6)[0]
    word = mem(vector=-q, content="The quarterly budget review is on Friday")
    others = [mem(vector=q, content=f"unrelated note number {i}") for i in range(5)]
    store.upsert([word, *others])
    (hits,) = store.search_zones("a", hq(q, "budget reviews"), [Zone.OUTER], MemoryFilter(), 6)
    assert word.id in ids(hits)
    scores = store.signal_scores("a", hq(q, "budget reviews"), [word.id, others[0].id])
    assert scores[0, 2] > 0 and scores[1, 2] == 0  # keywords: stemmed match, no match
    assert scores[0, 0] == pytest.approx(-1.0, abs=1e-5)
    assert scores[1, 0] == pytest.approx(1.0, abs=1e-5)


def test_korean_keywords_match_across_particles(store: MemoryRepository) -> None:
    q = unit_vectors(1, DIM, seed=7)[0]
    yoga = mem(vector=-q, content="어제 요가 수업에 갔어요")
    other = mem(vector=-q, content="오늘 점심은 비빔밥이었어요")
    store.upsert([yoga, other])
    scores = store.signal_scores("a", hq(q, "요가 수업"), [yoga.id, other.id])
    assert scores[0, 2] > 0 and scores[1, 2] == 0


def test_context_is_indexed_apart_from_the_content(store: MemoryRepository) -> None:
    q = unit_vectors(1, DIM, seed=8)[0]
    m = mem(vector=q, content="Yes, it was amazing!", context="Did you see the aurora in Norway?")
    store.upsert([m])
    scores = store.signal_scores("a", hq(q, "aurora Norway"), [m.id])
    assert scores[0, 2] == 0 and scores[0, 3] > 0
    got = store.get("a", [m.id])[m.id]
    assert got.content == "Yes, it was amazing!" and got.context == m.context
    assert store.signal_scores("b", hq(q, "aurora"), [m.id]).tolist() == [[0.0, 0.0, 0.0, 0.0]]


def test_a_contextual_vector_is_kept_only_where_it_differs(store: MemoryRepository) -> None:
    q, other = unit_vectors(2, DIM, seed=21)
    plain = mem(vector=q, content="plain")  # its contextual vector is its content vector
    apart = mem(vector=q, content="with context", context="earlier turns")
    apart.index = IndexVectors(other, apart.index.keywords, apart.index.context_keywords)
    store.upsert([plain, apart])
    # At the store level, only the memory whose contextual vector differs has one...
    held = {r.id: set(r.vectors) for r in store.engine.retrieve(
        "memories", [plain.id, apart.id], payload=False, vectors=["dense", "dense_context"])}
    assert held == {plain.id: {"dense"}, apart.id: {"dense", "dense_context"}}
    # ...and both score by their context as recall reads it: the content cosine where none.
    for query in (hq(q), hq(q, "context")):
        scores = store.signal_scores("a", query, [plain.id, apart.id])
        assert scores[0, 1] == pytest.approx(scores[0, 0]) == pytest.approx(1.0, abs=1e-5)
        # The contextual vector is kept as float16 (payload.CONTEXT_DATATYPE): about 1e-4 off.
        assert scores[1, 1] == pytest.approx(float(q @ other), abs=1e-3)
        got = store.candidates("a", query, [Zone.OUTER], MemoryFilter(), 5)
        row = {i: n for n, i in enumerate(got.ids)}
        assert got.signals[row[plain.id], 1] == pytest.approx(got.signals[row[plain.id], 0])
        assert got.signals[row[apart.id], 1] == pytest.approx(float(q @ other), abs=1e-3)
    # An export still carries a contextual vector for every memory.
    exported = {m.id: m for page in store.export_pages("a") for m in page}
    assert np.allclose(exported[plain.id].index.context_dense, q, atol=1e-6)
    assert np.allclose(exported[apart.id].index.context_dense, other, atol=1e-3)


def test_contextual_vectors_written_later_or_reopened_are_rescored(tmp_path: Path) -> None:
    """The embedded store skips rescoring by the contextual vector while no point holds one: a
    memory given one later, or found in a reopened store, is rescored by it all the same."""
    q, other = unit_vectors(2, DIM, seed=24)
    store = open_edge(tmp_path / "shard", DIM)
    reopened: MemoryRepository | None = None
    try:
        plain = mem(vector=q, content="plain")
        store.upsert([plain])
        got = store.candidates("a", hq(q), [Zone.OUTER], MemoryFilter(), 5)
        assert got.signals[0, 1] == pytest.approx(got.signals[0, 0])
        apart = mem(vector=q, content="apart", context="before")
        apart.index = IndexVectors(other, apart.index.keywords, apart.index.context_keywords)
        store.upsert([apart])

        def check(s: MemoryRepository) -> None:
            got = s.candidates("a", hq(q), [Zone.OUTER], MemoryFilter(), 5)
            row = {i: n for n, i in enumerate(got.ids)}
            assert got.signals[row[apart.id], 1] == pytest.approx(float(q @ other), abs=1e-3)
            assert got.signals[row[plain.id], 1] == pytest.approx(got.signals[row[plain.id], 0])

        check(store)
        store.close()
        reopened = open_edge(tmp_path / "shard", DIM)
        check(reopened)
    finally:
        (reopened or store).close()


def test_entity_matches_count_a_memory_without_a_contextual_vector(
        store: MemoryRepository) -> None:
    # A query without keywords rescores only the contextual vector; which candidates mention an
    # entity is asked with the content vector, which every memory has.
    q, other = unit_vectors(2, DIM, seed=23)
    plain = mem(vector=q, content="plain", entities=["person:ana"])  # no contextual vector
    apart = mem(vector=q, content="apart", context="before", entities=["person:ana"])
    apart.index = IndexVectors(other, apart.index.keywords, apart.index.context_keywords)
    neither = mem(vector=q, content="neither", entities=["person:bo"])
    store.upsert([plain, apart, neither])
    got = store.candidates("a", hq(q), [Zone.OUTER], MemoryFilter(), 5, ["person:ana"])
    mentions = dict(zip(got.ids, got.mentions or [], strict=True))
    assert mentions == {plain.id: ["person:ana"], apart.id: ["person:ana"], neither.id: []}


def test_filters_restrict_search_and_delete(store: MemoryRepository) -> None:
    q = unit_vectors(1, DIM, seed=5)[0]
    a = mem(vector=q, tags=["x", "y"], session_id="s1", agent_id="bot", importance=0.9,
            created_at=100.0, last_recalled_at=500.0, metadata={"lang": "en"})
    b = mem(vector=q, tags=["y"], session_id="s2", agent_id="bot", importance=0.2,
            created_at=200.0, last_recalled_at=200.0, metadata={"lang": "ko"})
    store.upsert([a, b])

    def found(f: MemoryFilter) -> set[str]:
        (hits,) = store.search_zones("a", hq(q), [Zone.OUTER], f, 10)
        return set(ids(hits))

    assert found(MemoryFilter(tags_any=["x"])) == {a.id}
    assert found(MemoryFilter(tags_any=["x", "y"])) == {a.id, b.id}
    assert found(MemoryFilter(tags_all=["x", "y"])) == {a.id}
    assert found(MemoryFilter(session_id="s2")) == {b.id}
    assert found(MemoryFilter(agent_id="bot")) == {a.id, b.id}
    assert found(MemoryFilter(min_importance=0.5)) == {a.id}
    assert found(MemoryFilter(created_after=150.0)) == {b.id}
    assert found(MemoryFilter(created_before=150.0)) == {a.id}
    assert found(MemoryFilter(recalled_after=300.0)) == {a.id}
    assert found(MemoryFilter(metadata={"lang": "ko"})) == {b.id}
    assert found(MemoryFilter(agent_id="bot", session_id="s1", min_importance=0.5)) == {a.id}
    assert found(MemoryFilter(tags_any=["y"], metadata={"lang": "en"}, created_after=150)) == set()
    assert store.delete_by_filter("a", MemoryFilter(session_id="s1")) == 1
    assert found(MemoryFilter()) == {b.id}


def test_similarities_come_from_the_engine(store: MemoryRepository) -> None:
    q = unit_vectors(1, DIM, seed=9)[0]
    a, b = mem(vector=q), mem(vector=-q)
    store.upsert([a, b, mem("b", vector=q)])
    sims = store.similarities("a", q, [a.id, b.id])
    assert sims[a.id] == pytest.approx(1.0, abs=1e-5)
    assert sims[b.id] == pytest.approx(-1.0, abs=1e-5)


def test_count_by_zone_and_tenants(store: MemoryRepository) -> None:
    store.upsert([mem(zone=Zone.CORE), mem(zone=Zone.CORE), mem(zone=Zone.CLOUD), mem("b")])
    counts = store.count_by_zone("a")
    assert counts == {Zone.CORE: 2, Zone.INNER: 0, Zone.OUTER: 0, Zone.BELT: 0, Zone.CLOUD: 1}
    assert store.tenants() == ["a", "b"]


def test_scan_pages_through_everything(store: MemoryRepository) -> None:
    store.upsert([mem(zone=Zone(i % 5)) for i in range(25)] + [mem("b")])
    pages = list(store.scan("a", MemoryFilter(), page_size=10))
    assert [len(p) for p in pages] == [10, 10, 5]
    assert len({m.id for p in pages for m in p}) == 25
    core = [m for p in store.scan("a", MemoryFilter(zones=[Zone.CORE])) for m in p]
    assert len(core) == 5 and all(m.zone == Zone.CORE for m in core)


def test_edge_store_survives_reopening(tmp_path: Path) -> None:
    s = open_edge(tmp_path / "shard", DIM)
    m = mem()
    s.upsert([m])
    m.recall_count = 3
    s.save("a", [m], ("recall_count",))
    s.close()
    again = open_edge(tmp_path / "shard", DIM)
    assert again.get("a", [m.id])[m.id].recall_count == 3
    assert again.count_by_zone("a")[Zone.OUTER] == 1
    again.close()


def test_recent_orders_by_creation_newest_first(store: MemoryRepository) -> None:
    ms = [mem(created_at=100.0 + i, session_id=f"s{i % 2}") for i in range(5)]
    store.upsert([*ms, mem("b", created_at=999.0)])
    page, more = store.recent_page("a", MemoryFilter(), 3, None)
    assert [m.id for m in page] == [ms[4].id, ms[3].id, ms[2].id] and more
    page, more = store.recent_page("a", MemoryFilter(session_id="s1"), 10, None)
    assert [m.id for m in page] == [ms[3].id, ms[1].id] and not more


@pytest.mark.parametrize("size", [1, 3, 7, 50])
def test_time_pages_go_through_groups_of_equal_times_once(
    store: MemoryRepository, size: int
) -> None:
    # Many memories share a creation time (one batch), and events share one rebalance's time:
    # pages may end inside such a group and the next page goes on from its last id.
    times = [100.0] * 9 + [101.0] + [102.0] * 12 + [103.0, 104.0]
    ms = [mem(created_at=t) for t in times]
    store.upsert([*ms, mem("b", created_at=102.0)])
    seen: list[str] = []
    cursor = None
    while True:
        page, more = store.recent_page("a", MemoryFilter(), size, cursor)
        assert len(page) <= size
        seen += [m.id for m in page]
        if not more:
            break
        cursor = (page[-1].created_at, page[-1].id)
    by_time = sorted(ms, key=lambda m: (-m.created_at, m.id))
    assert seen == [m.id for m in by_time]

    events = [ZoneEvent(str(uuid.uuid4()), "a", f"m{i}", Zone.CORE, Zone.INNER, "capacity",
                        100.0 if i < 17 else 100.5, "h") for i in range(20)]
    store.append_events(events)
    got: list[str] = []
    ecursor = None
    while True:
        evs, more = store.read_events("a", None, size, cursor=ecursor)
        got += [e.id for e in evs]
        if not more:
            break
        ecursor = (evs[-1].at, evs[-1].id)
    assert got == [e.id for e in sorted(events, key=lambda e: (e.at, e.id))]


def test_time_pages_hold_with_times_the_engine_gives_back_inexactly(
    store: MemoryRepository,
) -> None:
    # Clock times with every bit of a double used: the embedded engine gives some payload floats
    # back an ulp away from what it indexed, and paging must still meet each record once.
    rng = np.random.default_rng(7)
    times = 1_795_000_000.0 + rng.random(60) * 1000
    events = [ZoneEvent(str(uuid.uuid4()), "a", f"m{i}", Zone.CORE, Zone.INNER, "capacity",
                        float(times[i % 60]), "h") for i in range(400)]  # groups of 6 or 7
    store.append_events(events)
    for size in (5, 13):
        got: list[str] = []
        cursor = None
        while True:
            page, more = store.read_events("a", None, size, cursor=cursor)
            got += [e.id for e in page]
            if not more:
                break
            cursor = (page[-1].at, page[-1].id)
        assert sorted(got) == sorted(e.id for e in events) and len(got) == len(set(got))


def test_list_pages_in_id_order(store: MemoryRepository) -> None:
    ms = [mem(session_id="s" if i % 3 else "t") for i in range(10)]
    store.upsert([*ms, mem("b")])
    seen: list[str] = []
    after = None
    while True:
        page, more = store.list_page("a", MemoryFilter(session_id="s"), 4, after)
        seen += [m.id for m in page]
        if not more:
            break
        after = page[-1].id
    assert seen == sorted(m.id for m in ms if m.session_id == "s")


def test_export_pages_in_id_order_with_vectors_and_resume(store: MemoryRepository) -> None:
    ms = [mem(content=f"m{i}", context="ctx" if i % 2 else "") for i in range(7)]
    store.upsert([*ms, mem("b")])
    pages = list(store.export_pages("a", page_size=3))
    got = [m for p in pages for m in p]
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [m.id for m in got] == sorted(m.id for m in ms)
    by_id = {m.id: m for m in ms}
    for m in got:
        assert m.index is not None and m.vector is not None
        np.testing.assert_allclose(m.vector, by_id[m.id].vector / np.linalg.norm(
            by_id[m.id].vector), atol=1e-6)
        assert m.context == by_id[m.id].context
    rest = [m.id for p in store.export_pages("a", after_id=got[2].id, page_size=3) for m in p]
    assert rest == [m.id for m in got[3:]]


def test_lease_is_taken_renewed_refused_released_and_expires(store: MemoryRepository) -> None:
    assert store.acquire_lease("rebalance:a", "A", now=100.0, ttl=60) == "A"
    assert store.acquire_lease("rebalance:a", "B", now=120.0, ttl=60) == "A"  # unexpired
    assert store.acquire_lease("rebalance:a", "A", now=150.0, ttl=60) == "A"  # renewed to 210
    assert store.acquire_lease("rebalance:a", "B", now=200.0, ttl=60) == "A"
    assert store.acquire_lease("rebalance:b", "B", now=200.0, ttl=60) == "B"  # another name
    store.release_lease("rebalance:a", "B")  # not B's: nothing happens
    assert store.acquire_lease("rebalance:a", "B", now=201.0, ttl=60) == "A"
    assert store.acquire_lease("rebalance:a", "B", now=211.0, ttl=60) == "B"  # A's expired
    store.release_lease("rebalance:a", "B")
    assert store.acquire_lease("rebalance:a", "A", now=212.0, ttl=60) == "A"


def test_markers_are_read_back_and_overwritten(store: MemoryRepository) -> None:
    assert store.read_marker("rebalanced:a") is None
    store.write_marker("rebalanced:a", 1.5)
    store.write_marker("rebalanced:b", 7.0)
    store.write_marker("rebalanced:a", 2.5)
    assert (store.read_marker("rebalanced:a"), store.read_marker("rebalanced:b")) == (2.5, 7.0)
    assert store.tenants() == []  # markers and leases are not memories


def test_ledger_is_append_only_idempotent_ordered_and_scoped(store: MemoryRepository) -> None:
    def event(i: int, tenant: str = "a", memory: str = "m1", at: float = 0.0) -> ZoneEvent:
        return ZoneEvent(str(uuid.uuid5(uuid.NAMESPACE_URL, f"e{i}")), tenant, memory,
                         Zone.CORE, Zone.INNER if i % 2 else None,
                         "capacity" if i % 2 else "forgotten", at or 100.0 + i, f"h{i}")

    events = [event(i, memory=f"m{i % 2}") for i in range(6)]
    store.append_events(events[::-1])  # written in any order, read back by time
    store.append_events([event(2, at=999.0)])  # same id again: the first write stays
    store.append_events([event(9, tenant="b")])
    assert store.read_events("a", None, 100) == (events, False)
    assert store.read_events("a", 102.0, 100) == (events[2:], False)
    assert store.read_events("a", None, 2) == (events[:2], True)
    assert store.read_events("a", None, 100, memory_id="m1") == (events[1::2], False)
    assert [e.tenant for e in store.read_events("b", None, 100)[0]] == ["b"]
    store.write_marker("x", 1.0)  # markers and leases never read as events
    store.acquire_lease("x", "A", 1.0, 1.0)
    assert len(store.read_events("a", None, 100)[0]) == 6


def test_an_embedded_store_made_with_float32_context_vectors_still_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stores made before contextual vectors were kept as float16 open as they are."""
    from celestial_memory.store import payload

    q, other = unit_vectors(2, DIM, seed=22)
    m = mem(vector=q, context="earlier turns")
    m.index = IndexVectors(other, m.index.keywords, m.index.context_keywords)
    with monkeypatch.context() as patched:
        patched.setattr(payload, "CONTEXT_DATATYPE", "float32")
        old = open_edge(tmp_path / "shard", DIM)
        old.upsert([m])
        old.close()
    reopened = open_edge(tmp_path / "shard", DIM)  # the float16 default would not fit it
    try:
        scores = reopened.signal_scores("a", hq(q), [m.id])
        assert scores[0, 1] == pytest.approx(float(q @ other), abs=1e-6)  # still float32
    finally:
        reopened.close()
