"""``vectors_on_disk`` and ``payload_on_disk``: both engines keep the original vectors, the
keyword indexes, the payloads and their float and keyword indexes memory-mapped (the int8 copies,
the tenant and the zone indexes in RAM), and recall answers as it does with everything in RAM."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.domain.requests import NewMemory, RecallQuery
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.memory.service import MemoryService
from celestial_memory.store import payload as pl
from qdrant_client import QdrantClient

TEXTS = ["the boiler was serviced on 3 March", "Caroline went to the support group on Sunday",
         "the garden needs watering twice a week", "Melanie painted a sunrise last year"]


WAYS = [(False, False), (True, False), (True, True)]  # (vectors_on_disk, payload_on_disk)


def open_service(tmp_path: Path, embedder: SentenceTransformerEmbedder, backend: str,
                 vectors: bool, payload: bool) -> MemoryService:
    extra: dict[str, Any] = {"backend": "qdrant", "qdrant_url": ":memory:"} if (
        backend == "qdrant-local") else {}
    settings = Settings(data_dir=tmp_path / f"{vectors}-{payload}", rebalance_interval_s=0,
                        vectors_on_disk=vectors, payload_on_disk=payload, **extra)
    return build_service(settings, embedder=embedder, clock=ManualClock(1_700_000_000.0))


def test_the_setting_is_off_by_default() -> None:
    assert Settings().vectors_on_disk is False and Settings().payload_on_disk is False


@pytest.mark.parametrize("backend", ["edge", "qdrant-local"])
def test_recall_with_vectors_on_disk_is_recall_with_them_in_ram(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, backend: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: dict[str, Any] = {}  # collection -> create_collection's arguments; field -> schema
    create_collection = QdrantClient.create_collection
    create_payload_index = QdrantClient.create_payload_index

    def record_collection(self: QdrantClient, name: str, **kw: Any) -> Any:
        asked[name] = kw
        return create_collection(self, name, **kw)

    def record_index(self: QdrantClient, name: str, field: str, schema: Any, **kw: Any) -> Any:
        asked[field] = schema
        return create_payload_index(self, name, field, schema, **kw)

    monkeypatch.setattr(QdrantClient, "create_collection", record_collection)
    monkeypatch.setattr(QdrantClient, "create_payload_index", record_index)
    answers = []
    for vectors, payload in WAYS:
        svc = open_service(tmp_path, embedder, backend, vectors, payload)
        try:
            stored = svc.store_batch("t", [NewMemory(content=t) for t in TEXTS])
            got = svc.recall("t", RecallQuery(query="when was the boiler serviced?", limit=2,
                                              reinforce=False))
            order = {m.id: n for n, m in enumerate(stored.memories)}
            answers.append([(order[r.memory.id], round(r.relevance, 4)) for r in got])
            engine: Any = svc.store.engine
            if backend == "edge":
                config = json.loads(
                    (tmp_path / f"{vectors}-{payload}" / svc.settings.collection_name(384)
                     / "edge_config.json").read_text())
                for name in (pl.DENSE, pl.CONTEXT_DENSE):
                    assert (config["vectors"][name].get("memory") == "cold") is vectors
                for name in (pl.KEYWORDS, pl.CONTEXT_KEYWORDS):
                    assert (config["sparse_vectors"][name].get("memory") == "cold") is vectors
                assert config["vectors"][pl.DENSE]["quantization_config"]["scalar"]["always_ram"]
                assert config["payload_memory"] == ("cold" if payload else "cached")
                import qdrant_edge as qe

                schema = engine._memories.info().payload_schema
                for field in ("tags", "entities", "created_at", "drop_belt"):
                    assert (schema[field].params.memory == qe.Memory.Cold) is payload, field
                for field in ("tenant", "zone"):  # every recall filters on these
                    assert schema[field].params.memory != qe.Memory.Cold, field
            else:
                name = svc.settings.collection_name(384)
                params = engine._raw.get_collection(name).config.params
                for vector in (pl.DENSE, pl.CONTEXT_DENSE):
                    assert bool(params.vectors[vector].on_disk) is vectors
                for vector in (pl.KEYWORDS, pl.CONTEXT_KEYWORDS):
                    assert bool(params.sparse_vectors[vector].index.on_disk) is vectors
                # Local mode keeps no payload on disk and says nothing of it: what the engine
                # asked for is checked instead.
                assert asked[name]["on_disk_payload"] is payload
                for field in ("tags", "entities", "created_at", "drop_belt"):
                    assert getattr(asked[field], "on_disk", None) is (True if payload else None)
                for field in ("tenant", "zone"):
                    assert not getattr(asked[field], "on_disk", None)
        finally:
            svc.close()
    assert answers[0] == answers[1] == answers[2] and answers[0][0][0] == 0
