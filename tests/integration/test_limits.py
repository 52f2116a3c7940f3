"""The server's limits: message size, stream duration and idleness, streams per caller,
concurrent calls (which health checks never count against) and one server per port, each refused
with its own status and nothing written."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.errors import FailedPrecondition
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.integration.conftest import running_server
from tests.rss import peak_rss_growth


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
        while srv.calls.running < 1:  # the stream has its slot (no guess at how long it takes)
            await asyncio.sleep(0.01)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Stats(pb.StatsRequest(tenant="t"))
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert (await held).stored == 4
        assert (await stub.Stats(pb.StatsRequest(tenant="t"))).total == 4


async def _health(port: int) -> int:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
        out = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(),
                                                         timeout=60)
        return int(out.status)


async def _open_streams(srv: MemoryServer, stub: pb_grpc.MemoryServiceStub, n: int) -> list[Any]:
    """``n`` StoreBatch streams that sent one item each, once the server runs them all."""
    held = []
    for i in range(n):
        call = stub.StoreBatch()
        await call.write(pb.StoreRequest(tenant="t", content=f"left open {i}"))
        held.append(call)
    while srv.calls.running < n:
        assert not [c for c in held if c.done()], "a stream was refused"
        await asyncio.sleep(0.01)
    return held


async def test_streams_left_open_and_idle_neither_hold_the_server_nor_its_health(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    """Callers open StoreBatch streams, send one item and never close them: a caller holds at
    most its share of streams, the server's probes still answer, and a stream that sends
    nothing for ``stream_idle_s`` ends, writing nothing."""
    async with (
        running_server(tmp_path, embedder, clock, max_concurrent_rpcs=4,
                       max_streams_per_caller=3, max_open_streams=4, stream_idle_s=1.0) as srv,
        grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as ch,
    ):
        stub = pb_grpc.MemoryServiceStub(ch)
        held = await _open_streams(srv, stub, 3)
        extra = stub.StoreBatch()
        await extra.write(pb.StoreRequest(tenant="t", content="one too many"))
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await extra
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "streams are open already" in (refused.value.details() or "")
        assert await _health(srv.port) == health_pb2.HealthCheckResponse.SERVING
        for call in held:  # each ends by itself once idle for 1 s
            with pytest.raises(grpc.aio.AioRpcError) as idle:
                await call
            assert idle.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
            assert "sent nothing for 1 s" in (idle.value.details() or "")
        assert (await stub.Stats(pb.StatsRequest(tenant="t"))).total == 0
        assert (await stub.StoreBatch(_slow(2, 0.0))).stored == 2  # the slots are free again


async def test_health_answers_on_the_main_port_when_every_call_slot_is_taken(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    async with (
        running_server(tmp_path, embedder, clock, max_concurrent_rpcs=4,
                       max_streams_per_caller=100, max_open_streams=4) as srv,
        grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as ch,
    ):
        stub = pb_grpc.MemoryServiceStub(ch)
        held = await _open_streams(srv, stub, 4)
        with pytest.raises(grpc.aio.AioRpcError) as busy:
            await stub.Stats(pb.StatsRequest(tenant="t"))
        assert busy.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert await _health(srv.port) == health_pb2.HealthCheckResponse.SERVING
        for call in held:
            await call.done_writing()
        assert sum([(await call).stored for call in held]) == 4


async def test_hundreds_of_idle_streams_cost_little_memory(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    """512 streams opened at the defaults, one item each, never closed: all but the caller's
    share are refused at once, the rest end once idle, and the process's memory barely moves.
    (On a loaded machine the first streams may end while later ones are still opening, and free
    their slots: the counts are bounded, not exact.)"""
    async with (
        running_server(tmp_path, embedder, clock, stream_idle_s=5.0) as srv,
        grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as ch,
    ):
        stub = pb_grpc.MemoryServiceStub(ch)
        with peak_rss_growth() as growth:
            calls = []
            for i in range(512):
                call = stub.StoreBatch()
                # A write racing the server's refusal fails in the client; the call's own
                # status, read below, is what the server answered.
                with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
                    await call.write(pb.StoreRequest(tenant="t", content=f"idle {i}"))
                calls.append(call)
            assert await _health(srv.port) == health_pb2.HealthCheckResponse.SERVING
            codes = [await call.code() for call in calls]
        share = srv.service.settings.max_streams_per_caller
        assert set(codes) <= {grpc.StatusCode.DEADLINE_EXCEEDED,
                              grpc.StatusCode.RESOURCE_EXHAUSTED}, set(codes)
        assert codes.count(grpc.StatusCode.DEADLINE_EXCEEDED) >= share
        assert codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED) >= 512 - 4 * share
        assert growth[0] < 200 * 2**20, growth
        assert (await stub.Stats(pb.StatsRequest(tenant="t"))).total == 0


async def test_a_second_server_on_a_port_in_use_refuses_to_start(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    async with running_server(tmp_path / "a", embedder, clock) as first:
        second = MemoryServer(
            build_service(Settings(data_dir=tmp_path / "b", rebalance_interval_s=0),
                          embedder=embedder, clock=clock), f"127.0.0.1:{first.port}")
        try:
            with pytest.raises(FailedPrecondition, match="the port is in use"):
                await second.start()
        finally:
            second.service.close()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{first.port}") as ch:  # still the one
            assert (await pb_grpc.MemoryServiceStub(ch).Stats(pb.StatsRequest())).total == 0
