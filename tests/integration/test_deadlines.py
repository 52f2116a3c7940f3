"""Deadlines and cancellation reach the work in worker threads: a long StoreBatch stops at its
deadline or when its caller cancels it, writing nothing, and a Recall whose caller is gone
reinforces nothing."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.domain.requests import NewMemory, RecallQuery
from celestial_memory.errors import DeadlineExceeded
from celestial_memory.memory.cancellation import Cancellation
from celestial_memory.memory.service import MemoryService
from celestial_memory.observability import metrics

# Long texts (the model reads 256 tokens of each): embedding 1,500 of them takes tens of seconds
# on two cores, far longer than the deadlines below. That the work stopped is shown by what it
# embedded (fewer than all), not by how long it took: the suite may share a loaded machine.
LONG = " ".join(f"word{i} of a long note about the garden and the weather" for i in range(40))
ITEMS = 1500
IDLE_WITHIN_S = 120.0  # a bound for a hang, not a measure of speed


def _texts_embedded() -> float:
    return metrics.REGISTRY.get_sample_value("celestial_embedding_batch_size_sum") or 0.0


def _batch(tenant: str) -> list[pb.StoreRequest]:
    return [pb.StoreRequest(tenant=tenant, content=f"{i} {LONG}") for i in range(ITEMS)]


async def _stats_total(stub: pb_grpc.MemoryServiceStub, tenant: str) -> int:
    return int((await stub.Stats(pb.StatsRequest(tenant=tenant))).total)


async def test_a_long_batch_stops_at_its_deadline_and_writes_nothing(server: MemoryServer) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as ch:
        stub = pb_grpc.MemoryServiceStub(ch)
        before = _texts_embedded()
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.StoreBatch(iter(_batch("d")), timeout=1.0)
        assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert await asyncio.to_thread(server.servicer.inflight.wait_idle, IDLE_WITHIN_S)
        assert _texts_embedded() - before < ITEMS  # it stopped before embedding them all
        assert await _stats_total(stub, "d") == 0


async def test_a_cancelled_batch_stops_and_writes_nothing(server: MemoryServer) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as ch:
        stub = pb_grpc.MemoryServiceStub(ch)
        before = _texts_embedded()
        call = stub.StoreBatch(iter(_batch("c")))
        while not len(server.servicer.inflight):  # the batch is being embedded
            await asyncio.sleep(0.05)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert await asyncio.to_thread(server.servicer.inflight.wait_idle, IDLE_WITHIN_S)
        assert _texts_embedded() - before < ITEMS
        assert await _stats_total(stub, "c") == 0


async def test_a_recall_past_its_deadline_reinforces_nothing(server: MemoryServer) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as ch:
        stub = pb_grpc.MemoryServiceStub(ch)
        kept = await stub.Store(pb.StoreRequest(tenant="r", content="the boat is blue"))
        for _ in range(5):  # a recall takes longer than 1 ms: each one expires
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.Recall(pb.RecallRequest(tenant="r", query="boat"), timeout=0.001)
            assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        await asyncio.to_thread(server.servicer.inflight.wait_idle, IDLE_WITHIN_S)
        got = await stub.Get(pb.GetRequest(tenant="r", id=kept.memory.id))
        assert got.memory.recall_count == 0


def test_the_service_checks_before_it_reinforces(service: MemoryService) -> None:
    m = service.store_memory("t", NewMemory(content="the boat is blue"))
    expired = Cancellation(deadline=time.monotonic() - 1)
    with pytest.raises(DeadlineExceeded):
        service.recall("t", RecallQuery(query="boat"), cancel=expired)
    assert service.get("t", m.id).recall_count == 0
    # Without reinforcement nothing is written, so an expired read still answers.
    found = service.recall("t", RecallQuery(query="boat", reinforce=False), cancel=expired)
    assert [r.memory.id for r in found] == [m.id]
    assert service.recall("t", RecallQuery(query="boat"))[0].memory.recall_count == 1
