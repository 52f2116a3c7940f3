"""Hybrid recall through gRPC with the bundled model: Korean keywords, contextual indexing, every
filter alone and combined, what each result carries, and the admin clock."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from celestial_client import AsyncCelestialClient, FailedPreconditionError, StoreItem, Zone
from celestial_memory.clock import ManualClock
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder

from tests.integration.conftest import running_server

T0 = 1_700_000_000.0


async def test_a_korean_memory_is_recalled_by_a_korean_keyword(aclient: AsyncCelestialClient) -> None:
    korean = await aclient.store("어제 저녁에 요가 수업에 처음 갔어요")
    await aclient.store_batch([
        "오늘 점심은 비빔밥이었어요", "주말에 부산으로 여행을 갈 거예요",
        "I went to a yoga class yesterday", "The meeting moved to Thursday",
    ])
    results = await aclient.recall("요가 수업", limit=2, reinforce=False)
    assert results[0].id == korean.id
    # A particle on the query's noun still finds the bare noun's memory.
    results = await aclient.recall("부산에서", limit=1, reinforce=False)
    assert "부산" in results[0].memory.content


async def test_context_is_searchable_but_not_content(aclient: AsyncCelestialClient) -> None:
    m = await aclient.store("Yes, it was breathtaking!", context="Did you see the aurora in Norway?")
    await aclient.store_batch(["Breathtaking views from the mountain", "Yes, I agree with you"])
    assert m.content == "Yes, it was breathtaking!" and m.context.startswith("Did you see")
    results = await aclient.recall("aurora in Norway", limit=1, reinforce=False)
    assert results[0].id == m.id and results[0].memory.context == m.context


async def test_every_result_carries_zone_relevance_and_breakdown(
    aclient: AsyncCelestialClient,
) -> None:
    await aclient.store_batch(["Alice likes espresso", "Bob likes green tea", "Carol likes cocoa"])
    results = await aclient.recall("what does Alice drink", limit=3)
    assert len(results) == 3
    for r in results:
        assert r.found_in in set(Zone) and 0.0 <= r.relevance <= 1.0
        b = r.breakdown
        assert b.total == pytest.approx(  # each term is sent to six decimal places
            0.25 * b.recall + 0.30 * b.freshness + 0.25 * b.importance + 0.20 * b.context,
            abs=1e-6)


async def test_the_weighted_order_returns_results_by_relevance(
    tmp_path: Path, embedder: SentenceTransformerEmbedder,
) -> None:
    # The learned ranker (the default) may order a tier otherwise; the weights order by relevance.
    async with running_server(tmp_path, embedder, ManualClock(T0), ranker="weights") as srv, \
            AsyncCelestialClient(f"127.0.0.1:{srv.port}", tenant="it") as c:
        await c.store_batch(["Alice likes espresso", "Bob likes green tea", "Carol likes cocoa"])
        results = await c.recall("what does Alice drink", limit=3)
    assert len(results) == 3
    assert [r.relevance for r in results] == sorted((r.relevance for r in results), reverse=True)


# -- filters -----------------------------------------------------------------------------------

ITEMS = [
    # name, tags, session, agent, created offset (days), importance, metadata
    ("a", ["work", "urgent"], "s1", "bot", 0, 0.9, {"lang": "en"}),
    ("b", ["work"], "s1", "crm", 1, 0.3, {"lang": "ko"}),
    ("c", ["home"], "s2", "bot", 2, 0.7, {"lang": "en"}),
    ("d", ["home", "urgent"], "s2", "crm", 3, 0.1, {"lang": "en"}),
    ("e", [], "s3", "bot", 4, 0.5, {}),
]
DAY = 86_400.0
FILTERS: list[tuple[str, dict[str, Any], set[str]]] = [
    ("tags_any", {"tags_any": ["urgent"]}, {"a", "d"}),
    ("tags_any several", {"tags_any": ["urgent", "home"]}, {"a", "c", "d"}),
    ("tags_all", {"tags_all": ["home", "urgent"]}, {"d"}),
    ("session_id", {"session_id": "s2"}, {"c", "d"}),
    ("agent_id", {"agent_id": "crm"}, {"b", "d"}),
    ("created_after", {"created_after": T0 + 2 * DAY}, {"c", "d", "e"}),
    ("created_before", {"created_before": T0 + 2 * DAY}, {"a", "b"}),
    ("min_importance", {"min_importance": 0.5}, {"a", "c", "e"}),
    ("metadata", {"metadata": {"lang": "en"}}, {"a", "c", "d"}),
    ("recalled_after", {"recalled_after": T0 + 10 * DAY}, {"b"}),
    ("recalled_before", {"recalled_before": T0 + 3 * DAY}, {"a", "c"}),
    ("zones", {"zones": [Zone.OUTER]}, {"b"}),
    ("combined: tags and agent", {"tags_any": ["urgent"], "agent_id": "bot"}, {"a"}),
    ("combined: session, importance, metadata",
     {"session_id": "s2", "min_importance": 0.5, "metadata": {"lang": "en"}}, {"c"}),
    ("combined: created range and tags_all",
     {"created_after": T0 + DAY, "created_before": T0 + 4 * DAY, "tags_all": ["home"]}, {"c", "d"}),
    ("combined: zone and recalled range",
     {"zones": [Zone.OUTER, Zone.CLOUD], "recalled_after": T0 + 3.5 * DAY}, {"b", "e"}),
    ("combined: nothing matches", {"agent_id": "bot", "metadata": {"lang": "ko"}}, set()),
]


async def test_every_filter_alone_and_combined(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    clock = ManualClock(T0 + 10 * DAY)
    async with (
        running_server(tmp_path, embedder, clock) as srv,
        AsyncCelestialClient(f"127.0.0.1:{srv.port}", tenant="f") as c,
    ):
        await c.store_batch([
            StoreItem(f"note {name} about the project plan", tags=tags, session_id=s,
                      agent_id=agent, created_at=T0 + days * DAY, importance=imp,
                      metadata=meta)
            for name, tags, s, agent, days, imp, meta in ITEMS
        ])
        ids = {}
        for r in await c.recall("project plan", limit=10, reinforce=False, min_relevance=0):
            ids[r.memory.content.split()[1]] = r.id
        assert set(ids) == {"a", "b", "c", "d", "e"}
        # Recall b now (day 10): it alone is recalled recently, and reinforcement lifts it
        # to the outer zone; the others rest further out (a in the belt, the rest cloud).
        got = await c.recall("note b", limit=1, session_id="s1", agent_id="crm")
        assert got[0].id == ids["b"]
        await asyncio.sleep(0.2)  # the write-behind flush
        assert (await c.get(ids["b"])).zone == Zone.OUTER
        names = {v: k for k, v in ids.items()}
        for label, flt, expected in FILTERS:
            res = await c.recall("project plan", limit=10, reinforce=False, min_relevance=0,
                                 **flt)
            assert {names[r.id] for r in res} == expected, label
        # "All memories of a session": any query, filtered by session.
        res = await c.recall("anything", limit=10, reinforce=False, min_relevance=0,
                             session_id="s1")
        assert {names[r.id] for r in res} == {"a", "b"}


async def test_the_admin_clock_is_off_by_default(
    aclient: AsyncCelestialClient, tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    with pytest.raises(FailedPreconditionError):
        await aclient.set_clock(T0)
    async with (
        running_server(tmp_path / "admin", embedder, ManualClock(), admin_clock=True) as s,
        AsyncCelestialClient(f"127.0.0.1:{s.port}", tenant="r") as c,
    ):
        assert (await c.set_clock(T0)).timestamp() == T0
        m = await c.store("replayed")
        assert m.created_at.timestamp() == T0


async def test_recent_lists_the_newest_first_and_a_whole_session(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    async with (
        running_server(tmp_path, embedder, ManualClock(T0 + 100)) as srv,
        AsyncCelestialClient(f"127.0.0.1:{srv.port}", tenant="r") as c,
    ):
        await c.store_batch([
            StoreItem(f"turn {i}", created_at=T0 + i, session_id=f"s{i % 2}") for i in range(6)
        ])
        newest = await c.recent(limit=3)
        assert [m.content for m in newest] == ["turn 5", "turn 4", "turn 3"]
        session = await c.recent(limit=100, session_id="s0")
        assert [m.content for m in session] == ["turn 4", "turn 2", "turn 0"]
        assert all(m.recall_count == 0 for m in session)  # not reinforced
