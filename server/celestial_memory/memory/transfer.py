"""Export and Import: moving a tenant's memories between stores (embedded <-> remote) losslessly.

Export reads pages in id order straight from the store (after flushing pending reinforcements),
so it resumes from the last id a client received. Import writes each memory as exported: id,
content, context, vectors, zone, score, counts, times, tags, metadata, pinned, whether it is
archived (and since when) and the repeats merged into it. Keyword vectors are
rebuilt from the text and drop times from the memory's state (both deterministic), so they match
the importing server's settings. A memory whose id the tenant already holds is skipped unless
the import asks to replace, so importing twice changes nothing and a broken import can be sent
again; an id another tenant holds is refused (ids are unique across tenants). Capacities are
enforced after each batch, as after any write.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import cast

import numpy as np
from celestial_memory.clock import Clock
from celestial_memory.config import Settings
from celestial_memory.domain import memory_types
from celestial_memory.domain import validation as check
from celestial_memory.domain.models import Memory, Vector, content_hash
from celestial_memory.domain.requests import Imported
from celestial_memory.errors import AlreadyExists, InvalidArgument
from celestial_memory.graph.entity_index import checked_entities
from celestial_memory.graph.relations import Relations, checked_edges
from celestial_memory.memory.cancellation import NEVER, Cancellation
from celestial_memory.recall.retrieval import Retrieval
from celestial_memory.store.repository import MemoryRepository
from celestial_memory.zones.placement import Placement

EXPORT_PAGE = 64
EXPORT_PAGE_BYTES = 2 << 20


def _approx_bytes(m: Memory) -> int:
    """About what a memory holds in memory as read for an export: its texts, labels, merged
    repeats, relations and two vectors."""
    texts = len(m.content) + len(m.context) + len(m.summary) + sum(map(len, m.tags))
    texts += sum(len(k) + len(v) for k, v in m.metadata.items())
    texts += sum(len(p.content) + len(p.context) + 64 for p in m.merged)
    return 2 * texts + 200 * len(m.edges) + 8 * 384 + 1024


class Transfer:
    def __init__(
        self, settings: Settings, store: MemoryRepository, retrieval: Retrieval,
        placement: Placement, relations: Relations, clock: Clock,
    ) -> None:
        self._relations = relations
        self._settings = settings
        self._store = store
        self._retrieval = retrieval
        self._placement = placement
        self._rebalancer = placement.rebalancer
        self._clock = clock

    def export_pages(self, tenant: str, after_id: str = "") -> Iterator[list[Memory]]:
        after = check.memory_id(after_id, "after_id") if after_id else ""
        self._placement.flush(tenant)  # recalls acknowledged before the export are in it
        # A page is what a stream holds in memory while its reader is slow (gRPC's flow control
        # holds the rest in the store), so pages are sized by bytes: the first holds one
        # memory, and each next one as many as EXPORT_PAGE_BYTES held of the last page's
        # memories, at most EXPORT_PAGE. Memories at every input limit (1.6 MB each) go one or
        # two at a time; ordinary ones 64 at a time.
        size = 1
        while True:
            page = next(self._store.export_pages(tenant, after, page_size=size), [])
            if not page:
                return
            yield page
            after = page[-1].id
            each = max(1, sum(_approx_bytes(m) for m in page) // len(page))
            size = max(1, min(EXPORT_PAGE, EXPORT_PAGE_BYTES // each))

    def import_batch(
        self, tenant: str, items: Sequence[Imported], first: int = 0, replace: bool = False,
        cancel: Cancellation = NEVER,
    ) -> tuple[int, int]:
        """Validate a whole batch, then write it: a bad item writes nothing of its batch, and its
        error names its place in the whole import (``first`` is the batch's first position).
        Returns how many were written and how many skipped (held already, without
        ``replace``)."""
        if len(items) > self._settings.max_batch:
            raise InvalidArgument("memories", f"more than {self._settings.max_batch} in a batch")
        now = self._clock.now()
        checked = [self._checked(tenant, it, first + i, now) for i, it in enumerate(items)]
        memories = [m for m, _ in checked]
        # Keyword vectors and a long memory's passages are rebuilt from the text; the exported
        # contextual vector is kept.
        index = self._retrieval.index_vectors(
            [m.content for m in memories], [m.context for m in memories],
            [cast(Vector, m.vector) for m in memories], [False] * len(memories),
            [ctx for _, ctx in checked], passages_here=[True] * len(memories),
        )
        for m, ix in zip(memories, index, strict=True):
            m.index = ix
        ids = [m.id for m in memories]
        check.unique_ids(ids, [f"memories[{first + i}].memory.id" for i in range(len(ids))])
        # Checked and written under the ids' locks: a concurrent create of the same id waits.
        with self._placement.ids_locked(ids):
            owners = self._store.owners(ids)
            for i, mid in enumerate(ids):
                if owners.get(mid, tenant) != tenant:
                    raise AlreadyExists(f"memories[{first + i}].memory.id", f"id {mid} is taken")
            fresh = [m for m in memories if m.id not in owners]
            held = [m for m in memories if m.id in owners]
            if replace and held:  # an immutable memory is never replaced: skipped, as held
                protected = {mid for mid, m in self._store.get(tenant, [m.id for m in held]).items()
                             if m.immutable}
                held = [m for m in held if m.id not in protected]
            self._placement.flush(tenant)
            cancel.check("the import")
            before = (self._store.graph.edges_of(tenant, [m.id for m in held])
                      if replace and held else {})
            self._placement.write(tenant, fresh, replacing=held if replace else ())
            self._relations.settle_imported(tenant, [*fresh, *(held if replace else ())],
                                            before)
        return ((len(fresh) + len(held), len(memories) - len(fresh) - len(held)) if replace
                else (len(fresh), len(held)))

    def _checked(self, tenant: str, it: Imported, i: int, now: float) -> tuple[Memory, Vector | None]:
        """The memory validated and placed (vector set, not yet indexed), and its exported
        contextual vector, if any."""
        s, m, p = self._settings, it.memory, f"memories[{i}]."
        m.id = check.memory_id(m.id, f"{p}memory.id")
        m.tenant = tenant
        m.content = check.content(m.content, s, f"{p}memory.content")
        m.context = check.context(m.context, s, f"{p}memory.context")
        for name in ("created_at", "last_recalled_at", "written_at", "archived_at"):
            check.timestamp(getattr(m, name), f"{p}{name}")
        for name in ("score", "context_score"):  # small numbers with any weights
            if not (np.isfinite(getattr(m, name)) and abs(getattr(m, name)) <= 1e6):
                raise InvalidArgument(f"{p}{name}", "is not a finite number within ±1e6")
        if not 0 <= m.recall_count <= 2**53:
            raise InvalidArgument(f"{p}recall_count", "is out of range")
        check.unit_interval(m.importance, f"{p}memory.importance")
        check.tags(m.tags, s, f"{p}memory.tags")
        check.label(m.session_id, s, f"{p}memory.session_id")
        check.label(m.agent_id, s, f"{p}memory.agent_id")
        check.metadata(m.metadata, s, f"{p}memory.metadata")
        m.merged = check.merged(m.merged, s, f"{p}memory.merged")
        m.memory_type = memory_types.checked(m.memory_type, f"{p}memory.memory_type")
        # Relations and entities as Relate and the extractor would have written them: a read
        # of the graph never meets an edge or an entity it cannot follow or show.
        m.edges = checked_edges(m.edges, m.id, s.max_relations, f"{p}memory.relations")
        m.entities = checked_entities(m.entities, f"{p}memory.entities")
        assert m.vector is not None
        vec = check.vector(m.vector, self._store.dimension, f"{p}vector")
        ctx = (check.vector(it.context_vector, self._store.dimension, f"{p}context_vector")
               if it.context_vector is not None else None)
        m.vector = vec
        m.content_hash = content_hash(m.content)
        m.drop_times = self._rebalancer.drop_times(m.recall_count, m.last_recalled_at, m.importance)
        if not m.pinned:  # the invariant every write keeps (rebalancer.settled_zone)
            m.zone = self._rebalancer.settled_zone(m, now)
        return m, ctx
