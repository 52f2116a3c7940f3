"""The domain service: store, recall (Core to Cloud, with reinforcement), get, update, delete,
stats and rebalance. Front ends (the gRPC servicer, tests) call it with domain types only.

Every method validates its whole input before it writes anything. Methods are synchronous and
thread-safe; the gRPC layer calls them from worker threads. Concurrency has one owner, the
placement (placement.py): read-modify-write sequences (reinforcement, update, capacity, rebalance)
run under the tenant's lock there, and reads run beside them.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from celestial_memory.cancellation import NEVER, Cancellation
from celestial_memory.clock import Clock, ManualClock
from celestial_memory.config import Settings
from celestial_memory.domain import validation as check
from celestial_memory.domain.importance import ImportanceEvaluator
from celestial_memory.domain.models import (
    EDITED,
    AdminEvent,
    Memory,
    MemoryFilter,
    RebalanceReport,
    RecallResult,
    Stats,
    Vector,
    ZoneCount,
    ZoneEvent,
    content_hash,
)
from celestial_memory.domain.requests import (
    MemoryChanges,
    NewMemory,
    RecallQuery,
    Stored,
    derived_id,
)
from celestial_memory.domain.scoring import MemoryFunction, ScoreBreakdown
from celestial_memory.domain.trajectory import drop_times
from celestial_memory.domain.zones import Zone, ZoneTable
from celestial_memory.embedding import Embedder
from celestial_memory.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from celestial_memory.listing import Listing
from celestial_memory.placement import Placement
from celestial_memory.rebalancer import Rebalancer
from celestial_memory.retrieval import Retrieval, zone_order
from celestial_memory.store.repository import MemoryRepository
from celestial_memory.transfer import Transfer


class MemoryService:
    def __init__(
        self,
        settings: Settings,
        store: MemoryRepository,
        embedder: Embedder,
        clock: Clock,
        evaluator: ImportanceEvaluator,
    ) -> None:
        if store.dimension != embedder.dimension:
            raise ValueError(
                f"store dimension {store.dimension} != model dimension {embedder.dimension}"
            )
        self.settings = settings
        self.store = store
        self.embedder = embedder
        self.retrieval = Retrieval(settings, embedder)
        self.clock = clock
        self.fn = MemoryFunction.from_settings(settings)
        self.zones = ZoneTable.from_settings(settings)
        self._evaluator = evaluator
        self.rebalancer = Rebalancer(store, self.fn, self.zones, clock, settings)
        self.placement = Placement(store, self.rebalancer, settings)
        self.transfer = Transfer(settings, store, self.retrieval, self.placement, clock)
        self.listing = Listing(settings, store, self.placement)

    def close(self) -> None:
        """Write pending reinforcements, then flush and close the store."""
        self.placement.close()
        self.store.close()

    def tenants(self) -> list[str]:
        """Every tenant that has at least one memory (the periodic rebalance visits each)."""
        return self.store.tenants()

    def build_indexes(self) -> bool:
        """Build the vector indexes if enough was written since the last build (minutes at
        100,000 memories: the server runs this off the request path); True if it built."""
        return self.store.optimize()

    def store_available(self) -> bool:
        """Whether the store answers now (health)."""
        return self.store.available()

    def _placed(self, m: Memory, now: float) -> Memory:
        """Stamp a memory about to be written with its drop times and write time."""
        m.drop_times = self.rebalancer.drop_times(m.recall_count, m.last_recalled_at, m.importance)
        m.written_at = now
        return m

    # -- store ---------------------------------------------------------------------------

    def store_memory(
        self, tenant: str, item: NewMemory, cancel: Cancellation = NEVER
    ) -> Memory:
        return self.store_batch(tenant, [item], cancel=cancel).memories[0]

    def store_many(
        self, tenant: str, items: Sequence[NewMemory], prechecked: bool = False,
        cancel: Cancellation = NEVER,
    ) -> list[Memory]:
        return self.store_batch(tenant, items, prechecked, cancel).memories

    def store_batch(
        self, tenant: str, items: Sequence[NewMemory], prechecked: bool = False,
        cancel: Cancellation = NEVER,
    ) -> Stored:
        """Store memories, create-only by id: an item whose id (given, or derived from its
        request_id) the tenant holds with the same content is a retry and is answered as held,
        unwritten; other content, or an id another tenant holds, is ALREADY_EXISTS unless the
        item asks to upsert (its own). ``prechecked``: every item already went through
        ``check_new`` (a stream checks each as it arrives). ``cancel`` is checked before each
        chunk of embedding and before the write: a cancelled or expired batch writes nothing."""
        if len(items) > self.settings.max_batch:
            raise InvalidArgument("requests", f"more than {self.settings.max_batch} items")
        batch = len(items) > 1
        checked = list(items) if prechecked else [
            self.check_new(item, i, batch) for i, item in enumerate(items)]
        ids = [it.id or (derived_id(tenant, it.request_id) if it.request_id else "")
               for it in checked]
        check.unique_ids(ids, [self._id_field(it, i, batch) for i, it in enumerate(checked)])
        # Read before encoding, so that a retry costs no encode; decided again under the ids'
        # locks, where a concurrent create of the same id cannot slip between check and write.
        held = self._held(tenant, checked, ids, batch)
        vectors: dict[int, Vector] = {}
        self._embed_missing(checked, [i for i in range(len(checked)) if i not in held], vectors,
                            cancel)
        with self.placement.ids_locked(ids):
            if any(ids):
                held = self._held(tenant, checked, ids, batch)
            fresh = [i for i in range(len(checked)) if i not in held]
            self._embed_missing(checked, fresh, vectors, cancel)  # deleted since the first read
            memories = self._new_memories(tenant, checked, ids, fresh, vectors)
            if memories:
                cancel.check("the store")
                # Create-only writes never replace a memory another call created meanwhile, and
                # an upsert replaces only this tenant's.
                self.placement.write(
                    tenant, [memories[i] for i in fresh if not checked[i].upsert],
                    replacing=[memories[i] for i in fresh if checked[i].upsert])
        for m in memories.values():
            m.vector = m.index = None
        return Stored([held[i] if i in held else memories[i] for i in range(len(checked))],
                      [i not in held for i in range(len(checked))])

    @staticmethod
    def _id_field(it: NewMemory, i: int, batch: bool) -> str:
        """Where an item's id comes from, as errors name it."""
        name = "request_id" if it.request_id else "id"
        return f"requests[{i}].{name}" if batch else name

    def _embed_missing(
        self, items: Sequence[NewMemory], which: Sequence[int], vectors: dict[int, Vector],
        cancel: Cancellation,
    ) -> None:
        """Encode the items among ``which`` with neither a given vector nor one in ``vectors``,
        a chunk at a time, checking ``cancel`` before each."""
        missing = [i for i in which if items[i].vector is None and i not in vectors]
        # Shortest first, as the model does within one encode: each chunk then pads its texts
        # to similar lengths (1,000 LoCoMo turns in chunks of 64: 10.4 s unsorted, as one call
        # 6.4 s).
        missing.sort(key=lambda i: len(items[i].content))
        step = max(1, self.settings.embed_max_batch)
        for start in range(0, len(missing), step):
            cancel.check("the store")
            chunk = missing[start:start + step]
            embedded = self.embedder.embed([items[i].content for i in chunk])
            vectors.update(zip(chunk, embedded, strict=True))

    def _new_memories(
        self, tenant: str, items: Sequence[NewMemory], ids: Sequence[str], fresh: Sequence[int],
        vectors: dict[int, Vector],
    ) -> dict[int, Memory]:
        """The memories to write for the items at ``fresh``, placed in their zones."""
        new = [items[i] for i in fresh]
        dense = [
            np.asarray(it.vector if it.vector is not None else vectors[i], dtype=np.float32)
            for i, it in zip(fresh, new, strict=True)
        ]
        index = self.retrieval.index_vectors(
            [it.content for it in new], [it.context for it in new], dense,
            [it.vector is None for it in new],
        )
        now = self.clock.now()
        memories: dict[int, Memory] = {}
        for k, (i, it) in enumerate(zip(fresh, new, strict=True)):
            importance = it.importance
            if importance is None:
                importance = self._evaluator.evaluate(it.content)
            created = it.created_at if it.created_at is not None else now
            score = float(self.fn.total(0, created, importance, 0.0, now))
            memories[i] = self._placed(
                Memory(
                    id=ids[i] or str(uuid.uuid4()), tenant=tenant, content=it.content,
                    zone=self.zones.zone_of_score(score), score=score, importance=importance,
                    recall_count=0, created_at=created, last_recalled_at=created,
                    tags=it.tags, session_id=it.session_id, agent_id=it.agent_id,
                    metadata=it.metadata, pinned=it.pinned, content_hash=content_hash(it.content),
                    vector=dense[k], context=it.context, index=index[k],
                ), now
            )
        return memories

    def _held(
        self, tenant: str, items: Sequence[NewMemory], ids: Sequence[str], batch: bool
    ) -> dict[int, Memory]:
        """The items (by position) whose id the tenant holds with the same content: retries,
        answered with the memory as it is. Raises AlreadyExists for an id held with other
        content (without upsert) or by another tenant (ids are unique across tenants)."""
        given = [mid for mid in ids if mid]
        if not given:
            return {}
        owners = self.store.owners(given)
        if not owners:
            return {}
        self._flush(tenant)  # a held memory is answered with its pending reinforcements
        mine = self.store.get(tenant, [mid for mid in given if owners.get(mid) == tenant])
        held: dict[int, Memory] = {}
        for i, (it, mid) in enumerate(zip(items, ids, strict=True)):
            if mid not in owners:
                continue
            field = self._id_field(it, i, batch)
            if owners[mid] != tenant:
                raise AlreadyExists(field, f"id {mid} is taken")
            if it.upsert:
                continue
            m = mine.get(mid)
            if m is None or m.content_hash != content_hash(it.content):
                raise AlreadyExists(
                    field, f"memory {mid} exists with other content (upsert replaces it)")
            held[i] = m
        return held

    def check_new(self, item: NewMemory, index: int, batch: bool) -> NewMemory:
        """``item`` validated (``index``: its place in a batch, named in errors): a stream checks
        each item as it arrives, before holding the next."""
        p = f"requests[{index}]." if batch else ""
        s = self.settings
        if item.id and item.request_id:
            raise InvalidArgument(f"{p}request_id", "may not be given together with id")
        vec = None
        if item.vector is not None and len(item.vector) > 0:
            vec = check.vector(item.vector, self.store.dimension, f"{p}vector")
        return replace(
            item,
            content=check.content(item.content, s, f"{p}content"),
            importance=check.unit_interval(item.importance, f"{p}importance"),
            tags=check.tags(item.tags, s, f"{p}tags"),
            session_id=check.label(item.session_id, s, f"{p}session_id"),
            agent_id=check.label(item.agent_id, s, f"{p}agent_id"),
            metadata=check.metadata(item.metadata, s, f"{p}metadata"),
            created_at=check.timestamp(item.created_at, f"{p}created_at"),
            context=check.context(item.context, s, f"{p}context"),
            id=check.memory_id(item.id, f"{p}id") if item.id else "",
            request_id=check.request_id(item.request_id, f"{p}request_id") if item.request_id
            else "",
            vector=vec,
        )

    # -- recall --------------------------------------------------------------------------

    def recall(
        self, tenant: str, q: RecallQuery, cancel: Cancellation = NEVER
    ) -> list[RecallResult]:
        """Hybrid search in every zone, rescored, in zone order behind the gate (retrieval.py);
        reinforces what it returns unless asked not to, or unless ``cancel`` says the caller is
        gone (nothing is reinforced for an answer no one receives)."""
        s = self.settings
        limit = check.limit(q.limit, s)
        flt = check.memory_filter(q.filter, s)
        gate = check.unit_interval(q.min_relevance, "min_relevance")
        gate = s.min_relevance if gate is None else gate
        if q.query_vector is not None and len(q.query_vector) > 0:
            qvec = check.vector(q.query_vector, self.store.dimension, "query_vector")
            text = check.content(q.query, s, "query") if q.query.strip() else ""
        else:
            text = check.content(q.query, s, "query")
            qvec = self.embedder.embed([text])[0]
        context_text = check.content(q.context, s, "context") if q.context.strip() else ""
        zones = sorted(set(flt.zones)) if flt.zones else list(Zone)
        hq = self.retrieval.query(text, qvec)

        cands = self.store.candidates(
            tenant, hq, zones, flt, self.retrieval.candidates_per_zone(limit)
        )
        if not cands.ids:
            return []
        ids, signals = cands.ids, cands.signals
        zone_of = dict(zip(ids, map(Zone, cands.zones), strict=True))
        relevance = self.retrieval.relevance(signals, keywords=not hq.keywords.is_empty())
        cvec = self.embedder.embed([context_text])[0] if context_text else None

        with self.placement.locked(tenant):
            pending = self.placement.pending(tenant, ids)
            for mid, p in pending.items():  # a reinforcement not written yet may have moved it
                zone_of[mid] = min(zone_of[mid], p.zone)
            ranked = zone_order(
                [int(zone_of[mid]) for mid in ids], relevance, gate, s.zone_margin,
                by_zone=not q.ignore_zones,
            )[:limit]
            # Payloads only for what is returned (one read), not for every candidate.
            found = self.store.get(tenant, [ids[r.index] for r in ranked])
            ranked = [r for r in ranked if ids[r.index] in found]  # deleted meanwhile
            if cvec is not None:
                context = self.store.similarities(tenant, cvec, [ids[r.index] for r in ranked])
            else:  # the query is the context: C = its cosine to the content
                context = {ids[r.index]: float(signals[r.index, 0]) for r in ranked}
            mems = [found[ids[r.index]] for r in ranked]
            for m in mems:
                if waiting := pending.get(m.id):  # count from the pending reinforcement
                    m.recall_count = waiting.recall_count
                    m.last_recalled_at = waiting.last_recalled_at
                    m.context_score = waiting.context_score
                m.zone = zone_of[m.id]
            found_in = [m.zone for m in mems]
            cs = [max(context.get(m.id, 0.0), 0.0) for m in mems]
            if q.reinforce:
                cancel.check("the recall")
            breakdowns = self._score_recalled(mems, cs, q.reinforce)
            if q.reinforce and mems:
                # Capacity follows off the recall's path (placement.py).
                self.placement.reinforce(tenant, mems)
        return [
            RecallResult(m, z, r.relevance, b)
            for m, z, r, b in zip(mems, found_in, ranked, breakdowns, strict=True)
        ]

    def _score_recalled(
        self, mems: Sequence[Memory], context: Sequence[float], reinforce: bool
    ) -> list[ScoreBreakdown]:
        """The breakdown of each recalled memory (numpy over all of them) and, when the recall
        reinforces, its new state: count + 1, freshness reset, C, score, zone, drop times."""
        if not mems:
            return []
        now = self.clock.now()
        fn = self.fn
        counts = np.array([m.recall_count + int(reinforce) for m in mems], dtype=np.int64)
        lasts = np.array([now if reinforce else m.last_recalled_at for m in mems])
        imps = np.array([m.importance for m in mems])
        r, f, _, c, totals = fn.terms(counts, lasts, imps, context, now)
        if reinforce:
            # A recall never moves what it returns outward.
            zones = np.minimum([int(m.zone) for m in mems], self.zones.zone_of(totals))
            drops = drop_times(fn, self.zones, counts, lasts, imps)
            for i, m in enumerate(mems):
                m.recall_count, m.last_recalled_at = int(counts[i]), now
                m.context_score, m.score = float(context[i]), float(totals[i])
                m.zone = Zone(int(zones[i]))
                m.drop_times = (float(drops[i, 0]), float(drops[i, 1]), float(drops[i, 2]),
                                float(drops[i, 3]))
                m.written_at = now
        return [
            ScoreBreakdown(float(r[i]), float(f[i]), m.importance, float(c[i]), float(totals[i]))
            for i, m in enumerate(mems)
        ]

    # -- get / update / delete -------------------------------------------------------------

    def _flush(self, tenant: str) -> None:
        """Pending reinforcements and the tenant's deferred capacity, before a read or write
        that must see them."""
        self.placement.flush(tenant)

    def get(self, tenant: str, memory_id: str) -> Memory:
        mid = check.memory_id(memory_id)
        self._flush(tenant)
        return self._find(tenant, mid)

    def _find(self, tenant: str, mid: str) -> Memory:
        # No flush here: update calls this under the tenant's lock (placement.py).
        found = self.store.get(tenant, [mid])
        if mid not in found:
            raise NotFound(f"memory {mid} not found")
        return found[mid]

    def update(self, tenant: str, memory_id: str, ch: MemoryChanges) -> Memory:
        s = self.settings
        mid = check.memory_id(memory_id)
        new_content = check.content(ch.content, s) if ch.content is not None else None
        importance = check.unit_interval(ch.importance, "importance")
        tags = check.tags(ch.tags, s) if ch.tags is not None else None
        metadata = check.metadata(ch.metadata, s) if ch.metadata is not None else None
        vec = None
        if ch.vector is not None and len(ch.vector) > 0:
            if new_content is None:
                raise InvalidArgument("vector", "may only be given with new content")
            vec = check.vector(ch.vector, self.store.dimension, "vector")
        if new_content is not None and vec is None:
            vec = self.embedder.embed([new_content])[0]

        self._flush(tenant)
        with self.placement.locked(tenant):
            m = self._find(tenant, mid)
            now = self.clock.now()
            if new_content is not None:
                m.content = new_content
                m.content_hash = content_hash(new_content)
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
                    self.fn.total(m.recall_count, m.last_recalled_at, importance,
                                  m.context_score, now)
                )
                target = self.zones.zone_of_score(m.score)
                m.zone = min(m.zone, target) if m.pinned else target
            m.zone = self.rebalancer.settled_zone(self._placed(m, now), now)
            if vec is not None:
                m.vector = vec
                m.index = self.retrieval.index_vectors(
                    [m.content], [m.context], [vec], [ch.vector is None or len(ch.vector) == 0]
                )[0]
                self.store.upsert([m])
                m.vector = m.index = None
            else:
                self.store.save(tenant, [m], EDITED)
            self.placement.enforce(tenant, [m], keep_ids={m.id})
        return m

    def delete(self, tenant: str, memory_id: str) -> bool:
        mid = check.memory_id(memory_id)
        self._flush(tenant)
        with self.placement.locked(tenant):
            return self.store.delete(tenant, [mid]) > 0

    def delete_by_filter(self, tenant: str, flt: MemoryFilter) -> int:
        check.memory_filter(flt, self.settings)
        if flt.is_empty():
            raise InvalidArgument("filter", "is empty: refusing to delete the whole tenant")
        self._flush(tenant)
        with self.placement.locked(tenant):
            return self.store.delete_by_filter(tenant, flt)

    # -- stats / rebalance ------------------------------------------------------------------

    def stats(self, tenant: str) -> Stats:
        self._flush(tenant)
        counts = self.store.count_by_zone(tenant)
        zones = [
            ZoneCount(z, counts[z], self.zones.capacity_of(z), self.zones.min_score(z))
            for z in Zone
        ]
        return Stats(
            zones=zones, total=sum(counts.values()), embedding_model=self.embedder.name,
            dimension=self.embedder.dimension, backend=self.store.backend_name,
        )

    def rebalance(
        self, tenant: str, dry_run: bool = False, full: bool = False, forget: bool = True
    ) -> RebalanceReport:
        return self.placement.rebalance(tenant, dry_run, full, forget)

    def set_clock(self, now: float) -> float:
        """Admin, for replays (settings.admin_clock): the clock reads ``now`` from here on."""
        if not self.settings.admin_clock or not isinstance(self.clock, ManualClock):
            raise FailedPrecondition("the admin clock is off (CELESTIAL_ADMIN_CLOCK=true)")
        t = check.timestamp(now, "now")
        assert t is not None
        self.placement.flush()  # pending reinforcements belong to the old time
        self.clock.set(t)
        return t

    def ledger(
        self, tenant: str, since: float | None = None, limit: int = 100, memory_id: str = ""
    ) -> list[ZoneEvent]:
        """The first ``limit`` zone events of a tenant, oldest first (listing.py pages)."""
        return self.listing.ledger(tenant, since, limit, memory_id)[0]

    def record_admin(self, tenant: str, method: str, key_id: str) -> None:
        """An admin call into the ledger as it starts, at the wall clock's time (an audit trail,
        whatever the admin clock says)."""
        self.store.append_admin(AdminEvent(str(uuid.uuid4()), tenant, method, key_id, time.time()))

    def breakdown(self, m: Memory) -> ScoreBreakdown:
        """The memory function's terms for ``m`` now, with C from its last recall."""
        return self.fn.breakdown(
            m.recall_count, m.last_recalled_at, m.importance, m.context_score, self.clock.now()
        )

