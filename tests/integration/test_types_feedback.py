"""Memory types, immutable memories and feedback on both engines, through gRPC and the Python
client: types stored, returned and filtered (an untyped memory from before types reads and
filters as an episode), protection against Update, upsert, repeats, consolidation, forgetting
and an Import replace, and Feedback moving importance with a ledger event per vote."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from celestial_client import AsyncCelestialClient, StoreItem
from celestial_client.cli import main
from celestial_client.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
)
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.domain.requests import NewMemory
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.errors import PermissionDenied
from celestial_memory.memory.service import MemoryService
from celestial_memory.store import repository
from celestial_memory.understanding.feedback import moved

from tests.conftest import open_backend

DAY = 86_400.0


class Served:
    def __init__(self, service: MemoryService, server: MemoryServer) -> None:
        self.service = service
        self.server = server
        self.target = f"127.0.0.1:{server.port}"


@pytest.fixture
async def served(
    tmp_path: Path, backend_kind: str, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> AsyncIterator[Served]:
    settings = Settings(data_dir=tmp_path, rebalance_interval_s=0, grace_seconds=1)
    service = build_service(settings, embedder=embedder, clock=clock,
                            store=open_backend(backend_kind, tmp_path))
    server = MemoryServer(service, "127.0.0.1:0")
    await server.start()
    try:
        yield Served(service, server)
    finally:
        await server.stop()


@pytest.fixture
async def client(served: Served) -> AsyncIterator[AsyncCelestialClient]:
    async with AsyncCelestialClient(served.target, tenant="u") as c:
        yield c


async def status_of(served: Served, method: str, request: Any) -> grpc.StatusCode:
    async with grpc.aio.insecure_channel(served.target) as ch:
        try:
            await getattr(pb_grpc.MemoryServiceStub(ch), method)(request)
        except grpc.aio.AioRpcError as err:
            return err.code()
    return grpc.StatusCode.OK


def untyped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Writes from here on leave out the type and the flag, as a server from before them."""
    written = repository.to_payload

    def old(m: Any) -> dict[str, Any]:
        p = written(m)
        p.pop("memory_type"), p.pop("immutable")
        return p

    monkeypatch.setattr(repository, "to_payload", old)


async def test_types_are_stored_returned_and_filtered(
    served: Served, client: AsyncCelestialClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    fact = await client.store("Alice works at Acme in Seoul", memory_type="fact")
    pref = await client.store("Alice prefers green tea to coffee", memory_type="preference")
    plain = await client.store("We talked with Alice about her trip to Busan")
    [triple_id] = await client.store_batch([
        StoreItem("Alice | works at | Acme", memory_type="triple")])
    assert (fact.memory_type, pref.memory_type, plain.memory_type) == (
        "fact", "preference", "episode")
    assert (await client.get(triple_id)).memory_type == "triple"
    with monkeypatch.context() as m:
        untyped(m)
        old = served.service.store_memory("u", NewMemory("Alice once lived in Busan near the sea"))
    got = await client.get(old.id)
    assert got.memory_type == "episode" and not got.immutable

    async def recalled(*types: str) -> set[str]:
        found = await client.recall("Alice", limit=10, reinforce=False, min_relevance=0.0,
                                    memory_types=list(types))
        return {r.memory.id for r in found}

    assert await recalled("fact") == {fact.id}
    assert await recalled("fact", "preference") == {fact.id, pref.id}
    # An episode filter also finds the memory stored before types (it has no type field).
    assert await recalled("episode") == {plain.id, old.id}
    assert await recalled("insight") == set()
    assert await recalled() == {fact.id, pref.id, plain.id, old.id, triple_id}
    listed = {m.id async for m in client.iter_memories(memory_types=["episode", "triple"])}
    assert listed == {plain.id, old.id, triple_id}
    assert [m.id for m in await client.recent(5, memory_types=["preference"])] == [pref.id]
    # Unknown or unset types are refused, naming the field.
    for bad in ([0], [99]):
        req = pb.RecallRequest(tenant="u", query="Alice",
                               filter=pb.RecallFilter(memory_types=bad))
        assert await status_of(served, "Recall", req) == grpc.StatusCode.INVALID_ARGUMENT
    assert await status_of(served, "Store", pb.StoreRequest(
        tenant="u", content="x", memory_type=42)) == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(ValueError):
        await client.store("y", memory_type="rumour")
    # Export and Import keep the type and the flag.
    kept = await client.store("The safe code is with the notary", memory_type="fact",
                              immutable=True)
    dump = [r async for r in client.export()]
    assert await client.delete(kept.id) and await client.delete(triple_id)
    assert (await client.import_memories(dump)).imported == 2  # the two deleted come back
    copied = await client.get(kept.id)
    assert copied.memory_type == "fact" and copied.immutable
    assert (await client.get(triple_id)).memory_type == "triple"


async def test_an_immutable_memory_is_not_updated_replaced_or_merged_into(
    served: Served, client: AsyncCelestialClient
) -> None:
    mid = "00000000-0000-4000-8000-00000000c0de"
    kept = await client.store("The lease ends on 31 March 2027", id=mid, immutable=True,
                              memory_type="fact")
    assert kept.immutable
    with pytest.raises(FailedPreconditionError) as err:
        await client.update(mid, content="The lease ends on 30 April 2027")
    assert err.value.reason == "IMMUTABLE"
    with pytest.raises(FailedPreconditionError):
        await client.update(mid, pinned=True)
    with pytest.raises(FailedPreconditionError):
        await client.store("The lease ends in April", id=mid, upsert=True)
    # A repeat is stored beside it, not merged into it.
    again = await client.store("The lease ends on 31 March 2027")
    assert again.id != mid and not again.immutable
    assert (await client.get(mid)).merged == []
    # An immutable repeat of an ordinary memory is stored as given too.
    plain = await client.store("Bob keeps the spare key under the mat")
    sealed = await client.store("Bob keeps the spare key under the mat", immutable=True)
    assert sealed.id != plain.id and sealed.immutable
    # Consolidation leaves immutable memories alone: each pair of repeats has an immutable
    # member, so nothing merges.
    assert (await client.consolidate(dry_run=False)).merges == []
    assert (await client.get(mid)).content == "The lease ends on 31 March 2027"
    # An Import that replaces skips it.
    dump = [r async for r in client.export()]
    result = await client.import_memories(dump, replace=True)
    immutable = sum(1 for r in dump if r.memory.immutable)
    assert (result.imported, result.skipped) == (len(dump) - immutable, immutable)
    # Without keys the caller is the admin: the right to erasure stays.
    assert await client.delete(mid)


async def test_forgetting_passes_immutable_memories_by(
    served: Served, client: AsyncCelestialClient, clock: ManualClock
) -> None:
    kept = await client.store("Grandma's recipe uses three eggs", importance=0.1, immutable=True)
    loose = await client.store("The bus was late on Monday", importance=0.1)
    clock.advance(200 * DAY)
    report = await client.rebalance()
    assert report.forgotten == 1
    assert not (await client.get(kept.id)).archived
    assert (await client.get(loose.id)).archived
    # An archived memory takes no feedback: restore it first.
    with pytest.raises(FailedPreconditionError):
        await client.feedback(loose.id, helpful=True)


async def test_a_vote_on_a_skipped_turn_judges_the_skip_and_leaves_it_archived(
    served: Served, client: AsyncCelestialClient, clock: ManualClock
) -> None:
    skipped = await client.observe("hey", session_id="s")
    assert skipped.decision.action == "SKIP" and skipped.memory is not None
    assert skipped.memory.archived
    mid = skipped.memory.id
    before = (await client.policy()).reward_by_rule
    clock.advance(60)  # events of one time are read in id order
    # Not helpful: the skip was right, the one reward a correct SKIP gets through the API.
    voted = await client.feedback(mid, helpful=False)
    assert voted.archived
    assert voted.importance == pytest.approx(moved(skipped.memory.importance, False, 0.2))
    after = (await client.policy()).reward_by_rule
    rule = next(k for k in after if after[k] != before.get(k, 0.0))
    assert after[rule] - before.get(rule, 0.0) == pytest.approx(0.5)
    assert [e.reason for e in await client.ledger(memory_id=mid)] == ["skipped", "not_helpful"]
    assert (await client.get(mid)).archived and (await client.stats()).archived == 1
    # Helpful: the skip was wrong, and the decision's credit moves back the other way.
    again = await client.feedback(mid, helpful=True)
    assert again.archived and again.importance == pytest.approx(moved(voted.importance, True, 0.2))
    assert (await client.policy()).reward_by_rule[rule] == pytest.approx(before.get(rule, 0.0))
    # Restored, it is a live memory: its votes are a live memory's, its decision's not again.
    await client.restore(mid)
    live = await client.feedback(mid, helpful=True)
    assert not live.archived


async def test_feedback_moves_importance_re_places_and_is_in_the_ledger(
    served: Served, client: AsyncCelestialClient
) -> None:
    m = await client.store("Carol's flight lands at 7 pm on Friday", importance=0.3)
    [hit] = await client.recall("when does Carol land", limit=1)
    assert hit.memory.id == m.id
    step = served.service.settings.feedback_step
    up = await client.feedback(m.id, helpful=True)
    assert up.importance == pytest.approx(moved(0.3, True, step))
    down = await client.feedback(m.id, helpful=False)
    assert down.importance == pytest.approx(moved(moved(0.3, True, step), False, step))
    assert 0.3 < down.importance < up.importance  # one vote each way nearly cancels
    zones = [up.zone.rank, down.zone.rank]
    for _ in range(12):
        last = await client.feedback(m.id, helpful=True)
    assert 0.95 < last.importance < 1.0  # toward 1, never past it
    assert last.zone.rank <= min(zones)
    events = [e for e in await client.ledger(memory_id=m.id)]
    # Every vote is counted (the manual clock gives them one time, so their order is by id).
    votes = Counter(e.reason for e in events if e.reason in ("helpful", "not_helpful"))
    assert votes == {"helpful": 13, "not_helpful": 1}
    assert last.zone in {e.to_zone for e in events if e.reason == "helpful"}
    # Bad calls.
    with pytest.raises(NotFoundError):
        await client.feedback("00000000-0000-4000-8000-000000000404", helpful=True)
    with pytest.raises(InvalidArgumentError):
        await client.feedback("not-a-uuid", helpful=False)
    assert await status_of(served, "Feedback", pb.FeedbackRequest(
        tenant="u", id=m.id)) == grpc.StatusCode.INVALID_ARGUMENT
    assert await status_of(served, "Feedback", pb.FeedbackRequest(
        tenant="u", id=m.id, verdict=7)) == grpc.StatusCode.INVALID_ARGUMENT


async def test_cli_feedback(
    served: Served, client: AsyncCelestialClient, capsys: pytest.CaptureFixture[str]
) -> None:
    m = await client.store("Dave's train leaves from platform 4", importance=0.5,
                           memory_type="fact")

    async def cli(*argv: str) -> tuple[int, str, str]:
        code = await asyncio.to_thread(main, ["--target", served.target, "--tenant", "u", *argv])
        out = capsys.readouterr()
        return code, out.out, out.err

    code, out, _ = await cli("feedback", m.id, "--helpful")
    assert code == 0 and out.startswith("helpful: importance now 0.60")
    assert "type         fact   immutable False" in out
    code, out, _ = await cli("feedback", m.id, "--not-helpful", "--json")
    doc = json.loads(out)
    assert code == 0 and list(doc) == ["memory", "importanceBefore"]  # FeedbackResponse's
    assert doc["memory"]["importance"] == pytest.approx(0.6 * 0.8)
    assert doc["importanceBefore"] == pytest.approx(0.6)
    code, _, err = await cli("feedback", "00000000-0000-4000-8000-000000000404", "--helpful")
    assert code == 3 and "NOT_FOUND" in err  # exit 3: not found
    with pytest.raises(SystemExit):  # a verdict is required
        await cli("feedback", m.id)


async def test_delete_by_type_and_a_write_key_cannot_erase_protection(
    served: Served, client: AsyncCelestialClient
) -> None:
    svc = served.service
    kept = await client.store("The deed names both owners", immutable=True)
    insight = await client.store("Bob tends to forget keys", memory_type="insight")
    plain = await client.store("Bob lost his keys on Monday")
    # As a write key's Delete reaches the service (the servicer passes the caller's role).
    with pytest.raises(PermissionDenied):
        await asyncio.to_thread(svc.delete, "u", kept.id, False)
    assert await asyncio.to_thread(svc.delete, "u", plain.id, False)
    assert (await client.get(kept.id)).immutable
    # DeleteByFilter (admin) by type: only the insight goes.
    async with grpc.aio.insecure_channel(served.target) as ch:
        gone = await pb_grpc.MemoryServiceStub(ch).DeleteByFilter(pb.DeleteByFilterRequest(
            tenant="u", filter=pb.RecallFilter(memory_types=[pb.MEMORY_TYPE_INSIGHT])))
    assert gone.deleted == 1
    with pytest.raises(NotFoundError):
        await client.get(insight.id)
    assert [e.reason for e in await client.ledger(memory_id=insight.id)] == ["deleted"]
