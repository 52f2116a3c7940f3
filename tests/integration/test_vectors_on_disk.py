"""``vectors_on_disk``: both engines keep the original vectors memory-mapped and their int8
copies in RAM, and recall answers as it does with the vectors in RAM."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.domain.requests import NewMemory, RecallQuery
from celestial_memory.embedding import SentenceTransformerEmbedder
from celestial_memory.service import MemoryService
from celestial_memory.store import payload as pl

TEXTS = ["the boiler was serviced on 3 March", "Caroline went to the support group on Sunday",
         "the garden needs watering twice a week", "Melanie painted a sunrise last year"]


def open_service(tmp_path: Path, embedder: SentenceTransformerEmbedder, backend: str,
                 on_disk: bool) -> MemoryService:
    extra: dict[str, Any] = {"backend": "qdrant", "qdrant_url": ":memory:"} if (
        backend == "qdrant-local") else {}
    settings = Settings(data_dir=tmp_path / str(on_disk), rebalance_interval_s=0,
                        vectors_on_disk=on_disk, **extra)
    return build_service(settings, embedder=embedder, clock=ManualClock(1_700_000_000.0))


def test_the_setting_is_off_by_default() -> None:
    assert Settings().vectors_on_disk is False


@pytest.mark.parametrize("backend", ["edge", "qdrant-local"])
def test_recall_with_vectors_on_disk_is_recall_with_them_in_ram(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, backend: str,
) -> None:
    answers = []
    for on_disk in (False, True):
        svc = open_service(tmp_path, embedder, backend, on_disk)
        try:
            stored = svc.store_batch("t", [NewMemory(content=t) for t in TEXTS])
            got = svc.recall("t", RecallQuery(query="when was the boiler serviced?", limit=2,
                                              reinforce=False))
            order = {m.id: n for n, m in enumerate(stored.memories)}
            answers.append([(order[r.memory.id], round(r.relevance, 4)) for r in got])
            engine: Any = svc.store.engine
            if backend == "edge":
                config = json.loads(
                    (tmp_path / str(on_disk) / svc.settings.collection_name(384)
                     / "edge_config.json").read_text())
                for name in (pl.DENSE, pl.CONTEXT_DENSE):
                    assert (config["vectors"][name].get("memory") == "cold") is on_disk
                assert config["vectors"][pl.DENSE]["quantization_config"]["scalar"]["always_ram"]
            else:
                params = engine._raw.get_collection(svc.settings.collection_name(384)).config.params
                for name in (pl.DENSE, pl.CONTEXT_DENSE):
                    assert bool(params.vectors[name].on_disk) is on_disk
        finally:
            svc.close()
    assert answers[0] == answers[1] and answers[0][0][0] == 0
