"""A real gRPC server in-process on port 0, over the embedded store, with a manual clock."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from celestial_client import AsyncCelestialClient, CelestialClient
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.memory.service import MemoryService

from tests.conftest import open_backend
from tests.connect_stub import ConnectStub

# The two transports of the one contract: suites written against the gRPC stub run over each.
TRANSPORTS = ["grpc", "connect-json"]


@asynccontextmanager
async def running_server(
    data_dir: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock, **settings: Any
) -> AsyncIterator[MemoryServer]:
    """A started server on a free loopback port; stopped (and its store closed) on exit."""
    fields: dict[str, Any] = {"rebalance_interval_s": 0, "grace_seconds": 1, **settings}
    service = build_service(Settings(data_dir=data_dir, **fields), embedder=embedder, clock=clock)
    srv = MemoryServer(service, "127.0.0.1:0")
    await srv.start()
    try:
        yield srv
    finally:
        await srv.stop()


@asynccontextmanager
async def stub_over(transport: str, srv: MemoryServer) -> AsyncIterator[Any]:
    """The memory service's stub on ``srv`` over ``transport``: gRPC's own, or the same calls in
    Connect JSON on the HTTP port (the server must have one: ``http_address="127.0.0.1:0"``)."""
    if transport == "grpc":
        async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as channel:
            yield pb_grpc.MemoryServiceStub(channel)
        return
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{srv.http_port}", timeout=120) as h:
        yield ConnectStub(h)


@pytest.fixture
async def server(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> AsyncIterator[MemoryServer]:
    async with running_server(tmp_path, embedder, clock) as srv:
        yield srv


@pytest.fixture
async def engine_server(
    tmp_path: Path, backend_kind: str, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> AsyncIterator[tuple[MemoryService, pb_grpc.MemoryServiceStub]]:
    """A server over each engine in turn (Qdrant Edge, qdrant-client's local mode), with its
    service (to reach under the API) and a raw stub (to send what no client would)."""
    service = build_service(Settings(data_dir=tmp_path, rebalance_interval_s=0), embedder=embedder,
                            store=open_backend(backend_kind, tmp_path), clock=clock)
    server = MemoryServer(service, "127.0.0.1:0")
    await server.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}",
                                        options=[("grpc.max_receive_message_length", 64 << 20)])
    try:
        yield service, pb_grpc.MemoryServiceStub(channel)
    finally:
        await channel.close()
        await server.stop()


@pytest.fixture
async def aclient(server: MemoryServer) -> AsyncIterator[AsyncCelestialClient]:
    async with AsyncCelestialClient(f"127.0.0.1:{server.port}", tenant="it") as c:
        yield c


@pytest.fixture
def client(server: MemoryServer) -> Iterator[CelestialClient]:
    """The blocking client. The server runs on the test's event loop, so call it from a
    worker thread (``await asyncio.to_thread(...)``), never directly from the loop."""
    with CelestialClient(f"127.0.0.1:{server.port}", tenant="it") as c:
        yield c
