"""The scenario suite's store: every backend, the same tests (test_store_scenarios.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from celestial_memory.store import MemoryRepository, open_edge, open_qdrant

DIM = 16
QDRANT_IMAGE = "qdrant/qdrant:v1.15.4"


def _docker_available() -> bool:
    try:
        import docker

        docker.from_env().ping()
        return True
    except Exception:
        return False


@pytest.fixture(scope="module")
def qdrant_server_url() -> Iterator[str]:
    if not _docker_available():
        pytest.skip("no Docker engine answers here: the real-Qdrant run is skipped")
    from testcontainers.qdrant import QdrantContainer

    with QdrantContainer(QDRANT_IMAGE) as q:
        yield f"http://{q.get_container_host_ip()}:{q.exposed_rest_port}"


@pytest.fixture(
    params=["edge", "qdrant-local", pytest.param("qdrant-server", marks=pytest.mark.docker)]
)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryRepository]:
    kind = request.param
    s: MemoryRepository
    if kind == "edge":
        s = open_edge(tmp_path / "shard", DIM)
    elif kind == "qdrant-local":
        s = open_qdrant(":memory:", DIM, "scenario")
    else:
        url = request.getfixturevalue("qdrant_server_url")
        s = open_qdrant(url, DIM, f"scenario_{uuid.uuid4().hex[:8]}")
    yield s
    s.close()
