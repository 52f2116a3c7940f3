"""The wire contract other languages build on: safe retries, paging under the message limit,
error details, and JSON that strict parsers accept. Raw stubs, as any gRPC client sees it."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import numpy as np
import pytest
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.clock import ManualClock
from celestial_memory.domain import paging
from celestial_memory.domain.models import IndexVectors, Memory, Sparse, ZoneEvent
from celestial_memory.domain.zones import Zone
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from google.protobuf import json_format
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from tests.integration.conftest import TRANSPORTS, running_server, stub_over

LIMIT = 4 * 1024 * 1024  # the server's and the clients' default message limit
T0 = 1_700_000_000.0


@pytest.fixture
async def server(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> AsyncIterator[MemoryServer]:
    async with running_server(tmp_path, embedder, clock, http_address="127.0.0.1:0") as srv:
        yield srv


@pytest.fixture(params=TRANSPORTS)
async def stub(
    server: MemoryServer, request: pytest.FixtureRequest
) -> AsyncIterator[pb_grpc.MemoryServiceStub]:
    """Each test runs over gRPC and again over Connect JSON, and must see the same contract."""
    async with stub_over(request.param, server) as stub:
        yield stub


def vec(seed: int) -> list[float]:
    v = np.random.default_rng(seed).normal(size=384)
    return (v / np.linalg.norm(v)).tolist()


def details(err: grpc.aio.AioRpcError) -> tuple[str, list[tuple[str, str]], dict[str, str]]:
    """ErrorInfo's reason, BadRequest's (field, description) pairs and ErrorInfo's metadata."""
    status = rpc_status.from_call(err)  # type: ignore[arg-type]
    assert status is not None and status.message == err.details()
    reason, fields, meta = "", [], {}
    for d in status.details:
        if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            d.Unpack(info)
            assert info.domain == "celestial-memory"
            reason, meta = info.reason, dict(info.metadata)
        elif d.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            d.Unpack(bad)
            fields = [(v.field, v.description) for v in bad.field_violations]
    return reason, fields, meta


async def exported(stub: pb_grpc.MemoryServiceStub, tenant: str) -> list[pb.ExportedMemory]:
    return [e async for e in stub.Export(pb.ExportRequest(tenant=tenant))]


# -- retries ---------------------------------------------------------------------------------


async def test_a_retried_store_creates_once_and_changes_nothing(
    stub: pb_grpc.MemoryServiceStub,
) -> None:
    req = pb.StoreRequest(tenant="r", content="the boat is blue", request_id="write-1",
                          tags=["boat"])
    first = await stub.Store(req)
    assert first.created
    await stub.Recall(pb.RecallRequest(tenant="r", query="boat colour"))  # reinforces it
    before = await exported(stub, "r")
    again = await stub.Store(req)  # a retry, after the first answer was lost
    assert not again.created and again.memory.id == first.memory.id
    assert again.memory.recall_count == 1  # not reset
    assert await exported(stub, "r") == before
    # The same key in another tenant is another memory.
    other = await stub.Store(pb.StoreRequest(tenant="s", content="the boat is blue",
                                             request_id="write-1"))
    assert other.created and other.memory.id != first.memory.id


async def test_an_id_is_create_only_unless_upsert(stub: pb_grpc.MemoryServiceStub) -> None:
    mid = str(uuid.uuid4())
    await stub.Store(pb.StoreRequest(tenant="r", content="first words", id=mid, pinned=True))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Store(pb.StoreRequest(tenant="r", content="other words", id=mid))
    assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
    reason, _, meta = details(err.value)
    assert reason == "ALREADY_EXISTS" and meta == {"field": "id"}
    got = await stub.Get(pb.GetRequest(tenant="r", id=mid))
    assert got.memory.content == "first words" and got.memory.pinned
    replaced = await stub.Store(pb.StoreRequest(tenant="r", content="other words", id=mid,
                                                upsert=True))
    assert replaced.created and replaced.memory.content == "other words"
    assert not replaced.memory.pinned
    # Ids are unique across tenants: another tenant's id is refused, and Get does not show it.
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Store(pb.StoreRequest(tenant="q", content="other words", id=mid, upsert=True))
    assert err.value.code() == grpc.StatusCode.ALREADY_EXISTS
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Get(pb.GetRequest(tenant="q", id=mid))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Store(pb.StoreRequest(tenant="r", content="x", id=mid, request_id="k"))
    assert details(err.value)[1] == [("request_id", "may not be given together with id")]


async def test_concurrent_creates_of_one_id_are_decided_once(
    stub: pb_grpc.MemoryServiceStub,
) -> None:
    async def outcome(req: pb.StoreRequest) -> str:
        try:
            reply = await stub.Store(req)
        except grpc.aio.AioRpcError as err:
            return err.code().name
        return f"{'created' if reply.created else 'held'} {reply.memory.id} {reply.memory.content}"

    # Eight retries of one write at once: one creates, the others answer it held.
    same = await asyncio.gather(*[outcome(pb.StoreRequest(
        tenant="c", content="sent eight times", request_id="once")) for _ in range(8)])
    assert sorted(o.split()[0] for o in same) == ["created"] + ["held"] * 7
    assert len({o.split()[1] for o in same}) == 1
    # Eight different contents, or eight tenants, for one id: one is stored, the rest refused.
    mid = str(uuid.uuid4())
    contents = await asyncio.gather(*[outcome(pb.StoreRequest(
        tenant="c", content=f"content {i}", id=mid)) for i in range(8)])
    tenants = await asyncio.gather(*[outcome(pb.StoreRequest(
        tenant=f"t{i}", content="x", id=(other := str(uuid.uuid5(uuid.NAMESPACE_URL, "o"))),
        upsert=i % 2 == 0)) for i in range(8)])
    for outcomes, winner_id in ((contents, mid), (tenants, other)):
        assert sorted(o.split()[0] for o in outcomes) == ["ALREADY_EXISTS"] * 7 + ["created"]
        (winner,) = [o for o in outcomes if o.startswith("created")]
        assert winner.split()[1] == winner_id
    got = await stub.Get(pb.GetRequest(tenant="c", id=mid))
    (won,) = [o for o in contents if o.startswith("created")]
    assert won.endswith(got.memory.content)


async def test_request_ids_of_two_tenants_never_meet(stub: pb_grpc.MemoryServiceStub) -> None:
    a = await stub.Store(pb.StoreRequest(tenant="a", content="x", request_id="x\ny"))
    b = await stub.Store(pb.StoreRequest(tenant="a\nx", content="x", request_id="y"))
    assert a.created and b.created and a.memory.id != b.memory.id


async def test_a_retried_batch_and_import_change_nothing(stub: pb_grpc.MemoryServiceStub) -> None:
    items = [pb.StoreRequest(tenant="b", content=f"note {i}", request_id=f"n{i}", vector=vec(i))
             for i in range(20)]
    first = await stub.StoreBatch(iter(items))
    assert (first.stored, first.existing) == (20, 0)
    await stub.Recall(pb.RecallRequest(tenant="b", query_vector=vec(3), limit=3))
    before = await exported(stub, "b")
    again = await stub.StoreBatch(iter(items))
    assert list(again.ids) == list(first.ids) and (again.stored, again.existing) == (20, 20)
    assert await exported(stub, "b") == before

    dump = [pb.ExportedMemory(memory=e.memory, vector=e.vector, context_vector=e.context_vector,
                              context_score=e.context_score, written_at=e.written_at)
            for e in before]
    for d in dump:  # ids are unique across tenants: a copy for another tenant needs new ones
        d.memory.id = str(uuid.uuid4())
    dump[0].tenant = "c"
    first_import = await stub.Import(iter(dump))
    assert (first_import.imported, first_import.skipped) == (20, 0)
    copied = await exported(stub, "c")
    await stub.Recall(pb.RecallRequest(tenant="c", query_vector=vec(5), limit=2))
    recalled = await exported(stub, "c")
    assert recalled != copied
    second = await stub.Import(iter(dump))  # retried: what is there is left as it is
    assert (second.imported, second.skipped) == (0, 20)
    assert await exported(stub, "c") == recalled
    dump[0].replace = True  # unless the import asks to replace
    assert (await stub.Import(iter(dump))).imported == 20
    assert await exported(stub, "c") == copied


async def test_old_dumps_with_seconds_still_import(stub: pb_grpc.MemoryServiceStub) -> None:
    m = pb.Memory(id=str(uuid.uuid4()), content="from an older server", importance=0.5,
                  zone=pb.ZONE_OUTER)
    old = pb.ExportedMemory(tenant="o", memory=m, vector=vec(1), created_at_s=T0 - 3600.25,
                            last_recalled_at_s=T0 - 60.5, written_at_s=T0 - 60.5)
    assert (await stub.Import(iter([old]))).imported == 1
    (back,) = await exported(stub, "o")
    created, written = back.memory.created_at, back.written_at
    assert (created.seconds, created.nanos) == (int(T0) - 3601, 750_000_000)
    assert (written.seconds, written.nanos) == (int(T0) - 61, 500_000_000)
    assert not back.created_at_s and not back.written_at_s  # no longer sent


# -- paging ----------------------------------------------------------------------------------


MEMORIES = 1_000  # of 30 KB each


async def _pages(call: object, request: object) -> AsyncIterator[object]:
    token = ""
    while True:
        request.page_token = token  # type: ignore[attr-defined]
        page = await call(request)  # type: ignore[operator]
        assert page.ByteSize() < LIMIT
        yield page
        token = page.next_page_token
        if not token:
            return


async def test_paging_goes_through_big_memories_and_event_bursts_once(
    tmp_path: Path, embedder: SentenceTransformerEmbedder,
) -> None:
    clock = ManualClock(T0)
    async with running_server(tmp_path, embedder, clock, http_address="127.0.0.1:0") as server:
        repo = server.service.store
        # 1,000 memories of 30 KB (30 MB, seven times the message limit: a single answer could
        # never hold them, and a page of 1,000 is cut to what fits, so each list takes several
        # pages), written straight to the store in batches; many share a creation time, as one
        # batch does. More memories would only add pages of the same kind (10,000 took minutes).
        text = "x" * 30_000
        ids: list[str] = []
        for b in range(MEMORIES // 500):
            batch = []
            for i in range(500):
                v = np.asarray(vec(b * 500 + i), dtype=np.float32)
                batch.append(Memory(
                    id=str(uuid.uuid4()), tenant="p", content=f"{b}.{i} {text}", zone=Zone.BELT,
                    score=0.0, importance=0.5, recall_count=0, created_at=T0 - (b * 500 + i) // 7,
                    last_recalled_at=T0, vector=v,
                    index=IndexVectors(v, Sparse([], []), Sparse([], []))))
            repo.upsert(batch)
            ids += [m.id for m in batch]
        # 25,000 events of one tenant, in bursts that share one time (one rebalance each).
        repo.append_events([
            ZoneEvent(str(uuid.uuid4()), "p", ids[i % len(ids)], Zone.CORE, Zone.INNER,
                      "capacity", T0 + i // 5000, "h") for i in range(25_000)])

        for transport in TRANSPORTS:
            async with stub_over(transport, server) as stub:
                await _page_through(stub, ids)


async def _page_through(stub: pb_grpc.MemoryServiceStub, ids: list[str]) -> None:
    listed = [m.id async for p in _pages(stub.List, pb.ListRequest(
        tenant="p", page_size=1000)) for m in p.memories]  # type: ignore[attr-defined]
    assert len(listed) == len(set(listed)) == MEMORIES and set(listed) == set(ids)
    assert listed == sorted(listed)
    recent = [m async for p in _pages(stub.Recent, pb.RecentRequest(
        tenant="p", page_size=1000)) for m in p.memories]  # type: ignore[attr-defined]
    assert sorted(m.id for m in recent) == sorted(ids)
    times = [m.created_at.ToNanoseconds() for m in recent]
    assert times == sorted(times, reverse=True)
    events = [e.id async for p in _pages(stub.Ledger, pb.LedgerRequest(
        tenant="p", page_size=1000)) for e in p.events]  # type: ignore[attr-defined]
    assert len(events) == len(set(events)) == 25_000
    # A token belongs to its request.
    first = await stub.List(pb.ListRequest(tenant="p", page_size=5))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.List(pb.ListRequest(tenant="p", page_token=first.next_page_token,
                                       filter=pb.RecallFilter(session_id="s")))
    assert details(err.value)[1][0][0] == "page_token"
    # Nor with another list, nor forged or garbage of any shape.
    deep = base64.urlsafe_b64encode(b"[" * 100_000 + b"]" * 100_000).decode()
    forged = paging.encode(paging.fingerprint(pb.RecentRequest(tenant="p"), "p"),
                           {"memories": (None, str(uuid.uuid4()))})
    for call, req in ((stub.Recent, pb.RecentRequest(
            tenant="p", page_token=first.next_page_token)),
            (stub.Recent, pb.RecentRequest(tenant="p", page_token=deep)),
            (stub.Recent, pb.RecentRequest(tenant="p", page_token=forged)),
            (stub.Ledger, pb.LedgerRequest(tenant="p", page_token="x" * 5000))):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await call(req)  # type: ignore[operator]
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


# -- errors and JSON -------------------------------------------------------------------------


async def test_a_bad_request_carries_its_field(stub: pb_grpc.MemoryServiceStub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Store(pb.StoreRequest(tenant="e", content="  "))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    reason, fields, _ = details(err.value)
    assert reason == "INVALID_ARGUMENT"
    assert fields == [("content", "must not be empty or only white space")]


async def test_stats_and_events_read_as_strict_json(stub: pb_grpc.MemoryServiceStub) -> None:
    stats = await stub.Stats(pb.StatsRequest(tenant="j"))
    text = json_format.MessageToJson(stats)
    # Python's json refuses NaN and infinities when told to, as Go's encoding/json does.
    parsed = json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in {text}"))
    cloud = parsed["zones"][-1]
    assert cloud["zone"] == "ZONE_CLOUD" and "minScore" not in cloud
    assert parsed["zones"][0]["minScore"] == 0.5
    assert parsed["storageBackend"] == "STORAGE_BACKEND_EDGE"
    assert not stats.zones[-1].HasField("min_score")
    rep = await stub.Rebalance(pb.RebalanceRequest(tenant="j", dry_run=True))
    assert rep.duration.ToNanoseconds() == pytest.approx(rep.duration_ms * 1e6, abs=1000)
