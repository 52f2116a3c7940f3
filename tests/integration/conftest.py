"""A real gRPC server in-process on port 0, over the embedded store, with a manual clock."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from celestial_client import AsyncCelestialClient, CelestialClient
from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.embedding import SentenceTransformerEmbedder
from celestial_memory.grpc_api.server import MemoryServer


@pytest.fixture
async def server(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> AsyncIterator[MemoryServer]:
    settings = Settings(data_dir=tmp_path, rebalance_interval_s=0, grace_seconds=1)
    srv = MemoryServer(build_service(settings, embedder=embedder, clock=clock), "127.0.0.1:0")
    await srv.start()
    yield srv
    await srv.stop()


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
