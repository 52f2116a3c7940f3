"""A real gRPC server in-process on port 0, over the embedded store, with a manual clock."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from celestial_client import AsyncCelestialClient, CelestialClient
from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.grpc_api.server import MemoryServer


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


@pytest.fixture
async def server(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> AsyncIterator[MemoryServer]:
    async with running_server(tmp_path, embedder, clock) as srv:
        yield srv


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
