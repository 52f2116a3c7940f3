"""Wiring: settings -> store, embedder, evaluator, clock -> MemoryService."""

from __future__ import annotations

import logging

from celestial_memory.clock import Clock, ManualClock, SystemClock
from celestial_memory.config import Settings
from celestial_memory.domain.importance import ImportanceEvaluator, evaluator_from_settings
from celestial_memory.encoding import open_encoder
from celestial_memory.encoding.batching import BatchingEmbedder
from celestial_memory.encoding.embedding import Embedder
from celestial_memory.memory.service import MemoryService
from celestial_memory.store import MemoryRepository, open_edge, open_qdrant
from celestial_memory.understanding import chat
from celestial_memory.understanding.extraction_queue import ExtractionQueue

log = logging.getLogger(__name__)


def open_store(settings: Settings, dimension: int) -> MemoryRepository:
    collection = settings.collection_name(dimension)
    if settings.backend == "edge":
        return open_edge(settings.data_dir / collection, dimension, settings.vectors_on_disk,
                         settings.payload_on_disk)
    from celestial_memory.store.qdrant_engine import Connection

    key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
    conn = Connection(
        url=settings.qdrant_url if not settings.qdrant_host else "", host=settings.qdrant_host,
        port=settings.qdrant_port, grpc_port=settings.qdrant_grpc_port, https=settings.qdrant_https,
        api_key=key, timeout_s=settings.qdrant_timeout_s, retries=settings.qdrant_retries,
        backoff_s=settings.qdrant_backoff_s, breaker_failures=settings.qdrant_breaker_failures,
        breaker_cooldown_s=settings.qdrant_breaker_cooldown_s, shard_number=settings.qdrant_shard_number,
        replication_factor=settings.qdrant_replication_factor,
        write_consistency_factor=settings.qdrant_write_consistency_factor,
    )
    return open_qdrant(conn, dimension, collection, vectors_on_disk=settings.vectors_on_disk,
                       payload_on_disk=settings.payload_on_disk)


def build_service(
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    store: MemoryRepository | None = None,
    clock: Clock | None = None,
) -> MemoryService:
    embedder = embedder or BatchingEmbedder(
        open_encoder(settings), settings.embed_batch_window_ms / 1000, settings.embed_max_batch)
    store = store or open_store(settings, embedder.dimension)
    # Before any call: relation changes a stopped process had begun are finished.
    if finished := store.graph.finish_pending():
        log.info("finished %d relation changes a stopped server had begun", finished)
    if settings.importance_evaluator == "llm":
        from celestial_memory.understanding import llm_importance

        evaluator: ImportanceEvaluator = llm_importance.from_settings(settings)
    else:
        evaluator = evaluator_from_settings(settings)
    clock = clock or _default_clock(settings)
    # One client for every model-backed feature (understanding/chat.py).
    model = chat.from_settings(settings) if settings.has_model else None
    return MemoryService(settings, store, embedder, clock, evaluator,
                         _understanding(settings, store, clock, model), model)


def _understanding(settings: Settings, store: MemoryRepository, clock: Clock,
                   model: chat.ChatModel | None) -> ExtractionQueue | None:
    if settings.extractor != "llm" or model is None:
        return None
    from celestial_memory.understanding.extraction import LlmExtractor

    return ExtractionQueue(settings, store, LlmExtractor(model), clock)


def _default_clock(settings: Settings) -> Clock:
    # A replay sets the time through the admin clock; it starts at the wall clock.
    return ManualClock(SystemClock().now()) if settings.admin_clock else SystemClock()
