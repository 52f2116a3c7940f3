"""The server's limits: message size, stream duration and concurrent calls, each refused with
its own status and nothing written."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from celestial_memory.clock import ManualClock
from celestial_memory.embedding import SentenceTransformerEmbedder

from tests.integration.conftest import running_server


async def _slow(n: int, pause_s: float) -> AsyncIterator[pb.StoreRequest]:
    for i in range(n):
        yield pb.StoreRequest(tenant="t", content=f"note {i}")
        await asyncio.sleep(pause_s)


async def test_limits_are_enforced(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    async with (
        running_server(tmp_path, embedder, clock, max_message_bytes=64 * 1024,
                       max_stream_s=1.0) as srv,
        grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as ch,
    ):
        stub = pb_grpc.MemoryServiceStub(ch)
        with pytest.raises(grpc.aio.AioRpcError) as big:
            await stub.Store(pb.StoreRequest(tenant="t", content="x" * 100_000))
        assert big.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED

        # One item, then a stall past the 1 s limit. Nothing more is written after the server
        # has ended the call (a write racing the end fails in the client as INTERNAL).
        call = stub.StoreBatch()
        await call.write(pb.StoreRequest(tenant="t", content="note 0"))
        await asyncio.sleep(2.0)
        with pytest.raises(grpc.aio.AioRpcError) as slow:
            await call
        assert slow.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert "longer than 1 s" in (slow.value.details() or "")
        assert (await stub.Stats(pb.StatsRequest(tenant="t"))).total == 0


async def test_calls_beyond_the_concurrency_limit_are_refused(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    async with (
        running_server(tmp_path, embedder, clock, max_concurrent_rpcs=1) as srv,
        grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as ch,
    ):
        stub = pb_grpc.MemoryServiceStub(ch)
        held = asyncio.ensure_future(stub.StoreBatch(_slow(4, 0.5)))  # holds the one slot ~2 s
        await asyncio.sleep(0.5)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Stats(pb.StatsRequest(tenant="t"))
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert (await held).stored == 4
        assert (await stub.Stats(pb.StatsRequest(tenant="t"))).total == 4
