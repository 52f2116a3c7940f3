"""The server's limits: message size, stream duration and concurrent calls, each refused with
its own status and nothing written."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from celestial.v1 import memory_pb2 as pb
from celestial.v1 import memory_pb2_grpc as pb_grpc
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

        with pytest.raises(grpc.aio.AioRpcError) as slow:  # 5 items over 2.5 s, limit 1 s
            await stub.StoreBatch(_slow(5, 0.5))
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
