"""The remote store goes away (refusing, stalling, sending garbage) and comes back: calls answer
UNAVAILABLE with RetryInfo within a bound, then fail fast; health says NOT_SERVING; everything
recovers by itself.

No Qdrant server runs on this machine (no Docker), so the store the service talks to is a
switch: while healthy, qdrant-client's local mode; while a fault is on, a real qdrant-client
dialling a fault proxy, so the failures the service sees are the transport's own.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
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
from celestial_memory.store import open_qdrant
from celestial_memory.store.qdrant_engine import Connection
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status
from qdrant_client import QdrantClient

from tests.faults.proxy import FaultProxy, Mode

TIMEOUT_S = 2.0  # the store's per-call timeout here
BOUND_S = 6.0  # a first failing call answers within this (retries, or one timeout)
FAST_S = 1.0  # later calls, with the circuit open: well under one timeout


class SwitchableStore:
    """Local mode while healthy; a qdrant-client dialling ``proxy`` while faulty."""

    def __init__(self, proxy: FaultProxy) -> None:
        self._local = QdrantClient(location=":memory:")
        self._remote = QdrantClient(
            host="127.0.0.1", port=proxy.port, grpc_port=proxy.port, prefer_grpc=True,
            timeout=int(TIMEOUT_S), check_compatibility=False)
        self._lock = threading.Lock()  # local mode is not thread-safe
        self.faulty = False

    def __getattr__(self, name: str) -> Any:
        if self.faulty:
            return getattr(self._remote, name)
        target = getattr(self._local, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return target(*args, **kwargs)

        return call if callable(target) else target


@pytest.fixture
def proxy() -> Iterator[FaultProxy]:
    p = FaultProxy(mode="refuse")
    yield p
    p.close()


@pytest.fixture
async def outage_server(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, proxy: FaultProxy
) -> AsyncIterator[tuple[MemoryServer, SwitchableStore]]:
    store = SwitchableStore(proxy)
    conn = Connection(url=f"http://{proxy.address}", timeout_s=TIMEOUT_S, retries=2,
                      backoff_s=0.05, breaker_cooldown_s=3.0)
    repo = open_qdrant(conn, embedder.dimension, "outage", client=store)  # type: ignore[arg-type]
    settings = Settings(data_dir=tmp_path, backend="qdrant", rebalance_interval_s=0,
                        grace_seconds=1, health_interval_s=0.2)
    service = build_service(settings, embedder=embedder, store=repo, clock=ManualClock(1e9))
    srv = MemoryServer(service, "127.0.0.1:0")
    await srv.start()
    try:
        yield srv, store
    finally:
        store.faulty = False
        await srv.stop()


async def _health(channel: grpc.aio.Channel) -> int:
    reply = await health_pb2_grpc.HealthStub(channel).Check(
        health_pb2.HealthCheckRequest(service=""), timeout=5)
    return int(reply.status)


async def _until_health(channel: grpc.aio.Channel, status: int, within_s: float) -> float:
    start = time.monotonic()
    while (await _health(channel)) != status:
        assert time.monotonic() - start < within_s, f"health not {status} after {within_s} s"
        await asyncio.sleep(0.05)
    return time.monotonic() - start


@pytest.mark.parametrize("mode", ["refuse", "stall", "garbage"])
async def test_an_outage_is_unavailable_fast_and_recovers(
    outage_server: tuple[MemoryServer, SwitchableStore], proxy: FaultProxy, mode: Mode
) -> None:
    srv, store = outage_server
    async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as ch:
        stub = pb_grpc.MemoryServiceStub(ch)
        kept = await stub.Store(pb.StoreRequest(tenant="t", content="the boat is blue"))
        assert await _health(ch) == health_pb2.HealthCheckResponse.SERVING

        proxy.set(mode)
        store.faulty = True
        started = time.monotonic()
        with pytest.raises(grpc.aio.AioRpcError) as first:
            await stub.Store(pb.StoreRequest(tenant="t", content="the car is red"))
        assert time.monotonic() - started < BOUND_S
        assert first.value.code() == grpc.StatusCode.UNAVAILABLE
        status = rpc_status.from_call(first.value)  # type: ignore[arg-type]
        assert status is not None
        retry, info = error_details_pb2.RetryInfo(), error_details_pb2.ErrorInfo()
        assert any(d.Unpack(retry) for d in status.details)
        assert retry.retry_delay.ToNanoseconds() > 0
        assert any(d.Unpack(info) for d in status.details) and info.reason == "STORE_UNAVAILABLE"

        # The circuit is open: every kind of call fails at once, and health says so.
        for call in (
            stub.Store(pb.StoreRequest(tenant="t", content="the car is red")),
            stub.Recall(pb.RecallRequest(tenant="t", query="boat")),
            stub.Get(pb.GetRequest(tenant="t", id=kept.memory.id)),
        ):
            started = time.monotonic()
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await call
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE, err.value.details()
            assert time.monotonic() - started < FAST_S
        await _until_health(ch, health_pb2.HealthCheckResponse.NOT_SERVING, within_s=BOUND_S)

        # The store comes back: health and calls recover with no one intervening.
        store.faulty = False
        proxy.set("forward")
        await _until_health(ch, health_pb2.HealthCheckResponse.SERVING, within_s=BOUND_S)
        got = await stub.Get(pb.GetRequest(tenant="t", id=kept.memory.id))
        assert got.memory.content == "the boat is blue"
        await stub.Store(pb.StoreRequest(tenant="t", content="the car is red"))
        found = await stub.Recall(pb.RecallRequest(tenant="t", query="what colour is the car"))
        assert "the car is red" in [r.memory.content for r in found.results]
