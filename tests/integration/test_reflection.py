"""Reflection and the three resolutions through gRPC, on both engines, against a scripted local
model: Reflect refused without a model, a dry run that writes nothing, insights stored with
derived_from relations and found again, entity summaries in profiles, a malformed answer, the
automatic trigger, the CLI, and Context falling back to a memory's summary or triple."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from celestial_client import (
    AsyncCelestialClient,
    CelestialClient,
    FailedPreconditionError,
    InvalidArgumentError,
    UnavailableError,
)
from celestial_client.cli import main
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.reflection.prompt import PROMPT as REFLECT_PROMPT
from celestial_memory.understanding.extraction import PROMPT as EXTRACT_PROMPT

from tests.conftest import open_backend
from tests.scripted_model import ScriptedModel

ALICE, BOB = "name:alice", "name:bob"
STORIES = ["Alice asked about the ethics of lying", "Alice asked whether zoos are ethical",
           "Alice read a book on moral philosophy", "Bob went hiking near Oslo",
           "Bob bought new hiking boots", "Carol plays the cello"]
LONG = ("Alice works at Acme Corporation and leads a team of twelve engineers who build "
        "harbour cranes for ports all along the western coast of Norway. She started there in "
        "2019 after six years at a shipyard in Bergen, and she says the work is the best she "
        "has had, though the winters are long and the commute by ferry takes an hour.")


def scripted(body: dict[str, Any]) -> str:
    """Reflection: a summary and one insight per entity, resting on its first two memories.
    Extraction: the long memory's facts, with a short triple and a one-line summary."""
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    if system.startswith(EXTRACT_PROMPT[:40]):
        n = len(re.findall(r"^\d+\. ", user, re.M))
        return json.dumps({"memories": [{
            "n": i, "entities": [{"name": "Alice", "kind": "person"}],
            "triples": [["Alice", "works_at", "Acme"]],
            "summary": "Alice leads an engineering team at Acme in Norway and likes it there."}
            for i in range(1, n + 1)]})
    groups = re.findall(r"^Entity (\d+): (\S+)$", user, re.M)
    return json.dumps({"entities": [{
        "n": int(n), "summary": f"{ent} comes up often",
        "insights": [{"text": f"{ent} keeps returning to one theme", "sources": [1, 2]},
                     {"text": "a guess with nothing behind it", "sources": [99]}]}
        for n, ent in groups]})


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    m = ScriptedModel(scripted)
    yield m
    m.close()


@asynccontextmanager
async def serving(tmp_path: Path, backend_kind: str, embedder: SentenceTransformerEmbedder,
                  clock: ManualClock, model: ScriptedModel | None,
                  **over: Any) -> AsyncIterator[tuple[MemoryServer, AsyncCelestialClient]]:
    llm = {"llm_base_url": model.url, "llm_model": "scripted", "llm_timeout_s": 5.0} if model \
        else {}
    settings = Settings(data_dir=tmp_path, rebalance_interval_s=0, grace_seconds=1,
                        understand_poll_s=0.05, **{**llm, **over})
    service = build_service(settings, embedder=embedder, clock=clock,
                            store=open_backend(backend_kind, tmp_path))
    srv = MemoryServer(service, "127.0.0.1:0")
    await srv.start()
    try:
        async with AsyncCelestialClient(f"127.0.0.1:{srv.port}", tenant="it") as c:
            yield srv, c
    finally:
        await srv.stop()


async def test_reflect_without_a_model_says_so(
        tmp_path: Path, backend_kind: str, embedder: SentenceTransformerEmbedder,
        clock: ManualClock) -> None:
    async with serving(tmp_path, backend_kind, embedder, clock, None) as (_, c):
        await c.store(STORIES[0])
        with pytest.raises(FailedPreconditionError, match="needs a model"):
            await c.reflect()
        with pytest.raises(FailedPreconditionError):
            await c.reflect(dry_run=False)
        assert len(await c.recent(100)) == 1  # nothing written


async def test_dry_run_then_insights_with_their_sources(
        tmp_path: Path, backend_kind: str, embedder: SentenceTransformerEmbedder,
        clock: ManualClock, model: ScriptedModel) -> None:
    async with serving(tmp_path, backend_kind, embedder, clock, model) as (_, c):
        stored = [await c.store(t, created_at=clock.now() - 600 + 60 * i)
                  for i, t in enumerate(STORIES)]
        assert not model.requests  # storing asks no model without extractor=llm

        dry = await c.reflect()
        assert dry.dry_run and dry.memories_read == 6 and dry.model_calls == 1
        assert dry.model_tokens == 100  # as the scripted endpoint reports
        # Entities of two memories or more, most mentioned first; Carol's one is not enough.
        assert [s.entity for s in dry.summaries] == [ALICE, BOB]
        assert [(i.entity, i.content, i.created) for i in dry.insights] == [
            (ALICE, f"{ALICE} keeps returning to one theme", False),
            (BOB, f"{BOB} keeps returning to one theme", False)]
        # Sources are the entity's newest memories, as numbered for the model; an insight
        # citing a memory it was not given is dropped.
        assert dry.insights[0].source_ids == [stored[2].id, stored[1].id]
        assert len(await c.recent(100)) == 6  # a dry run writes nothing
        sent = model.requests[0]["messages"]
        assert sent[0]["content"].startswith(REFLECT_PROMPT[:60])
        assert f"Entity 1: {ALICE}" in sent[1]["content"]
        assert "[3]" in sent[1]["content"] and "Carol" not in sent[1]["content"]

        done = await c.reflect(dry_run=False)
        assert [i.created for i in done.insights] == [True, True]
        assert [i.id for i in done.insights] == [i.id for i in dry.insights]
        insight = await c.get(done.insights[0].id)
        assert "insight" in insight.tags
        assert insight.metadata == {"celestial_kind": "insight", "celestial_about": ALICE}
        derived = {(r.id, r.made_by, r.outgoing) for r in insight.relations
                   if r.relation == "derived_from"}
        assert derived == {(stored[2].id, "derived", True), (stored[1].id, "derived", True)}
        source = await c.get(stored[1].id)
        assert (insight.id, "derived_from", False) in {
            (r.id, r.relation, r.outgoing) for r in source.relations}
        profile = await c.entity(ALICE)
        assert profile.summary == f"{ALICE} comes up often"
        assert profile.summary_id == done.summaries[0].id
        summary = await c.get(profile.summary_id)
        assert {"insight", "entity-summary"} <= set(summary.tags)
        assert {r.id for r in summary.relations if r.relation == "derived_from"} == {
            m.id for m in stored[:3]}
        # Insights are memories like any other: recall finds them.
        hits = await c.recall("what theme does alice return to", limit=3, reinforce=False,
                              min_relevance=0.0)
        assert insight.id in [h.memory.id for h in hits]

        # Again: insights are not read back as memories, nor stored twice; the summary is
        # written again in its place.
        again = await c.reflect(dry_run=False)
        assert again.memories_read == 6 and [i.created for i in again.insights] == [False, False]
        assert len(await c.recent(100)) == 6 + 2 + 2
        assert len(await c.recent(100, tags_any=["insight"])) == 4

        # Only the entities asked for.
        only = await c.reflect(entities=[BOB])
        assert [s.entity for s in only.summaries] == [BOB]
        with pytest.raises(InvalidArgumentError, match="entities"):
            await c.reflect(entities=["nokind"])
        with pytest.raises(InvalidArgumentError, match="window"):
            await c.reflect(window=100_000)

        # Erasing a memory erases what was derived from it: Alice's insight and summary rest
        # on stored[1]; Bob's do not.
        assert await c.delete(stored[1].id)
        left = {m.id for m in await c.recent(100, tags_any=["insight"])}
        assert left == {done.insights[1].id, done.summaries[1].id}
        assert (await c.entity(ALICE)).summary == ""
        assert (await c.entity(BOB)).summary == f"{BOB} comes up often"


async def test_a_malformed_answer_writes_nothing(
        tmp_path: Path, backend_kind: str, embedder: SentenceTransformerEmbedder,
        clock: ManualClock, model: ScriptedModel) -> None:
    async with serving(tmp_path, backend_kind, embedder, clock, model) as (_, c):
        for t in STORIES:
            await c.store(t)
        model.answer = lambda body: "Alice likes ethics, I think."
        with pytest.raises(UnavailableError, match="not JSON"):
            await c.reflect(dry_run=False)
        model.status = 500
        with pytest.raises(UnavailableError, match="HTTP 500"):
            await c.reflect(dry_run=False)
        assert len(await c.recent(100)) == 6


async def test_the_automatic_trigger_reflects_after_n_new_memories(
        tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock,
        model: ScriptedModel) -> None:
    async with serving(tmp_path, "edge", embedder, clock, model, reflect_after=4) as (srv, c):
        for t in STORIES[:3]:
            await c.store(t)
        await asyncio.sleep(0.3)  # several turns of the loop: 3 of 4 is not enough
        assert not model.requests
        await c.store(STORIES[3])
        for _ in range(600):  # the loop runs off the request path: wait for its write
            if await c.recent(10, tags_any=["insight"]):
                break
            await asyncio.sleep(0.1)
        insights = await c.recent(10, tags_any=["insight"])
        assert {m.metadata["celestial_about"] for m in insights} == {ALICE}
        trigger = srv.service.reflection.trigger
        for _ in range(600):  # the count starts again once the reflection has ended
            if not trigger.due():
                break
            await asyncio.sleep(0.1)
        assert trigger.due() == {}
        assert len(model.requests) == 1
        [op] = (await c.list_operations()).items
        assert op.automatic and op.done and op.error is None


async def test_context_shows_the_shortest_form_that_fits(
        tmp_path: Path, backend_kind: str, embedder: SentenceTransformerEmbedder,
        clock: ManualClock, model: ScriptedModel) -> None:
    async with serving(tmp_path, backend_kind, embedder, clock, model,
                       extractor="llm") as (srv, c):
        m = await c.store(LONG)
        # By rules at store time: the first sentence (cut at a word past 160 characters), and
        # a triple read from it, its object cut.
        assert m.summary == LONG[:LONG.index(".") + 1]
        assert m.triples == [("Alice", "works_at", "Acme Corporation and leads a team of "
                                                   "twelve engineers who build harbour cranes…")]
        queue = srv.service.understanding
        assert queue is not None
        await asyncio.to_thread(queue.run_once)  # the server's loop may have done it already
        held = await c.get(m.id)
        assert held.summary.startswith("Alice leads an engineering team at Acme")
        assert held.triples == [("Alice", "works_at", "Acme")]

        seen: list[list[str]] = []
        for budget in range(8, 140, 4):
            ctx = await c.context("where does Alice work", budget, reinforce=False,
                                  min_relevance=0.0)
            assert ctx.tokens <= budget
            assert len(ctx.included_resolutions) == len(ctx.included_ids)
            if ctx.included_ids:
                form = ctx.included_resolutions[0]
                marker = {"full": LONG[:40], "summary": "(summary) Alice leads",
                          "triple": "(fact) Alice works at Acme"}[form]
                assert marker in ctx.text
            seen.append(ctx.included_resolutions)
        # As the budget grows: nothing, then the triple, then the summary, then the text.
        order = [f for f, _ in itertools_groupby(s[0] if s else "" for s in seen)]
        assert order == ["", "triple", "summary", "full"]


def itertools_groupby(values: Any) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for v in values:
        if out and out[-1][0] == v:
            out[-1] = (v, out[-1][1] + 1)
        else:
            out.append((v, 1))
    return out


async def test_the_cli_and_the_blocking_client(
        tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock,
        model: ScriptedModel, capsys: pytest.CaptureFixture[str]) -> None:
    async with serving(tmp_path, "qdrant-local", embedder, clock, model) as (srv, c):
        for t in STORIES:
            await c.store(t)
        argv = ["--target", f"127.0.0.1:{srv.port}", "--tenant", "it", "reflect"]
        assert await asyncio.to_thread(main, argv) == 0
        out = capsys.readouterr().out
        assert "read 6 memories; 1 model calls, 100 tokens; would write 2 insights" in out
        assert f"{ALICE} keeps returning to one theme" in out and "dry run" in out
        assert await asyncio.to_thread(main, [*argv, "--apply", "--entity", BOB, "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)  # ReflectResponse, as Reflect answers it
        assert [(i["entity"], i["created"]) for i in doc["insights"]] == [(BOB, True)]
        assert doc["summaries"][0]["summary"] == f"{BOB} comes up often"
        with CelestialClient(f"127.0.0.1:{srv.port}", tenant="it") as blocking:
            again = await asyncio.to_thread(blocking.reflect, False, 0, [BOB])
            profile = await asyncio.to_thread(blocking.entity, BOB)
        assert [i.created for i in again.insights] == [False]
        assert profile.summary == f"{BOB} comes up often"
        # The model failing is the server's refusal (exit 1), sent once: never retried, and no
        # hint that the server could not be reached.
        model.answer = lambda body: "no insights today"
        asked = len(model.requests)
        assert await asyncio.to_thread(main, argv) == 1
        err = capsys.readouterr().err
        assert "the model failed to reflect" in err and "--target" not in err
        assert len(model.requests) == asked + 1
    async with serving(tmp_path / "bare", "edge", embedder, clock, None) as (srv, _):
        code = await asyncio.to_thread(main, ["--target", f"127.0.0.1:{srv.port}", "reflect"])
        assert code == 1 and "FAILED_PRECONDITION" in capsys.readouterr().err


async def test_topics_are_the_tags_callers_give(
        tmp_path: Path, backend_kind: str, embedder: SentenceTransformerEmbedder,
        clock: ManualClock, model: ScriptedModel) -> None:
    async with serving(tmp_path, backend_kind, embedder, clock, model) as (_, c):
        # No entity is shared; two memories share a tag (a topic), a third has its own.
        a = await c.store("the train was late again this morning", tags=["commute"])
        b = await c.store("took the bike because the bus was full", tags=["commute"])
        await c.store("the tomatoes need more sun", tags=["garden"])
        dry = await c.reflect()
        assert [s.entity for s in dry.summaries] == ["tag:commute"]
        assert sorted(dry.insights[0].source_ids) == sorted([a.id, b.id])
        asked = await c.reflect(entities=["tag:garden"], dry_run=False)
        assert [s.entity for s in asked.summaries] == ["tag:garden"]
        written = await c.get(asked.insights[0].id)
        assert written.memory_type == "insight" and written.metadata["celestial_about"] == "tag:garden"
        # Reflect's own tags are no topic: a second reflection does not reflect on "insight".
        again = await c.reflect()
        assert all(not s.entity.startswith("tag:insight") for s in again.summaries)
