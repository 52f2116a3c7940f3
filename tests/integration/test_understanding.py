"""Model-backed understanding against a scripted local model: the queue a Store fills in the
same write, the prompt and its parsing, malformed answers, failures, stalls, the per-tenant
budget, a restart that resumes the queue, and what the model found being searchable."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from celestial_client import AsyncCelestialClient, CelestialClient
from celestial_client.cli.output import show_memory
from celestial_client.connection import RetryPolicy
from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.domain.models import MemoryFilter
from celestial_memory.domain.requests import NewMemory, RecallQuery
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.memory.service import MemoryService
from celestial_memory.store.engine import MEMORIES
from celestial_memory.understanding.chat import ModelError
from celestial_memory.understanding.extraction import PROMPT, Triple, parse

from tests.conftest import open_backend
from tests.integration.conftest import running_server
from tests.scripted_model import ScriptedModel

T = "u"
T0 = 1_700_000_000.0


def facts(body: dict[str, Any]) -> str:
    """A model that knows one thing about each memory: its first word is a person who
    ``said`` the rest, and "Oslo" is a place wherever it appears."""
    memories = re.findall(r"^(\d+)\. (\S+) (.*)$", body["messages"][1]["content"], re.M)
    out = []
    for n, first, rest in memories:
        ents = [{"name": first, "kind": "person"}]
        if "Oslo" in rest:
            ents.append({"name": "Oslo", "kind": "place"})
        out.append({"n": int(n), "entities": ents, "triples": [[first, "said", rest[:40]]]})
    return json.dumps({"memories": out})


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    m = ScriptedModel(facts)
    yield m
    m.close()


def _service(tmp_path: Path, backend_kind: str, embedder: SentenceTransformerEmbedder,
             model: ScriptedModel, clock: ManualClock, **over: Any) -> MemoryService:
    settings = Settings(data_dir=tmp_path, rebalance_interval_s=0, extractor="llm",
                        llm_base_url=model.url, llm_model="scripted", llm_timeout_s=1.0,
                        **over)
    return build_service(settings, embedder=embedder, clock=clock,
                         store=open_backend(backend_kind, tmp_path))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def svc(tmp_path: Path, backend_kind: str, embedder: SentenceTransformerEmbedder,
        model: ScriptedModel, clock: ManualClock) -> Iterator[MemoryService]:
    s = _service(tmp_path, backend_kind, embedder, model, clock, understand_batch=4)
    yield s
    s.close()


def _queue(s: MemoryService) -> Any:
    assert s.understanding is not None
    return s.understanding


def test_parse_reads_only_what_was_asked() -> None:
    good = json.dumps({"memories": [
        {"n": 2, "entities": [{"name": "  Bob  Smith ", "kind": "person"},
                              {"name": "bob smith", "kind": "person"}],
         "triples": [["Bob", "Works At", "Acme"], ["x", "y"]]},
        {"n": 1, "entities": [{"name": "Seoul", "kind": "location"}, {"kind": "date"}]}]})
    one, two = parse(good, 2)
    assert [(e.name, e.key, e.kind) for e in one.entities] == [("Seoul", "seoul", "place")]
    assert [(e.name, e.key) for e in two.entities] == [("Bob Smith", "bob smith")]
    assert two.triples == [Triple("Bob", "works_at", "Acme")]
    assert parse("```json\n" + good + "\n```", 2)[0].entities == one.entities
    for bad in ("I found some entities!", '{"facts": []}', '{"memories": [{"n": 1}]}',
                '{"memories": [{"n": 1}, {"n": 1}]}', '{"memories": [{"n": 1}, {"n": 3}]}',
                # the wrong shapes (a memory's text may talk the model into them)
                '{"memories": [{"n": 1, "triples": 5}, {"n": 2}]}',
                '{"memories": [{"n": 1, "facts": "hi!"}, {"n": 2}]}',
                '{"memories": [{"n": 1, "entities": {"a": 1}}, {"n": 2}]}',
                '{"memories": [{"n": 1, "summary": 7}, {"n": 2}]}',
                '{"memories": [{"n": true}, {"n": 2}]}'):
        with pytest.raises(ModelError):
            parse(bad, 2)
    # A "fact" that only repeats its memory is not one.
    [same] = parse('{"memories": [{"n": 1, "facts": ["quentin owns a red bicycle!", '
                   '"Quentin rides to work."]}]}', 1, ["Quentin owns a red bicycle"])
    assert same.facts == ["Quentin rides to work."]


def test_a_store_queues_and_the_queue_understands_each_memory_once(
        svc: MemoryService, model: ScriptedModel) -> None:
    texts = ["Alice moved to Oslo last spring", "Bob adopted a cat", "Carol likes jazz",
             "Dan plays chess", "Erin visited Oslo"]
    stored = svc.store_many(T, [NewMemory(t) for t in texts])
    assert not model.requests  # the Store never waits on the model
    queue = _queue(svc)
    assert queue.waiting(T) == 5 and queue.waiting("another") == 0
    done = queue.run_once()
    assert done.understood == 5 and len(model.requests) == 2  # batches of 4
    first = model.requests[0]
    assert first["model"] == "scripted" and first["messages"][0]["content"] == PROMPT
    sent = [line.split(". ", 1) for r in model.requests
            for line in r["messages"][1]["content"].splitlines()]
    assert [n for n, _ in sent] == ["1", "2", "3", "4", "1"]  # numbered within each call
    assert sorted(t for _, t in sent) == sorted(texts)
    got = svc.store.get(T, [m.id for m in stored])
    alice = got[stored[0].id]
    assert alice.triples == [("Alice", "said", "moved to Oslo last spring")]
    assert "name:alice" in alice.entities and "name:oslo" in alice.entities
    assert alice.understand_due is None and alice.understand_tries == 1
    assert queue.waiting() == 0 and queue.run_once().understood == 0
    assert len(model.requests) == 2  # nothing asked twice
    # What the model found is indexed: "memories mentioning Oslo" is one filter.
    hits = svc.recall(T, RecallQuery("where did people go", limit=10, reinforce=False,
                                     min_relevance=0.0,
                                     filter=MemoryFilter(entities_any=["name:oslo"])))
    assert {r.memory.id for r in hits} == {stored[0].id, stored[4].id}


def test_a_malformed_answer_is_retried_with_backoff(
        svc: MemoryService, model: ScriptedModel, clock: ManualClock) -> None:
    model.answer = lambda body: "Sure! Here are the entities: Alice."
    [m] = svc.store_many(T, [NewMemory("Alice moved to Oslo")])
    queue = _queue(svc)
    assert queue.run_once().retried == 1
    held = svc.store.get_one(T, m.id)
    assert held.understand_tries == 1 and held.understand_due == T0 + 10.0  # the backoff
    assert queue.run_once().retried == 0 and len(model.requests) == 1  # not due yet
    model.answer = facts
    clock.advance(10.0)
    assert queue.run_once().understood == 1
    assert svc.store.get_one(T, m.id).triples == [("Alice", "said", "moved to Oslo")]


@pytest.mark.parametrize("failure", ["500", "stall"])
def test_failures_are_given_up_after_the_last_try_with_the_error_kept(
        tmp_path: Path, backend_kind: str, embedder: SentenceTransformerEmbedder,
        model: ScriptedModel, clock: ManualClock, failure: str) -> None:
    if failure == "500":
        model.status = 500
    else:
        model.stall_s = 30.0  # a model that hangs: far past llm_timeout_s (1 s)
    s = _service(tmp_path, backend_kind, embedder, model, clock, understand_max_tries=2)
    try:
        [m] = s.store_many(T, [NewMemory("Alice moved to Oslo")])
        queue = _queue(s)
        assert queue.run_once().retried == 1
        clock.advance(3600.0)
        assert queue.run_once().given_up == 1
        held = s.store.get_one(T, m.id)
        assert held.understand_due is None and held.understand_tries == 2
        assert ("HTTP 500" if failure == "500" else "no answer within") in held.understand_error
        assert queue.waiting() == 0 and held.content == "Alice moved to Oslo"  # kept, as stored
    finally:
        s.close()


def test_the_budget_holds_under_a_burst_and_other_tenants_go_on(
        tmp_path: Path, backend_kind: str, embedder: SentenceTransformerEmbedder,
        model: ScriptedModel, clock: ManualClock) -> None:
    s = _service(tmp_path, backend_kind, embedder, model, clock, understand_batch=10,
                 understand_calls_per_minute=3)
    try:
        for start in range(0, 1000, 250):
            s.store_many(T, [NewMemory(f"Person{i} mentioned item {i}", vector=None)
                             for i in range(start, start + 250)])
        s.store_many("other", [NewMemory("Zed lives in Oslo")])
        queue = _queue(s)
        first = queue.run_once()
        # One pass: 3 calls for the burst's tenant (its minute), and the other tenant's own.
        assert len(model.requests) == 4 and first.understood == 31 and first.over_budget == 970
        assert queue.run_once().understood == 0 and len(model.requests) == 4
        clock.advance(61.0)
        assert queue.run_once().understood == 30 and len(model.requests) == 7
        assert queue.waiting(T) == 1000 - 60
    finally:
        s.close()


def test_the_queue_survives_a_restart(
        tmp_path: Path, embedder: SentenceTransformerEmbedder, model: ScriptedModel,
        clock: ManualClock) -> None:
    s = _service(tmp_path, "edge", embedder, model, clock)
    ids = [m.id for m in s.store_many(T, [NewMemory("Alice moved to Oslo"),
                                          NewMemory("Bob adopted a cat")])]
    s.close()  # stopped before the model was asked
    again = _service(tmp_path, "edge", embedder, model, clock)
    try:
        assert _queue(again).waiting() == 2
        assert _queue(again).run_once().understood == 2
        assert all(m.triples for m in again.store.get(T, ids).values())
    finally:
        again.close()


def test_rules_need_no_model_and_queue_nothing(service: MemoryService) -> None:
    [m] = service.store_many(T, [NewMemory("Alice moved to Oslo")])
    assert service.understanding is None
    held = service.store.get_one(T, m.id)
    assert held.understand_due is None and "name:alice" in held.entities


def test_llm_extraction_needs_an_endpoint_and_a_model(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="CELESTIAL_LLM_BASE_URL"):
        Settings(data_dir=tmp_path, extractor="llm")


async def test_through_grpc_a_memory_says_what_the_model_read_and_export_carries_it(
        tmp_path: Path, embedder: SentenceTransformerEmbedder, model: ScriptedModel,
        clock: ManualClock) -> None:
    async with running_server(tmp_path / "a", embedder, clock, extractor="llm",
                              llm_base_url=model.url, llm_model="scripted",
                              understand_poll_s=0.05) as srv, \
            AsyncCelestialClient(f"127.0.0.1:{srv.port}", tenant=T) as c:
        m = await c.store("Alice moved to Oslo")
        assert m.understanding == "waiting"  # the Store did not wait (its triples are the rules')
        for _ in range(400):  # the server's queue runs in the background
            got = await c.get(m.id)
            if got.understanding != "waiting":
                break
            await asyncio.sleep(0.05)
        assert got.understanding == "done"
        assert got.triples == [("Alice", "said", "moved to Oslo")]
        assert "name:oslo" in got.entities
        shown = show_memory(got).splitlines()  # what `celestial get` prints
        assert "facts        Alice | said | moved to Oslo" in shown and "model        done" in shown
        exported = [e async for e in c.export()]
    async with running_server(tmp_path / "b", embedder, clock) as srv, \
            AsyncCelestialClient(f"127.0.0.1:{srv.port}", tenant=T) as c:
        await c.import_memories(exported)
        back = await c.get(m.id)
        assert back.triples == got.triples and back.entities == got.entities
        assert back.understanding == ""  # this server asked no model about it


def test_the_models_facts_become_fact_memories_linked_to_their_source_once(
        svc: MemoryService, model: ScriptedModel) -> None:
    def with_facts(body: dict[str, Any]) -> str:
        answer = json.loads(facts(body))
        for entry in answer["memories"]:
            name = entry["entities"][0]["name"]
            entry["facts"] = [f"{name} lives in Oslo.", f"{name} said something."]
        return json.dumps(answer)

    model.answer = with_facts
    [a, b] = svc.store_many(T, [NewMemory("Alice moved to Oslo"),
                                NewMemory("Alice mentioned the fjords")])
    queue = _queue(svc)
    assert queue.run_once().understood == 2
    mine = [m for page in svc.store.export_pages(T) for m in page]
    kept = {m.content: m for m in mine if m.memory_type == "fact"}
    # Two sources said "Alice lives in Oslo.": one fact memory (the repeat merged), related to
    # both; the facts were not queued for the model themselves.
    assert set(kept) == {"Alice lives in Oslo.", "Alice said something."}
    oslo = kept["Alice lives in Oslo."]
    assert {(e.other, e.relation, e.made_by, e.outgoing) for e in oslo.edges} == {
        (a.id, "extracted_from", "derived", True), (b.id, "extracted_from", "derived", True)}
    assert all(m.understand_due is None and m.understand_tries == 0 for m in kept.values())
    assert queue.waiting() == 0
    # A crash between the facts and the sources' write asks again: nothing is doubled.
    svc.store.engine.set_payload(MEMORIES, {"understand_due": T0}, ids=[a.id])
    assert queue.run_once().understood == 1
    again = [m for page in svc.store.export_pages(T) for m in page if m.memory_type == "fact"]
    assert sorted(m.content for m in again) == sorted(kept)
    assert len(svc.store.get_one(T, a.id).edges) == len(
        [e for e in svc.store.get_one(T, a.id).edges if e.relation == "extracted_from"]) == 2
    # Erasing a source erases what was extracted from it: a fact may say what it said.
    assert svc.delete(T, a.id)
    left = [m for page in svc.store.export_pages(T) for m in page]
    assert [m.id for m in left] == [b.id]


def test_a_poisoned_answer_is_a_failed_try_and_other_tenants_go_on(
        svc: MemoryService, model: ScriptedModel) -> None:
    def poisoned(body: dict[str, Any]) -> str:
        if "POISON" in body["messages"][1]["content"]:
            return '{"memories": [{"n": 1, "triples": 5}]}'
        return facts(body)

    model.answer = poisoned
    [bad] = svc.store_many("aaa", [NewMemory("POISON pill from Mallory")])
    [good] = svc.store_many("zzz", [NewMemory("Nina plays the cello on Sundays")])
    done = _queue(svc).run_once()
    assert done.retried == 1 and done.understood == 1
    assert svc.store.get_one("aaa", bad.id).understand_tries == 1
    assert svc.store.get_one("zzz", good.id).understand_due is None


def test_the_clients_never_retry_a_vote_a_reflection_or_a_turn() -> None:
    config = json.loads(RetryPolicy().service_config())["methodConfig"]
    retried = [c for c in config if "retryPolicy" in c]
    assert [n.get("method") for c in retried for n in c["name"]] == [None]  # the whole service
    plain = [n["method"] for c in config if "retryPolicy" not in c for n in c["name"]]
    assert plain == ["Feedback", "Reflect", "Observe"]  # a method's own entry wins
    with CelestialClient("127.0.0.1:9", tenant=T) as c, pytest.raises(TypeError):
        c.feedback("00000000-0000-4000-8000-000000000001", "no")  # type: ignore[arg-type]
