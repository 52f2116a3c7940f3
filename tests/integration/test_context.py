"""Context: a recall assembled into a block for a prompt within a token budget (both backends),
and the same through gRPC, the Python client and the agent tools."""

from __future__ import annotations

import asyncio
import random
import uuid

import pytest
from celestial_client import CelestialClient
from celestial_client.agent_tools import call_tool
from celestial_memory.clock import ManualClock
from celestial_memory.domain.requests import NewMemory, RecallQuery
from celestial_memory.errors import InvalidArgument
from celestial_memory.memory.prompt_context import HEADER
from celestial_memory.memory.service import MemoryService

T = "ctx"
WORDS = (
    "alice", "bob", "carol", "coffee", "tea", "espresso", "meeting", "tuesday", "deploy",
    "server", "frankfurt", "badge", "flight", "gate", "dog", "biscuit", "wifi", "password",
    "monday", "standup", "invoice", "budget", "garden", "roses", "piano", "lessons", "한국어",
    "회의", "커피",
)


def put(svc: MemoryService, content: str, **kw: object) -> str:
    # An id of its own: items with an id never merge as repeats, so folding is the block's doing.
    return svc.store_memory(T, NewMemory(content, id=str(uuid.uuid4()), **kw)).id  # type: ignore[arg-type]


def test_the_block_never_exceeds_its_budget(service: MemoryService) -> None:
    rng = random.Random(7)
    for _ in range(3):
        for _ in range(rng.randint(5, 40)):
            n = rng.choice([3, 8, 20, 120])
            put(service, " ".join(rng.choice(WORDS) for _ in range(n)) + rng.choice([".", "!", ""]))
        for _ in range(15):
            budget = rng.choice([1, 5, 20, 21, 40, 64, 100, 333, 1000, 5000])
            query = " ".join(rng.sample(WORDS, 2))
            b = service.context(T, RecallQuery(query, limit=rng.choice([0, 5, 100]),
                                               reinforce=rng.random() < 0.5), budget)
            recount = service.tokens.count([b.text])[0] if b.text else 0
            assert b.tokens == recount <= budget, (budget, b.text)
            everything = b.included + b.folded + b.omitted
            assert len(everything) == len(set(everything))  # each memory in one list
            if b.text:
                assert b.text.startswith(HEADER) and b.included
            else:
                assert not b.included


def test_grouped_by_zone_dated_repeats_folded_and_what_was_left_out(
    service: MemoryService, clock: ManualClock
) -> None:
    tea = put(service, "Alice drinks green tea every morning", importance=0.9, pinned=True)
    service.rebalance(T)
    clock.advance(86_400 * 3)
    same = put(service, "Alice drinks green tea")  # all its words are the first's: folded
    more = put(service, "Alice drinks green tea every morning at seven")  # says more
    other = put(service, "Bob drinks espresso after lunch")
    fillers = [put(service, f"Alice tea note number {i} about the garden and the roses")
               for i in range(20)]

    b = service.context(T, RecallQuery("what does Alice drink?", reinforce=False), 60)
    assert b.tokens <= 60 and b.omitted, b.text
    lines = b.text.splitlines()
    assert lines[0] == HEADER
    assert lines[1].startswith("## ")
    assert "Alice drinks green tea every morning at seven" in b.text
    assert "- [2023-11-" in b.text  # dated with the memory's creation day
    assert more in b.included and {tea, same} <= set(b.folded)
    assert lines[-1].startswith("(") and "left out to fit 60 tokens" in lines[-1]
    assert set(b.included + b.folded + b.omitted) <= {tea, same, more, other, *fillers}


def test_reinforces_what_the_block_holds_once(service: MemoryService) -> None:
    ids = [put(service, f"The deploy checklist step {i} mentions the Frankfurt server")
           for i in range(6)]
    b = service.context(T, RecallQuery("Frankfurt deploy checklist"), 90)
    assert b.included and b.omitted
    counts = {mid: service.get(T, mid).recall_count for mid in ids}
    assert all(counts[mid] == 1 for mid in b.included)
    assert all(counts[mid] == 0 for mid in b.omitted)
    service.context(T, RecallQuery("Frankfurt deploy checklist", reinforce=False), 90)
    assert all(service.get(T, mid).recall_count == 1 for mid in b.included)


def test_bad_budgets_are_refused(service: MemoryService) -> None:
    for bad in (0, -1, service.settings.max_prompt_tokens + 1):
        with pytest.raises(InvalidArgument, match="max_tokens"):
            service.context(T, RecallQuery("anything"), bad)
    assert service.context(T, RecallQuery("nothing stored"), 100).text == ""


def _through_the_client(client: CelestialClient) -> None:
    m = client.store("Frank's parking spot is B-17 on level two", importance=0.8)
    client.store("The cafeteria closes at three on Fridays")
    ctx = client.context("where does Frank park?", max_tokens=200)
    assert "B-17" in ctx.text and ctx.included_ids[0] == m.id and ctx.tokens <= 200
    assert "tokenizer" in ctx.tokenizer
    assert client.get(m.id).recall_count == 1
    out = call_tool(client, "memory_context", {"query": "Frank parking", "max_tokens": 50})
    assert "B-17" in out.text and out.data["tokens"] <= 50
    assert client.get(m.id).recall_count == 2
    tiny = call_tool(client, "memory_context", {"query": "Frank parking", "max_tokens": 3,
                                                "reinforce": False})
    assert tiny.text.startswith("none of the ") and "fits in 3 tokens" in tiny.text
    assert client.get(m.id).recall_count == 2


async def test_context_through_grpc_and_the_tools(client: CelestialClient) -> None:
    await asyncio.to_thread(_through_the_client, client.with_options(tenant="ctx-grpc"))
