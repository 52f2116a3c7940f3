"""Shared fixtures. The bundled model is loaded once per session (about 5 s)."""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.memory.service import MemoryService
from celestial_memory.store import MemoryRepository, open_edge, open_qdrant

from tests.processes import reap

# httpcore traces every socket step at DEBUG, from the worker threads that call a scripted
# model. Twice the run died in the log capture's write of such a record (a segfault in
# StreamHandler.emit, tests/integration/test_llm_importance.py); the cause is not found, and
# the traces say nothing the tests read, so they stay out of the capture.
logging.getLogger("httpcore").setLevel(logging.INFO)

DIM = 384
# Secrets that must never reach a log: any API key (its format), and the Qdrant API key the tests
# configure. The session fails if the run's log holds one.
API_KEY_PATTERN = re.compile(r"cm_[0-9a-f]{12}_[A-Za-z0-9_-]{40,}")
QDRANT_TEST_KEY = "qdrant-test-key-5b0c7e"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    log_file = Path(session.config.rootpath) / str(session.config.getini("log_file"))
    if not log_file.exists():
        return
    text = log_file.read_text(errors="replace")
    leaks = API_KEY_PATTERN.findall(text) + ([QDRANT_TEST_KEY] if QDRANT_TEST_KEY in text else [])
    if leaks:
        print(f"\nsecrets in the run's log ({log_file}): {len(leaks)}", file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True)
def _no_process_left() -> Iterator[None]:
    """Whatever a test's outcome, no process it started outlives it (tests/processes.py)."""
    yield
    reap()


@pytest.fixture(scope="session")
def embedder() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder()


def open_backend(kind: str, path: Path, dimension: int = DIM) -> MemoryRepository:
    if kind == "edge":
        return open_edge(path / "edge", dimension)
    return open_qdrant(":memory:", dimension, "memories_test")


@pytest.fixture(params=["edge", "qdrant-local"])
def backend_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000.0)


@pytest.fixture
def service(
    tmp_path: Path, backend_kind: str, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> Iterator[MemoryService]:
    settings = Settings(data_dir=tmp_path, rebalance_interval_s=0)
    svc = build_service(
        settings, embedder=embedder, store=open_backend(backend_kind, tmp_path), clock=clock
    )
    yield svc
    svc.close()


def unit_vectors(n: int, dim: int = DIM, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)
