"""Relations and entities through the Python clients, the agent tool and the CLI, against a real
server: session order, Relate, Unrelate, walks of 1 and 2 steps, the entity list and a profile."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from celestial_client import (
    AsyncCelestialClient,
    CelestialClient,
    InvalidArgumentError,
    Memory,
    NotFoundError,
    RelatedMemory,
)
from celestial_client.agent_tools import ToolArgumentError, call_tool
from celestial_client.cli import main
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.clock import ManualClock

# Entity ids are "<kind>:<key>"; names and places share the kind "name" in ids (the proto's
# example), so "Caroline" is this whichever way the extractor classed her.
CAROLINE = "name:caroline"
SESSION = "chat-1"


async def store_session(c: AsyncCelestialClient, clock: ManualClock) -> tuple[Memory, ...]:
    """Three turns of one session, oldest first: each follows the one before it."""
    now = clock.now()
    texts = ["Caroline: I went to the support group in Boston",
             "Melanie: that sounds brave, how did it go?",
             "Caroline: it helped a lot, I am going again next week"]
    return tuple([await c.store(t, session_id=SESSION, created_at=now - 300 + 100 * i)
                  for i, t in enumerate(texts)])


def hops(r: RelatedMemory) -> list[tuple[str, str, str]]:
    return [(h.from_id, h.to_id, h.relation) for h in r.path]


async def test_session_order_relate_walk_and_unrelate(
    aclient: AsyncCelestialClient, client: CelestialClient, clock: ManualClock
) -> None:
    a, b, c = await store_session(aclient, clock)

    # Session order: each memory follows the previous one of its session, from the newer to the
    # older, and both ends hold the relation.
    middle = await aclient.get(b.id)
    held = {(r.id, r.relation, r.outgoing, r.made_by) for r in middle.relations}
    assert held == {(a.id, "follows", True, "session"), (c.id, "follows", False, "session")}
    assert all(0 < r.weight <= 1 for r in middle.relations)

    # One step from the oldest: only b, reached against its "follows" (the hop keeps the
    # relation's own direction).
    (only,) = await aclient.related(a.id)
    assert only.id == b.id and hops(only) == [(b.id, a.id, "follows")]
    assert only.memory.content == b.content

    # Two steps: b, then c through b; nearest first.
    two = await aclient.related(a.id, depth=2)
    assert [r.id for r in two] == [b.id, c.id]
    assert hops(two[1]) == [(b.id, a.id, "follows"), (c.id, b.id, "follows")]
    assert [r.depth for r in two] == [1, 2]
    # Read one memory a page: the client follows the pages to the same answer.
    assert await aclient.related(a.id, depth=2, page_size=1) == two

    # Relate the oldest to the newest; relating again only sets the weight.
    made = await aclient.relate(a.id, c.id, "about", weight=0.5)
    assert (made.id, made.relation, made.weight, made.made_by, made.outgoing) == (
        c.id, "about", 0.5, "caller", True)
    assert made.created_at == datetime.fromtimestamp(clock.now(), UTC)
    again = await aclient.relate(a.id, c.id, "about", weight=0.9)
    assert again.weight == 0.9
    abouts = [r for r in (await aclient.get(a.id)).relations if r.relation == "about"]
    assert [(r.id, r.weight, r.outgoing) for r in abouts] == [(c.id, 0.9, True)]
    incoming = [r for r in (await aclient.get(c.id)).relations if r.relation == "about"]
    assert [(r.id, r.weight, r.outgoing) for r in incoming] == [(a.id, 0.9, False)]
    default = await aclient.relate(b.id, c.id, "mentions")
    assert default.weight == 1.0  # no weight: 1

    # Now c is one step from a: nearest first, then the product of the weights, highest first.
    one = await aclient.related(a.id, depth=1)
    assert {r.id for r in one} == {b.id, c.id} and all(r.depth == 1 for r in one)
    weights = [r.path[0].weight for r in one]
    assert weights == sorted(weights, reverse=True)
    (via_about,) = await aclient.related(a.id, relations=["about"])
    assert via_about.id == c.id and hops(via_about) == [(a.id, c.id, "about")]
    assert via_about.path[0].weight == 0.9
    # Each memory once, by its shortest walk, even with more steps allowed.
    walk = await aclient.related(a.id, depth=2)
    assert sorted(r.id for r in walk) == sorted([b.id, c.id]) and all(r.depth == 1 for r in walk)
    only_follows = await aclient.related(a.id, depth=2, relations=["follows"])
    assert [(r.id, r.depth) for r in only_follows] == [(b.id, 1), (c.id, 2)]

    # The blocking client sees the same (from a worker thread: the server runs on this loop).
    assert await asyncio.to_thread(client.related, a.id, 2, ["follows"]) == only_follows
    sync_made = await asyncio.to_thread(client.relate, c.id, a.id, "answers", 0.25)
    assert (sync_made.id, sync_made.outgoing, sync_made.weight) == (a.id, True, 0.25)

    # Unrelate: in that direction only, idempotent; an empty relation removes every one.
    assert await aclient.unrelate(c.id, a.id, "about") == 0  # a -> c, not c -> a
    assert await aclient.unrelate(a.id, c.id, "about") == 1
    assert await aclient.unrelate(a.id, c.id, "about") == 0
    assert await aclient.related(a.id, relations=["about"]) == []
    await aclient.relate(a.id, c.id, "about")
    await aclient.relate(a.id, c.id, "cites")
    assert await asyncio.to_thread(client.unrelate, a.id, c.id) == 2
    assert await aclient.unrelate(c.id, a.id) == 1  # "answers"
    assert {r.relation for r in (await aclient.get(a.id)).relations} == {"follows"}

    # Bad requests are the server's to refuse, and the client raises them typed.
    with pytest.raises(InvalidArgumentError):
        await aclient.relate(a.id, c.id, "Not A Name")
    with pytest.raises(InvalidArgumentError):
        await aclient.related(a.id, depth=4)
    with pytest.raises(NotFoundError):
        await aclient.relate(a.id, "00000000-0000-0000-0000-000000000000", "about")


async def test_store_answers_the_relations_it_made(
    aclient: AsyncCelestialClient, clock: ManualClock
) -> None:
    a, b, _ = await store_session(aclient, clock)
    # Store answers "the stored memory", whose relations include the session order it joined.
    assert [(r.id, r.relation, r.outgoing) for r in b.relations] == [(a.id, "follows", True)]


async def test_entities_list_profile_and_filter(
    aclient: AsyncCelestialClient, client: CelestialClient, clock: ManualClock
) -> None:
    a, b, c = await store_session(aclient, clock)
    assert CAROLINE in a.entities and CAROLINE in c.entities

    listed = await aclient.entities()
    by_id = {e.id: e for e in listed}
    caroline = by_id[CAROLINE]
    assert (caroline.key, caroline.mentions) == ("caroline", 2)
    assert caroline.id == f"{caroline.kind}:{caroline.key}"
    # Most mentioned first, ties by id.
    assert [(-e.mentions, e.id) for e in listed] == sorted((-e.mentions, e.id) for e in listed)
    assert await aclient.entities(page_size=1) == listed  # every page, in order
    assert await asyncio.to_thread(client.entities) == listed

    await aclient.recall("who went to the support group in Boston?", limit=3)  # recalls some
    profile = await aclient.entity(CAROLINE)
    assert profile.entity == caroline
    assert profile.first_seen == a.created_at and profile.last_seen == c.created_at
    assert {m.id for m in profile.most_recalled} <= {a.id, c.id} and profile.most_recalled
    counts = [m.recall_count for m in profile.most_recalled]
    assert counts == sorted(counts, reverse=True)
    assert (await asyncio.to_thread(client.entity, CAROLINE)).entity == caroline
    with pytest.raises(NotFoundError):
        await aclient.entity("name:nobody-at-all")

    # Recall only among the memories that mention her.
    found = await aclient.recall("how did it go?", limit=10, entities_any=[CAROLINE],
                                 reinforce=False)
    assert found and {r.id for r in found} <= {a.id, c.id}
    assert b.id not in {m.id for m in await aclient.recent(10, entities_any=[CAROLINE])}


async def test_recall_expansion_says_how_it_reached_a_result(
    aclient: AsyncCelestialClient, clock: ManualClock
) -> None:
    a, b, c = await store_session(aclient, clock)
    await aclient.relate(a.id, c.id, "about", weight=1.0)
    query = "the support group in Boston"
    # No relevance gate, so that the neighbours' derived relevance keeps them in the answer.
    plain = await aclient.recall(query, 10, expand=0, min_relevance=0.0, reinforce=False)
    assert plain and all(r.via is None for r in plain)
    expanded = await aclient.recall(query, 10, expand=1, min_relevance=0.0, reinforce=False)
    assert expanded[0].id == a.id and expanded[0].via is None  # the seed, found by itself
    reached = {r.id: r.via for r in expanded if r.via is not None}
    assert reached and set(reached) <= {b.id, c.id}
    for via in reached.values():
        assert via.from_id == a.id and via.hops == 1
        assert via.relation in {"about", "follows"} and 0 < via.weight <= 1
    # The recall's filter holds for the memories expansion brings too.
    assert await aclient.recall(query, 10, expand=1, session_id="another", min_relevance=0.0,
                                reinforce=False) == []


async def test_context_brings_neighbours(
    aclient: AsyncCelestialClient, clock: ManualClock
) -> None:
    a, b, _ = await store_session(aclient, clock)
    query = "the support group in Boston"
    alone = await aclient.context(query, 500, reinforce=False)
    assert alone.included_ids == [a.id]  # only the first turn is relevant by itself
    # With neighbours, each included memory's related memories come too (one step: b follows
    # a), as far as the budget allows; 500 tokens hold all three turns.
    both = await aclient.context(query, 500, neighbours=True, reinforce=False)
    assert a.id in both.included_ids and b.id in both.included_ids


async def test_memory_related_tool(
    aclient: AsyncCelestialClient, client: CelestialClient, clock: ManualClock
) -> None:
    a, b, c = await store_session(aclient, clock)
    out = await asyncio.to_thread(call_tool, client, "memory_related",
                                  {"id": a.id, "depth": 2, "relations": ["follows"]})
    assert [m["id"] for m in out.data["memories"]] == [b.id, c.id]
    step = out.data["memories"][1]["path"][1]
    assert (step["from_id"], step["to_id"], step["relation"]) == (c.id, b.id, "follows")
    assert out.text.splitlines()[1].startswith("follows (back) > follows (back): " + c.id)
    one = await asyncio.to_thread(call_tool, client, "memory_related", {"id": a.id})
    assert [m["id"] for m in one.data["memories"]] == [b.id]  # depth 1 by default
    with pytest.raises(ToolArgumentError, match="depth"):
        await asyncio.to_thread(call_tool, client, "memory_related", {"id": a.id, "depth": 4})


async def cli(server: MemoryServer, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run ``celestial`` as tenant "it" (the clients' tenant) in a worker thread; its output."""
    code = await asyncio.to_thread(
        main, ["--target", f"127.0.0.1:{server.port}", "--tenant", "it", *argv])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


async def cli_json(server: MemoryServer, capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    return json.loads(await cli(server, capsys, *argv, "--json"))


async def test_cli_relate_related_and_entities(
    server: MemoryServer, aclient: AsyncCelestialClient, clock: ManualClock,
    capsys: pytest.CaptureFixture[str],
) -> None:
    a, b, c = await store_session(aclient, clock)

    out = await cli(server, capsys, "relate", a.id, c.id, "about", "--weight", "0.7")
    assert out.strip().startswith(f"{a.id} -about-> {c.id}") and "by caller" in out
    doc = await cli_json(server, capsys, "relate", a.id, c.id, "about", "--weight", "0.6")
    assert doc["created"] is False  # set again, to 0.6
    rel = doc["relation"]
    assert (rel["id"], rel["relation"], rel["weight"], rel["madeBy"], rel["outgoing"]) == (
        c.id, "about", 0.6, "caller", True)
    assert datetime.fromisoformat(rel["createdAt"]) == datetime.fromtimestamp(clock.now(), UTC)

    out = await cli(server, capsys, "related", a.id, "--depth", "2", "--relation", "follows")
    header, _, first, second = out.splitlines()
    assert header.split() == ["steps", "weight", "path", "content", "id"]
    assert first.split()[0] == "1" and "<-follows-" in first and first.endswith(b.id)
    assert second.split()[0] == "2" and "<-follows- <-follows-" in second
    assert second.endswith(c.id)
    doc = await cli_json(server, capsys, "related", a.id, "--depth", "2", "--relation",
                         "follows")
    assert [m["memory"]["id"] for m in doc["memories"]] == [b.id, c.id]
    assert [(h["fromId"], h["toId"], h["relation"]) for h in doc["memories"][1]["path"]] == [
        (b.id, a.id, "follows"), (c.id, b.id, "follows")]
    assert doc["memories"][0]["memory"]["zone"] == f"ZONE_{b.zone.value.upper()}"
    doc = await cli_json(server, capsys, "related", a.id, "--relation", "about")
    assert [m["memory"]["id"] for m in doc["memories"]] == [c.id]
    assert "no memory is related" in await cli(server, capsys, "related", b.id, "--relation",
                                               "about")

    out = await cli(server, capsys, "get", a.id)
    assert f"{a.id} -about-> {c.id}" in out and CAROLINE in out

    out = await cli(server, capsys, "entities")
    assert out.splitlines()[0].split() == ["mentions", "kind", "key", "id"]
    assert any(line.split()[-1] == CAROLINE and line.split()[0] == "2"
               for line in out.splitlines()[2:])
    doc = await cli_json(server, capsys, "entities")
    assert {"id": CAROLINE, "kind": "name", "key": "caroline", "mentions": "2"} in doc["entities"]

    out = await cli(server, capsys, "entities", CAROLINE)
    assert out.startswith(f"entity       {CAROLINE}") and "mentions     2 memories" in out
    doc = await cli_json(server, capsys, "entities", CAROLINE)
    profile = doc["profile"]
    assert profile["entity"]["id"] == CAROLINE
    assert datetime.fromisoformat(profile["firstSeen"]) == a.created_at
    assert datetime.fromisoformat(profile["lastSeen"]) == c.created_at

    code = await asyncio.to_thread(main, ["--target", f"127.0.0.1:{server.port}", "--tenant",
                                          "it", "entities", "name:nobody-at-all"])
    assert code == 3 and "NOT_FOUND" in capsys.readouterr().err


async def test_memory_relate_and_restore_tools(
    aclient: AsyncCelestialClient, client: CelestialClient, clock: ManualClock
) -> None:
    a = await aclient.store("The offsite is in Lisbon", importance=0.0)
    b = await aclient.store("Book the flights to Lisbon by May")
    out = await asyncio.to_thread(call_tool, client, "memory_relate",
                                  {"from_id": b.id, "to_id": a.id, "relation": "about",
                                   "weight": 0.5})
    assert out.data == {"from_id": b.id, "to_id": a.id, "relation": "about", "weight": 0.5,
                        "made_by": "caller"}
    assert out.text == f"related {b.id} -about-> {a.id} (weight 0.50)"
    walked = await asyncio.to_thread(call_tool, client, "memory_related", {"id": a.id})
    assert [m["id"] for m in walked.data["memories"]] == [b.id]
    for bad in ({"from_id": b.id, "to_id": a.id, "relation": "About"},
                {"from_id": b.id, "to_id": a.id},
                {"from_id": b.id, "to_id": a.id, "relation": "about", "weight": 2}):
        with pytest.raises(ToolArgumentError):
            await asyncio.to_thread(call_tool, client, "memory_relate", bad)

    # Forgotten into the archive by the rebalance, then brought back by the tool.
    clock.advance(91 * 86400)
    await aclient.rebalance()
    assert (await aclient.get(a.id)).archived
    back = await asyncio.to_thread(call_tool, client, "memory_restore", {"id": a.id})
    assert back.data["memory"]["id"] == a.id and back.data["memory"]["archived"] is False
    assert back.text.startswith(f"restored: {a.id} ")
    with pytest.raises(NotFoundError):
        await asyncio.to_thread(call_tool, client, "memory_restore",
                                {"id": "00000000-0000-4000-8000-000000000000"})
