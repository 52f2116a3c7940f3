"""Update: a memory's content, importance, tags, metadata or pin changed by its caller, the
memory re-placed by its score and settled in the zone its drop times allow
(docs/design.md, "Zones")."""

from __future__ import annotations

from celestial_memory.clock import Clock
from celestial_memory.config import Settings
from celestial_memory.domain import validation as check
from celestial_memory.domain.models import EDITED, Memory, content_hash
from celestial_memory.domain.requests import MemoryChanges
from celestial_memory.domain.scoring import MemoryFunction
from celestial_memory.domain.zones import ZoneTable
from celestial_memory.encoding.embedding import Embedder
from celestial_memory.errors import FailedPrecondition, Immutable, InvalidArgument
from celestial_memory.recall.retrieval import Retrieval
from celestial_memory.store.repository import MemoryRepository
from celestial_memory.understanding import resolutions
from celestial_memory.zones.placement import Placement


class Editing:
    def __init__(self, settings: Settings, store: MemoryRepository, embedder: Embedder,
                 retrieval: Retrieval, fn: MemoryFunction, zones: ZoneTable, clock: Clock,
                 placement: Placement) -> None:
        self._settings = settings
        self._store = store
        self._embedder = embedder
        self._retrieval = retrieval
        self._fn = fn
        self._zones = zones
        self._clock = clock
        self._placement = placement

    def update(self, tenant: str, memory_id: str, ch: MemoryChanges) -> Memory:
        s = self._settings
        mid = check.memory_id(memory_id)
        new_content = check.content(ch.content, s) if ch.content is not None else None
        importance = check.unit_interval(ch.importance, "importance")
        tags = check.tags(ch.tags, s) if ch.tags is not None else None
        metadata = check.metadata(ch.metadata, s) if ch.metadata is not None else None
        vec = None
        if ch.vector is not None and len(ch.vector) > 0:
            if new_content is None:
                raise InvalidArgument("vector", "may only be given with new content")
            vec = check.vector(ch.vector, self._store.dimension, "vector")
        if new_content is not None and vec is None:
            vec = self._embedder.embed([new_content])[0]

        self._placement.flush(tenant)
        with self._placement.locked(tenant):
            m = self._store.get_one(tenant, mid)
            if m.immutable:
                raise Immutable(mid, "it may not be updated")
            if m.archived:
                raise FailedPrecondition(f"memory {mid} is archived: restore it first")
            now = self._clock.now()
            if new_content is not None:
                m.content = new_content
                m.content_hash = content_hash(new_content)
                resolutions.by_rules(m, s.summary_max_chars)  # the old ones said the old text
            if tags is not None:
                m.tags = tags
            if metadata is not None:
                m.metadata = metadata
            if ch.pinned is not None:
                m.pinned = ch.pinned
            if importance is not None:
                # A new importance re-places the memory by its current score.
                m.importance = importance
                m.score = float(
                    self._fn.total(m.recall_count, m.last_recalled_at, importance,
                                  m.context_score, now)
                )
                target = self._zones.zone_of_score(m.score)
                m.zone = min(m.zone, target) if m.pinned else target
            m.zone = self._placement.rebalancer.settled_zone(self._placement.rebalancer.stamped(m, now), now)
            if vec is not None:
                m.vector = vec
                m.index = self._retrieval.index_vectors(
                    [m.content], [m.context], [vec], [ch.vector is None or len(ch.vector) == 0]
                )[0]
                self._store.upsert([m])
                m.vector = m.index = None
            else:
                self._store.save(tenant, [m], EDITED)
            self._placement.enforce(tenant, [m], keep_ids={m.id})
        return m
