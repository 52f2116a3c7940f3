"""Bad input is INVALID_ARGUMENT naming the field; a missing id is NOT_FOUND; a rejected request
writes nothing. Requests go through the raw stub so that anything a caller could send is sent."""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from celestial_client import CelestialClient, InvalidArgumentError, NotFoundError
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from celestial_memory.api.grpc.server import MemoryServer

T = "val"


@pytest.fixture
async def stub(server: MemoryServer) -> AsyncIterator[pb_grpc.MemoryServiceStub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as ch:
        yield pb_grpc.MemoryServiceStub(ch)


async def total(stub: pb_grpc.MemoryServiceStub) -> int:
    return int((await stub.Stats(pb.StatsRequest(tenant=T))).total)


async def expect(call: object, code: grpc.StatusCode, field: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await call  # type: ignore[misc]
    assert exc.value.code() == code, exc.value.details()
    assert field in (exc.value.details() or ""), exc.value.details()


STORE_CASES = [
    (pb.StoreRequest(tenant=T, content=""), "content"),
    (pb.StoreRequest(tenant=T, content="   \n\t "), "content"),
    (pb.StoreRequest(tenant=T, content="x", importance=1.5), "importance"),
    (pb.StoreRequest(tenant=T, content="x", importance=-0.1), "importance"),
    (pb.StoreRequest(tenant=T, content="x", importance=math.nan), "importance"),
    (pb.StoreRequest(tenant=T, content="x", vector=[0.1] * 10), "vector"),
    (pb.StoreRequest(tenant=T, content="x", vector=[math.nan] * 384), "vector"),
    (pb.StoreRequest(tenant=T, content="x", id="not-a-uuid"), "id"),
    (pb.StoreRequest(tenant=T, content="x", tags=["ok", " "]), "tags"),
    (pb.StoreRequest(tenant=T, content="x", metadata={"a.b": "1"}), "metadata"),
    (pb.StoreRequest(tenant=T, content="x" * 40_000), "content"),
]


@pytest.mark.parametrize(("request_", "field"), STORE_CASES)
async def test_bad_store_is_rejected_and_writes_nothing(
    stub: pb_grpc.MemoryServiceStub, request_: pb.StoreRequest, field: str
) -> None:
    await expect(stub.Store(request_), grpc.StatusCode.INVALID_ARGUMENT, field)
    assert await total(stub) == 0


async def test_one_bad_item_rejects_the_whole_batch(stub: pb_grpc.MemoryServiceStub) -> None:
    async def items() -> AsyncIterator[pb.StoreRequest]:
        yield pb.StoreRequest(tenant=T, content="fine one")
        yield pb.StoreRequest(tenant=T, content="fine two")
        yield pb.StoreRequest(tenant=T, content=" ")

    await expect(stub.StoreBatch(items()), grpc.StatusCode.INVALID_ARGUMENT, "requests[2].content")
    assert await total(stub) == 0


RECALL_CASES = [
    (pb.RecallRequest(tenant=T, query=""), "query"),
    (pb.RecallRequest(tenant=T, query="  "), "query"),
    (pb.RecallRequest(tenant=T, query="x", limit=101), "limit"),
    (pb.RecallRequest(tenant=T, query="x", filter=pb.RecallFilter(zones=[0])), "filter.zones"),
    (pb.RecallRequest(tenant=T, query="x", filter=pb.RecallFilter(zones=[9])), "filter.zones"),
    (pb.RecallRequest(tenant=T, query="x", filter=pb.RecallFilter(min_importance=2)),
     "filter.min_importance"),
    (pb.RecallRequest(tenant=T, query="x", min_relevance=math.nan), "min_relevance"),
    (pb.RecallRequest(tenant=T, query_vector=[1.0, 2.0]), "query_vector"),
]


@pytest.mark.parametrize(("request_", "field"), RECALL_CASES)
async def test_bad_recall_is_rejected_and_writes_nothing(
    stub: pb_grpc.MemoryServiceStub, request_: pb.RecallRequest, field: str
) -> None:
    m = (await stub.Store(pb.StoreRequest(tenant=T, content="x marks the spot"))).memory
    await expect(stub.Recall(request_), grpc.StatusCode.INVALID_ARGUMENT, field)
    after = (await stub.Get(pb.GetRequest(tenant=T, id=m.id))).memory
    assert after.recall_count == 0 and after.last_recalled_at == m.last_recalled_at


async def test_limit_zero_means_the_default(stub: pb_grpc.MemoryServiceStub) -> None:
    resp = await stub.Recall(pb.RecallRequest(tenant=T, query="anything", limit=0))
    assert len(resp.results) == 0


async def test_malformed_ids_are_invalid_everywhere(stub: pb_grpc.MemoryServiceStub) -> None:
    await expect(stub.Get(pb.GetRequest(tenant=T, id="12")), grpc.StatusCode.INVALID_ARGUMENT, "id")
    await expect(stub.Delete(pb.DeleteRequest(tenant=T, id="")), grpc.StatusCode.INVALID_ARGUMENT,
                 "id")
    await expect(stub.Update(pb.UpdateRequest(tenant=T, id="zz", importance=0.5)),
                 grpc.StatusCode.INVALID_ARGUMENT, "id")


async def test_missing_ids_are_not_found(stub: pb_grpc.MemoryServiceStub) -> None:
    missing = str(uuid.uuid4())
    await expect(stub.Get(pb.GetRequest(tenant=T, id=missing)), grpc.StatusCode.NOT_FOUND, missing)
    await expect(stub.Update(pb.UpdateRequest(tenant=T, id=missing, importance=0.5)),
                 grpc.StatusCode.NOT_FOUND, missing)
    assert (await stub.Delete(pb.DeleteRequest(tenant=T, id=missing))).deleted is False


async def test_bad_update_changes_nothing(stub: pb_grpc.MemoryServiceStub) -> None:
    m = (await stub.Store(pb.StoreRequest(tenant=T, content="keep me", importance=0.3))).memory
    bad = [
        (pb.UpdateRequest(tenant=T, id=m.id, importance=3, tags=pb.StringList(values=["n"])),
         "importance"),
        (pb.UpdateRequest(tenant=T, id=m.id, content=" ", importance=0.9), "content"),
        (pb.UpdateRequest(tenant=T, id=m.id, vector=[0.1] * 384), "vector"),
    ]
    for req, field in bad:
        await expect(stub.Update(req), grpc.StatusCode.INVALID_ARGUMENT, field)
    after = (await stub.Get(pb.GetRequest(tenant=T, id=m.id))).memory
    assert (after.content, after.importance, list(after.tags)) == ("keep me", 0.3, [])


async def test_delete_by_filter_refuses_an_empty_filter(stub: pb_grpc.MemoryServiceStub) -> None:
    await stub.Store(pb.StoreRequest(tenant=T, content="stays", session_id="s"))
    await expect(stub.DeleteByFilter(pb.DeleteByFilterRequest(tenant=T)),
                 grpc.StatusCode.INVALID_ARGUMENT, "filter")
    assert await total(stub) == 1
    resp = await stub.DeleteByFilter(
        pb.DeleteByFilterRequest(tenant=T, filter=pb.RecallFilter(session_id="s"))
    )
    assert resp.deleted == 1 and await total(stub) == 0


async def test_export_and_import_refuse_bad_input_and_write_nothing(
    stub: pb_grpc.MemoryServiceStub,
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        async for _ in stub.Export(pb.ExportRequest(tenant=T, after_id="nope")):
            pass
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "after_id" in (exc.value.details() or "")
    good = pb.ExportedMemory(
        memory=pb.Memory(id=str(uuid.uuid4()), content="fine", zone=pb.ZONE_OUTER, importance=0.5),
        vector=[0.1] * 384, tenant=T,
    )
    cases = [
        (pb.Memory(id="not-a-uuid", content="x", zone=pb.ZONE_OUTER), [0.1] * 384, "memory.id"),
        (pb.Memory(id=str(uuid.uuid4()), content=" ", zone=pb.ZONE_OUTER), [0.1] * 384,
         "memory.content"),
        (pb.Memory(id=str(uuid.uuid4()), content="x", zone=pb.ZONE_OUTER), [0.1] * 3, "vector"),
        (pb.Memory(id=str(uuid.uuid4()), content="x", zone=pb.ZONE_UNSPECIFIED), [0.1] * 384,
         "zone"),
    ]
    for memory, vector, field in cases:
        bad = pb.ExportedMemory(memory=memory, vector=vector, tenant=T)

        async def stream(bad: pb.ExportedMemory = bad) -> AsyncIterator[pb.ExportedMemory]:
            yield good
            yield bad

        await expect(stub.Import(stream()), grpc.StatusCode.INVALID_ARGUMENT, field)
    assert await total(stub) == 0  # one bad memory rejects its whole batch


async def test_a_rejected_import_names_the_record_and_keeps_the_batches_before_it(
    stub: pb_grpc.MemoryServiceStub,
) -> None:
    def record(i: int) -> pb.ExportedMemory:
        content = " " if i == 550 else f"memory {i}"  # record 550 is bad
        return pb.ExportedMemory(
            memory=pb.Memory(id=str(uuid.UUID(int=i + 1)), content=content, zone=pb.ZONE_OUTER,
                             importance=0.5),
            vector=[0.1] * 383 + [float(i + 1)], tenant=T)

    async def stream() -> AsyncIterator[pb.ExportedMemory]:
        for i in range(600):
            yield record(i)

    await expect(stub.Import(stream()), grpc.StatusCode.INVALID_ARGUMENT, "memories[550]")
    assert await total(stub) == 512  # the first batch of 512, as the contract says


@pytest.mark.parametrize("method", ["Get", "Store", "Recall", "Stats"])
async def test_undecodable_bytes_answer_invalid_argument(
    server: MemoryServer, method: str, caplog: pytest.LogCaptureFixture
) -> None:
    async with grpc.aio.insecure_channel(f"localhost:{server.port}") as channel:
        call = channel.unary_unary(f"/celestial.v1.MemoryService/{method}")
        with pytest.raises(grpc.aio.AioRpcError) as exc:
            await call(b"\xff\xff\xff\xff")
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "Traceback" not in caplog.text


@pytest.mark.parametrize("method", ["StoreBatch", "Import"])
async def test_undecodable_stream_items_answer_invalid_argument(
    server: MemoryServer, method: str
) -> None:
    async with grpc.aio.insecure_channel(f"localhost:{server.port}") as channel:
        call = channel.stream_unary(f"/celestial.v1.MemoryService/{method}")

        async def items() -> AsyncIterator[bytes]:
            yield b"\xff\xff\xff\xff"

        with pytest.raises(grpc.aio.AioRpcError) as exc:
            await call(items())
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "protobuf" in (exc.value.details() or "")


async def test_undecodable_bytes_to_a_server_stream_answer_invalid_argument(
    server: MemoryServer,
) -> None:
    async with grpc.aio.insecure_channel(f"localhost:{server.port}") as channel:
        call = channel.unary_stream("/celestial.v1.MemoryService/Export")
        with pytest.raises(grpc.aio.AioRpcError) as exc:
            async for _ in call(b"\xff\xff\xff\xff"):
                pass
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def test_a_huge_store_batch_is_refused_at_its_first_bad_item(
    stub: pb_grpc.MemoryServiceStub,
) -> None:
    """300 items with a 3.5 MB session id each once took the server from 3 to 8 GB: now the
    first item is refused, and this process (server and client) grows by less than 200 MiB."""
    huge = "s" * 3_500_000
    sent = 0

    async def items() -> AsyncIterator[pb.StoreRequest]:
        nonlocal sent
        for i in range(300):
            sent += 1
            yield pb.StoreRequest(tenant=T, content="x", session_id=huge)
            if i == 0:
                # Let the server's answer arrive: a write racing a finished call fails on the
                # client side as INTERNAL ("Internal error from Core"), hiding the server's code.
                await asyncio.sleep(0.3)

    before = _rss_mib()
    await expect(stub.StoreBatch(items()), grpc.StatusCode.INVALID_ARGUMENT,
                 "requests[0].session_id")
    assert _rss_mib() - before < 200
    assert sent < 300  # the stream was not read to its end
    assert await total(stub) == 0


async def test_errors_carry_google_rpc_details_to_the_python_client(
    client: CelestialClient,
) -> None:
    def calls() -> None:
        with pytest.raises(InvalidArgumentError) as bad:
            client.store("the boat is blue", importance=2.0)
        assert bad.value.field == "importance" and bad.value.reason == "INVALID_ARGUMENT"
        assert bad.value.violations[0].description.startswith("must be")
        assert bad.value.details.startswith("importance:")  # the readable message stays
        with pytest.raises(NotFoundError) as missing:
            client.get("00000000-0000-4000-8000-000000000000")
        assert missing.value.reason == "NOT_FOUND" and missing.value.field is None

    await asyncio.to_thread(calls)
