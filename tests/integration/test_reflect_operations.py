"""Reflection as a long-running operation, against a scripted model that stalls for as long as
the test holds it: a client with a short deadline starts one and gets it back at once; polling
and watching see its progress and its end; a cancel ends it and its late answer writes nothing;
another tenant cannot see it; the list pages; the tenant's model budget, shared with the
extraction queue, ends one with RESOURCE_EXHAUSTED; the Connect port serves the new calls; a
tenant keeps its last ended operations for a week, and every running one; and a lease renewed as
its operation is cancelled leaves the ended record its week."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from celestial_client import (
    InvalidArgumentError,
    NotFoundError,
    Operation,
    ResourceExhaustedError,
)
from celestial_client.cli import main
from celestial_client.v1 import memory_pb2 as pb
from celestial_memory.clock import ManualClock
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.reflection.operations import KEEP_S, LEASE_S, MAX_ENDED
from celestial_memory.store.engine import LEDGER
from celestial_memory.store.operations_store import ENDED
from celestial_memory.store.payload import Ids

from tests.integration.conftest import stub_over
from tests.integration.test_reflection import ALICE, BOB, STORIES, scripted, serving
from tests.scripted_model import ScriptedModel

STAGES = ["queued", "reading", "asking_model", "writing", "done"]


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    m = ScriptedModel(scripted)
    yield m
    m.close()


async def until(ready: Callable[[], bool], what: str) -> None:
    """Wait for what runs off the request path (a bound, not a timing claim)."""
    for _ in range(2400):
        if ready():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}")


async def test_a_stalled_reflection_is_started_polled_watched_and_cancelled(
        tmp_path: Path, backend_kind: str, embedder: SentenceTransformerEmbedder,
        clock: ManualClock, model: ScriptedModel) -> None:
    async with serving(tmp_path, backend_kind, embedder, clock, model) as (srv, c):
        for t in [*STORIES, "Dave fixed the fence", "Dave painted the fence"]:
            await c.store(t)
        model.hold()  # every model call stalls until released
        quick = c.with_options(timeout=3.0)  # far shorter than the stalled call
        op = await quick.start_reflection(dry_run=False, entities=[ALICE, BOB])
        assert op.name.startswith("operations/") and op.kind == "reflection" and not op.done
        await until(lambda: len(model.requests) == 1, "the model call")
        seen = await quick.get_operation(op.name)
        assert (seen.stage, seen.done, seen.memories_read, seen.planned_model_calls,
                seen.model_calls) == ("asking_model", False, 8, 1, 0)

        watched: list[Operation] = []

        async def watch() -> None:
            async for o in c.watch_operation(op.name):
                watched.append(o)

        task = asyncio.create_task(watch())
        await until(lambda: bool(watched), "the watch's first message")
        model.release()
        await task
        last = watched[-1]
        assert last.done and last.error is None and last.ended_at is not None
        assert (last.model_calls, last.model_tokens) == (1, 100)
        assert last.result is not None
        assert [s.entity for s in last.result.summaries] == [ALICE, BOB]
        assert [i.created for i in last.result.insights] == [True, True]
        stages = [STAGES.index(o.stage) for o in watched]
        assert stages == sorted(stages) and stages[0] == STAGES.index("asking_model")
        assert len(await c.recent(100, tags_any=["insight"])) == 4  # two insights, two summaries
        kept = await c.get_operation(op.name)  # as the store keeps it
        assert (kept.done, kept.result, kept.model_calls) == (True, last.result, 1)

        other = c.with_options(tenant="someone-else")
        for call in (other.get_operation, other.cancel_operation):
            with pytest.raises(NotFoundError):
                await call(op.name)
        with pytest.raises(NotFoundError):
            await c.get_operation("operations/not-one")

        # A cancel ends it at once; the stalled answer, when it comes, is dropped.
        model.hold()
        clock.advance(1)  # the list is newest first
        second = await quick.start_reflection(dry_run=False, entities=["name:dave"])
        await until(lambda: len(model.requests) == 2, "the second model call")
        cancelled = await quick.cancel_operation(second.name)
        assert cancelled.done and cancelled.cancel_requested and cancelled.result is None
        assert cancelled.error is not None and cancelled.error.code == "CANCELLED"
        model.release()
        await until(lambda: srv.service.reflection.peek("it", second.name) is None,
                    "the cancelled reflection's worker")
        assert (await c.get_operation(second.name)).error == cancelled.error
        assert len(await c.recent(100, tags_any=["insight"])) == 4  # nothing about Dave
        again = await c.cancel_operation(op.name)  # done: as it was
        assert again.error is None and not again.cancel_requested

        listed, token = [], ""
        for _ in range(3):  # a page at a time: the last may be empty ("more may follow")
            page = await c.list_operations(page_size=1, page_token=token)
            listed += [o.name for o in page.items]
            if not (token := page.next_page_token):
                break
        assert listed == [second.name, op.name] and not token


async def test_a_start_is_refused_at_once_when_it_cannot_run(
        tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock,
        model: ScriptedModel) -> None:
    async with serving(tmp_path, "edge", embedder, clock, None) as (_, c):
        with pytest.raises(Exception, match="needs a model"):
            await c.start_reflection()
    async with serving(tmp_path / "m", "edge", embedder, clock, model) as (_, c):
        with pytest.raises(Exception, match="window"):
            await c.start_reflection(window=100_000)
        # The same request id, the same operation: a retried start starts one reflection.
        a = await c.start_reflection(request_id="once")
        b = await c.start_reflection(request_id="once")
        assert a.name == b.name and (await c.list_operations()).items[0].name == a.name
        assert len((await c.list_operations()).items) == 1


async def test_the_model_budget_is_the_extraction_queues(
        tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock,
        model: ScriptedModel) -> None:
    # Two calls a minute for the tenant: the queue's one, then one reflection; the clock
    # stands still, so the minute never ends.
    async with serving(tmp_path, "edge", embedder, clock, model, extractor="llm",
                       understand_calls_per_minute=2, http_address="127.0.0.1:0") as (srv, c):
        await c.store_batch(STORIES)  # one write: the queue asks about them in one call
        queue = srv.service.understanding
        assert queue is not None
        await until(lambda: queue.waiting() == 0, "the extraction queue")
        assert len(model.requests) == 1
        assert (await c.reflect()).model_calls == 1
        asked = len(model.requests)
        with pytest.raises(ResourceExhaustedError) as refused:
            await c.reflect()
        assert refused.value.reason == "MODEL_BUDGET" and (refused.value.retry_after or 0) > 0
        started = await c.start_reflection()
        op = [o async for o in c.watch_operation(started.name)][-1]
        assert op.error is not None and op.error.code == "RESOURCE_EXHAUSTED"
        assert op.model_calls == 0 and len(model.requests) == asked  # no call was made

        # The Connect port serves the operations too, the watch's stream included.
        async with stub_over("connect", srv) as stub:
            got = await stub.GetOperation(pb.GetOperationRequest(tenant="it", name=op.name))
            assert got.operation.error.reason == "MODEL_BUDGET"
            watched = [w async for w in stub.WatchOperation(
                pb.WatchOperationRequest(tenant="it", name=op.name))]
            assert [w.operation.done for w in watched] == [True]
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.Reflect(pb.ReflectRequest(tenant="it"))
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_the_cli_follows_a_reflection_and_its_operations(
        tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock,
        model: ScriptedModel, capsys: pytest.CaptureFixture[str]) -> None:
    async with serving(tmp_path, "edge", embedder, clock, model) as (srv, c):
        for t in STORIES:
            await c.store(t)
        base = ["--target", f"127.0.0.1:{srv.port}", "--tenant", "it"]
        assert await asyncio.to_thread(main, [*base, "reflect", "--apply"]) == 0
        out, err = capsys.readouterr()
        assert "wrote 2 insights and 2 entity summaries" in out
        assert ": asking model" in err or ": done" in err  # progress, on stderr
        assert err.rstrip().endswith("1/1 model calls, 100 tokens")

        assert await asyncio.to_thread(main, [*base, "reflect", "--no-wait", "--json"]) == 0
        started = json.loads(capsys.readouterr().out)["operation"]  # StartReflectionResponse
        name = started["name"]
        assert name.startswith("operations/") and started["metadata"]["request"]["dryRun"]
        assert await asyncio.to_thread(main, [*base, "operation", "watch", name, "--json"]) == 0
        watched = json.loads(capsys.readouterr().out)["operation"]
        assert watched["done"] and watched["response"]["modelCalls"] == 1
        assert await asyncio.to_thread(main, [*base, "operation", "get", name]) == 0
        assert f"{name}  reflection  done" in capsys.readouterr().out
        assert await asyncio.to_thread(main, [*base, "operation", "cancel", name, "--json"]) == 0
        assert "error" not in json.loads(capsys.readouterr().out)["operation"]  # done: kept
        assert await asyncio.to_thread(main, [*base, "operation", "list", "--json"]) == 0
        assert len(json.loads(capsys.readouterr().out)["operations"]) == 2
        assert await asyncio.to_thread(main, [*base, "operation", "get",
                                              "operations/00000000-0000-4000-8000-000000000000"]) == 3
        assert "NOT_FOUND" in capsys.readouterr().err


async def test_names_places_request_ids_and_a_stop_under_a_stalled_model(
        tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock,
        model: ScriptedModel) -> None:
    async with serving(tmp_path, "edge", embedder, clock, model, llm_timeout_s=120) as (srv, c):
        for t in STORIES:
            await c.store(t)
        model.hold()  # both workers stall in a model call; the rest queue
        started = [await c.start_reflection(dry_run=False) for _ in range(4)]
        with pytest.raises(ResourceExhaustedError):  # a tenant's four at once
            await c.start_reflection()
        # Another spelling of a name's UUID names no operation, for every call alike.
        other_spelling = "operations/" + started[0].name.removeprefix("operations/").upper()
        for call in (c.get_operation, c.cancel_operation):
            with pytest.raises(NotFoundError):
                await call(other_spelling)
        assert not (await c.get_operation(started[0].name)).done
        # A cancelled one gives its place back at once, its worker busy or not.
        assert (await c.cancel_operation(started[3].name)).done
        await c.start_reflection()
        # A request id names one request: asked again for another reflection, it is refused.
        b = c.with_options(tenant="b")
        first = await b.start_reflection(request_id="r1")
        assert (await b.start_reflection(request_id="r1")).name == first.name
        with pytest.raises(InvalidArgumentError, match="request_id"):
            await b.start_reflection(request_id="r1", dry_run=False)
        with pytest.raises(InvalidArgumentError, match="request_id"):
            await b.start_reflection(request_id="x" * 300)
        # A caller that gives up on reflect() stops its reflection (as Reflect's caller does).
        waiting = asyncio.create_task(c.with_options(tenant="w").reflect(dry_run=False))
        await until(lambda: any(v.op.tenant == "w" for v in
                                list(srv.service.reflection._live.values())),
                    "the waiting caller's reflection")
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        gone = (await c.with_options(tenant="w").list_operations()).items
        assert [o.error.code if o.error else None for o in gone] == ["CANCELLED"]
        # A stop ends what runs without waiting for the stalled calls (120 s each).
        await until(lambda: len(model.requests) == 2, "the two workers' model calls")
        reflection = srv.service.reflection
        await asyncio.to_thread(reflection.close)
        assert all(t.is_alive() for t in reflection._workers)  # still in their model calls
        ended = [await c.get_operation(o.name) for o in started]
        assert all(o.done and o.error for o in ended)
        assert [o.error.code for o in ended if o.error] == ["ABORTED"] * 3 + ["CANCELLED"]
        assert {o.error.reason for o in ended[:3] if o.error} == {"INTERRUPTED"}
        model.release()


async def test_a_tenant_keeps_its_last_ended_operations_for_a_week_and_every_running_one(
        tmp_path: Path, backend_kind: str, embedder: SentenceTransformerEmbedder,
        clock: ManualClock, model: ScriptedModel) -> None:
    async with serving(tmp_path, backend_kind, embedder, clock, model,
                       llm_timeout_s=3600) as (_, c):
        for t in STORIES:
            await c.store(t)
        b = c.with_options(tenant="b")
        other = await b.cancel_operation((await b.start_reflection()).name)
        model.hold()  # the first reflection stays in its model call until the end
        running = await c.start_reflection()
        await until(lambda: len(model.requests) >= 1, "the running reflection's model call")
        ended: list[str] = []
        for _ in range(MAX_ENDED + 25):  # starts and cancels, each ending after the last
            clock.advance(1)
            op = await c.start_reflection()
            ended.append((await c.cancel_operation(op.name)).name)

        listed: list[str] = []
        token = ""
        while True:
            page = await c.list_operations(page_size=50, page_token=token)
            listed += [o.name for o in page.items]
            if not (token := page.next_page_token):
                break
        assert listed == [*reversed(ended[-MAX_ENDED:]), running.name]  # newest first
        for name in ended[:25]:  # those that ended first went
            with pytest.raises(NotFoundError):
                await c.get_operation(name)
        assert not (await c.get_operation(running.name)).done
        assert (await b.get_operation(other.name)).done  # another tenant's are its own

        # A week after they ended, the rest go too; the running one stays.
        clock.advance(KEEP_S + 1)

        async def gone(name: str) -> bool:
            try:
                await c.get_operation(name)
            except NotFoundError:
                return True
            return False

        for _ in range(2400):  # the upkeep loop removes them (a bound, not a timing claim)
            if await gone(ended[-1]):
                break
            await asyncio.sleep(0.05)
        assert [await gone(name) for name in ended] == [True] * len(ended)
        assert not (await c.get_operation(running.name)).done
        assert [o.name for o in (await c.list_operations()).items] == [running.name]
        model.release()


class _Apart:
    """The ledger's engine with a renewal's match and its write apart, as edge_engine.py does
    them, and ``between`` run in the gap."""

    def __init__(self, engine: Any, between: Callable[[list[str]], None]) -> None:
        self._engine, self._between = engine, between

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)

    def set_payloads(self, part: str, updates: list[tuple[str, Any]], where: list[Any]) -> None:
        ids = [i for i, _ in updates]
        found, _ = self._engine.scroll(part, [*where, Ids(tuple(ids))], len(ids), payload=False)
        matching = {r.id for r in found}
        self._between(ids)
        self._engine.set_payloads(part, [u for u in updates if u[0] in matching], [])


async def test_a_lease_renewed_as_its_operation_is_cancelled_leaves_the_end_its_week(
        tmp_path: Path, backend_kind: str, embedder: SentenceTransformerEmbedder,
        clock: ManualClock, model: ScriptedModel) -> None:
    # A cancel between a renewal's match and its write must find the renewal done, or wait for
    # it: written after the end, the lease would be the ended record's expiry, and it would go
    # first among the tenant's ended (MAX_ENDED), and within the hour.
    async with serving(tmp_path, backend_kind, embedder, clock, model,
                       llm_timeout_s=3600) as (srv, c):
        for t in STORIES:
            await c.store(t)
        model.hold()
        op = await c.start_reflection()
        await until(lambda: len(model.requests) >= 1, "the reflection's model call")
        reflection, records = srv.service.reflection, srv.service.store.operations
        op_id = op.name.removeprefix("operations/")
        cancelled = threading.Event()

        def cancel() -> None:
            reflection.cancel("it", op.name)
            cancelled.set()

        def between(ids: list[str]) -> None:
            if op_id in ids and not cancelled.is_set():
                threading.Thread(target=cancel, daemon=True).start()
                cancelled.wait(1.0)  # at once if nothing holds the operation meanwhile

        records.engine = _Apart(records.engine, between)
        clock.advance(LEASE_S)  # the next upkeep turn renews
        await until(cancelled.is_set, "the cancel")
        ended = await c.get_operation(op.name)
        assert ended.done and ended.error is not None and ended.error.code == "CANCELLED"
        payload = records.engine.retrieve(LEDGER, [op_id])[0].payload
        assert payload["holder"] == ENDED
        assert payload["expires_at"] == payload["operation"]["ended_at"] + KEEP_S
        model.release()


async def test_a_watch_reports_a_change_made_just_after_its_first_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A watch counts changes from the state its first answer was read at: a stage reached
    between that read and the watch's next look is still sent (on a loaded machine a watch
    otherwise went from reading to done and never showed asking_model)."""
    from types import SimpleNamespace

    from celestial_memory.api.grpc import reflect_rpcs
    from celestial_memory.api.grpc.servicer import MemoryServicer
    from celestial_memory.domain.operations import Operation, ReflectionAsked, Stage

    def at(stage: Stage) -> Operation:
        return Operation("operations/x", "t", ReflectionAsked(), 0.0, 0.0, stage=stage)

    # Read by the watch's first answer at change 1; already asking the model (2) at its next
    # look, then done (3).
    looks = iter([(at(Stage.ASKING_MODEL), 2), (at(Stage.DONE), 3)])
    ops = SimpleNamespace(peek=lambda tenant, name: next(looks))
    servicer = MemoryServicer.__new__(MemoryServicer)
    servicer._service = SimpleNamespace(reflection=ops)  # type: ignore[assignment]
    monkeypatch.setattr(reflect_rpcs, "WATCH_POLL_S", 0)
    sent = [op.stage async for op in servicer._changes(None, "t", at(Stage.READING), 1)]
    assert sent == [Stage.ASKING_MODEL, Stage.DONE]
