"""Writing new memories: validation, embedding in chunks, placement, create-only ids and
retries, and repeats (a new memory that repeats a live one is folded into it, memory/repeats.py), for
Store, StoreBatch and Observe (Consolidate's merging is memory/consolidation.py).

Every item is validated before anything is written. Ids given or derived from a request_id are
checked and written under the ids' stripe locks (zones/placement.py), so two creates of one id are
decided one after the other; a retry of a create answers the memory it made.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import cast

import numpy as np
from celestial_memory.clock import Clock
from celestial_memory.config import Settings
from celestial_memory.domain import memory_types
from celestial_memory.domain import validation as check
from celestial_memory.domain.importance import ImportanceEvaluator
from celestial_memory.domain.models import MERGED, Memory, Vector, ZoneEvent, content_hash
from celestial_memory.domain.reinforcing import reinforce
from celestial_memory.domain.requests import NewMemory, Stored, derived_id
from celestial_memory.domain.scoring import MemoryFunction
from celestial_memory.domain.zones import Zone, ZoneTable
from celestial_memory.encoding.embedding import Embedder
from celestial_memory.errors import AlreadyExists, Immutable, InvalidArgument
from celestial_memory.graph.entities import RuleExtractor
from celestial_memory.graph.entity_index import ref
from celestial_memory.graph.relations import Relations
from celestial_memory.memory.cancellation import NEVER, Cancellation
from celestial_memory.memory.consolidation import consolidate
from celestial_memory.memory.repeats import Repeats
from celestial_memory.recall.retrieval import Retrieval
from celestial_memory.store.repository import MemoryRepository
from celestial_memory.understanding import resolutions
from celestial_memory.zones.placement import Placement
from celestial_memory.zones.rebalancer import event_id


class Storing:
    def __init__(
        self, settings: Settings, store: MemoryRepository, embedder: Embedder,
        retrieval: Retrieval, fn: MemoryFunction, zones: ZoneTable, clock: Clock,
        evaluator: ImportanceEvaluator, placement: Placement, relations: Relations,
    ) -> None:
        self._settings = settings
        self._store = store
        self._embedder = embedder
        self._retrieval = retrieval
        self._fn = fn
        self._zones = zones
        self._clock = clock
        self._evaluator = evaluator
        self._placement = placement
        self._rebalancer = placement.rebalancer
        self._repeats = Repeats(settings, store)
        self._relations = relations
        self._entities = RuleExtractor()

    def terms(self, text: str) -> frozenset[str]:
        """The words a repeat is compared by (memory/repeats.py)."""
        return self._repeats.terms(text)

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
        if len(items) > self._settings.max_batch:
            raise InvalidArgument("requests", f"more than {self._settings.max_batch} items")
        batch = len(items) > 1
        checked = list(items) if prechecked else [
            self.check_new(item, i, batch) for i, item in enumerate(items)]
        ids = [it.id or (derived_id(tenant, it.request_id) if it.request_id else "")
               for it in checked]
        check.unique_ids(ids, [self._id_field(it, i, batch) for i, it in enumerate(checked)])
        # Read before encoding, so that a retry costs no encode; decided again under the ids'
        # locks, where a concurrent create of the same id cannot slip between check and write.
        held = self._held(tenant, checked, ids, batch)
        vectors: dict[int, Vector] = {i: it.embedded for i, it in enumerate(checked)
                                      if it.embedded is not None and it.vector is None}
        self._embed_missing(checked, [i for i in range(len(checked)) if i not in held], vectors,
                            cancel)
        # Rated before the ids' locks: an evaluator may call out (understanding/llm_importance.py).
        rated = self._rate(tenant, checked, [i for i in range(len(checked)) if i not in held], {})
        with self._placement.ids_locked(ids):
            if any(ids):
                held = self._held(tenant, checked, ids, batch)
            fresh = [i for i in range(len(checked)) if i not in held]
            self._embed_missing(checked, fresh, vectors, cancel)  # deleted since the first read
            memories = self._new_memories(tenant, checked, ids, fresh, vectors,
                                          self._rate(tenant, checked, fresh, rated), cancel)
            merged: dict[int, Memory] = {}
            if memories:
                cancel.check("the store")
                # Items that name an id ask for that memory: they never merge. Those with a
                # request_id may (a retry then finds the memory it went into: ``_held``).
                # An immutable item is stored as given, never folded into another memory.
                merged = self._merge_repeats(tenant, memories, [
                    i for i in fresh if not checked[i].id and not checked[i].upsert
                    and not checked[i].immutable and not checked[i].archived], ids,
                    {i: it.nearest for i, it in enumerate(checked) if it.nearest is not None})
                # An upsert writes the point whole: the relations it had stay.
                upserts = [i for i in fresh if checked[i].upsert]
                kept = self._store.graph.edges_of(tenant, [memories[i].id for i in upserts])
                for i in upserts:
                    memories[i].edges = kept.get(memories[i].id, [])
                # Create-only writes never replace a memory another call created meanwhile, and
                # an upsert replaces only this tenant's.
                live = [i for i in fresh if not checked[i].archived]
                self._placement.write(
                    tenant, [memories[i] for i in live
                             if not checked[i].upsert and i not in merged],
                    replacing=[memories[i] for i in live if checked[i].upsert])
                self._archive_new(tenant, [memories[i] for i in fresh if checked[i].archived])
                # A repeat stands in its session where it was said, as the memory it went into.
                with self._placement.locked(tenant):
                    linked = self._relations.follow_sessions(tenant, [
                        replace(merged[i], session_id=checked[i].session_id,
                                created_at=memories[i].created_at) if i in merged
                        else memories[i] for i in live])
                for m in [*memories.values(), *merged.values()]:  # answered as now stored
                    m.edges = linked.get(m.id, m.edges)
        for m in [*memories.values(), *merged.values()]:
            m.vector = m.index = None
        n = len(checked)
        into = {i: m.id for i, m in merged.items()} | {
            i: m.id for i, m in held.items() if m.id != ids[i]}
        return Stored([held.get(i) or merged.get(i) or memories[i] for i in range(n)],
                      [i not in held and i not in merged for i in range(n)],
                      [into.get(i, "") for i in range(n)])

    def _merge_repeats(
        self, tenant: str, memories: dict[int, Memory], candidates: Sequence[int],
        ids: Sequence[str], searched: dict[int, Sequence[tuple[str, float]]],
    ) -> dict[int, Memory]:
        """Fold the new memories at ``candidates`` that repeat a live memory, or an earlier one
        of the batch, into it (memory/repeats.py); returns each folded item's memory, as written. A
        new memory that others folded into is written with the batch."""
        if not self._settings.merge_repeats or not candidates:
            return {}
        found = self._repeats.find(tenant, memories, candidates, searched)
        if not found:
            return {}
        stored_ids = sorted({r.into for r in found if r.into})
        into: dict[int, Memory] = {}
        with self._placement.locked(tenant):
            read = self._store.get(tenant, stored_ids, with_vectors=True) if stored_ids else {}
            # Archived since the search: stored as itself, as for one deleted meanwhile. An
            # immutable memory takes no repeat either (understanding/): the repeat is stored.
            stored = {mid: m for mid, m in read.items() if not m.archived and not m.immutable}
            self._overlay_pending(tenant, list(stored.values()))
            whole: set[str] = set()  # stored memories that took a repeat's wording
            mentions: dict[str, tuple[Memory, int]] = {}
            for r in found:
                target = stored.get(r.into) if r.into else into.get(r.of, memories[r.of])
                if target is None or target.immutable:
                    continue
                # Checked again against the target as it reads now: an earlier fold may have
                # given it a longer wording that this item no longer repeats.
                took = self._repeats.fold(target, memories[r.index], ids[r.index])
                if took is None:
                    continue
                if took and target.id in stored:
                    whole.add(target.id)
                into[r.index] = target
                mentions[target.id] = (target, mentions.get(target.id, (target, 0))[1] + 1)
            for m, n in mentions.values():
                m.recall_count += n - 1  # and one more, with the freshness, as a recall does
            mentioned = [m for m, _ in mentions.values()]
            reinforce(self._fn, self._zones, mentioned, [m.context_score for m in mentioned],
                      self._clock.now(), True)
            written = [m for m, _ in mentions.values() if m.id in stored]
            if in_place := [m for m in written if m.id not in whole]:
                self._store.save(tenant, in_place, MERGED)
            if rewritten := [m for m in written if m.id in whole]:
                self._store.upsert(rewritten, tenant=tenant)
            if written:
                # Supersedes a recall's reinforcement still queued for them (its count is in).
                self._placement.reinforce(tenant, written)
        return into

    def _overlay_pending(self, tenant: str, memories: Sequence[Memory]) -> None:
        """Reinforcements queued and not written yet, read into ``memories`` (under the
        tenant's lock), so that a fold counts on top of them."""
        pending = self._placement.pending(tenant, [m.id for m in memories])
        for m in memories:
            if waiting := pending.get(m.id):
                m.recall_count, m.last_recalled_at = waiting.recall_count, waiting.last_recalled_at
                m.context_score, m.zone = waiting.context_score, waiting.zone

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
        # Lanes' worth at a time: the encoder runs that many chunks at once.
        step = max(1, self._settings.embed_max_batch) * getattr(self._embedder, "lanes", 1)
        for start in range(0, len(missing), step):
            cancel.check("the store")
            chunk = missing[start:start + step]
            embedded = self._embedder.embed([items[i].content for i in chunk])
            vectors.update(zip(chunk, embedded, strict=True))

    def _rate(self, tenant: str, items: Sequence[NewMemory], which: Sequence[int],
              rated: dict[int, float]) -> dict[int, float]:
        """Importance of the items at ``which``: given, in ``rated``, or from the evaluator
        (all of them in one call)."""
        out = {i: float(v) for i in which if (v := items[i].importance) is not None}
        out.update({i: rated[i] for i in which if i in rated})
        ask = [i for i in which if i not in out]
        if ask:
            out.update(zip(ask, self._evaluator.evaluate_many(
                [items[i].content for i in ask], tenant), strict=True))
        return out

    def _new_memories(
        self, tenant: str, items: Sequence[NewMemory], ids: Sequence[str], fresh: Sequence[int],
        vectors: dict[int, Vector], importance: dict[int, float], cancel: Cancellation = NEVER,
    ) -> dict[int, Memory]:
        """The memories to write for the items at ``fresh``, placed in their zones."""
        new = [items[i] for i in fresh]
        dense = [
            np.asarray(it.vector if it.vector is not None else vectors[i], dtype=np.float32)
            for i, it in zip(fresh, new, strict=True)
        ]
        index = self._retrieval.index_vectors(
            [it.content for it in new], [it.context for it in new], dense,
            [it.vector is None for it in new], between=lambda: cancel.check("the store"),
        )
        now = self._clock.now()
        memories: dict[int, Memory] = {}
        mentions = self._entities.extract_many([it.content for it in new])
        for k, (i, it) in enumerate(zip(fresh, new, strict=True)):
            created = it.created_at if it.created_at is not None else now
            score = float(self._fn.total(0, created, importance[i], 0.0, now))
            memories[i] = self._rebalancer.stamped(
                Memory(
                    id=ids[i] or str(uuid.uuid4()), tenant=tenant, content=it.content,
                    zone=self._zones.zone_of_score(score), score=score, importance=importance[i],
                    recall_count=0, created_at=created, last_recalled_at=created,
                    tags=it.tags, session_id=it.session_id, agent_id=it.agent_id,
                    metadata=it.metadata, pinned=it.pinned, content_hash=content_hash(it.content),
                    vector=dense[k], context=it.context, index=index[k],
                    entities=list(dict.fromkeys(ref(e) for e in mentions[k])),
                    # Queued for the model in the same write (understanding/extraction_queue.py).
                    understand_due=(now if self._settings.extractor == "llm" and it.understand
                                    and not it.archived else None),
                    archived_at=now if it.archived else None,
                    memory_type=it.memory_type or memory_types.DEFAULT, immutable=it.immutable,
                ), now
            )
            resolutions.by_rules(memories[i], self._settings.summary_max_chars)
        return memories

    def _archive_new(self, tenant: str, memories: Sequence[Memory]) -> None:
        """New memories written straight into the archive, each with its ledger event first
        ("skipped"): no zone grew, so no capacity is enforced."""
        if not memories:
            return
        with self._placement.locked(tenant):
            self._store.append_events([ZoneEvent(
                event_id(m.id, repr(m.created_at), int(Zone.CLOUD), "skipped"), tenant, m.id,
                Zone.CLOUD, None, "skipped", cast(float, m.archived_at), m.content_hash)
                for m in memories])
            self._store.upsert(memories, insert_only=True)

    def _held(
        self, tenant: str, items: Sequence[NewMemory], ids: Sequence[str], batch: bool
    ) -> dict[int, Memory]:
        """The items (by position) whose id the tenant holds with the same content: retries,
        answered with the memory as it is. Raises AlreadyExists for an id held with other
        content (without upsert) or by another tenant (ids are unique across tenants)."""
        given = [mid for mid in ids if mid]
        if not given:
            return {}
        owners = self._store.owners(given)
        # A request_id's id that no memory has may have been merged into one (a repeat).
        repeats = [mid for it, mid in zip(items, ids, strict=True)
                   if it.request_id and not it.upsert and mid not in owners]
        # Archived holders too: a retry answers the memory its repeat went into, wherever.
        into = (self._store.merged_holders(tenant, repeats, live_only=False)
                if repeats and self._settings.merge_repeats else {})
        if not owners and not into:
            return {}
        self._placement.flush(tenant)  # a held memory is answered with its pending reinforcements
        mine = self._store.get(tenant, [mid for mid in given if owners.get(mid) == tenant]
                              + [m.id for m in into.values()])
        held: dict[int, Memory] = {}
        for i, (it, mid) in enumerate(zip(items, ids, strict=True)):
            field = self._id_field(it, i, batch)
            if mid in into and into[mid].id in mine:
                if not any(p.id == mid and p.content == it.content for p in into[mid].merged):
                    raise AlreadyExists(field, f"request_id {it.request_id!r} was stored with "
                                               "other content")
                held[i] = mine[into[mid].id]
                continue
            if mid not in owners:
                continue
            if owners[mid] != tenant:
                raise AlreadyExists(field, f"id {mid} is taken")
            m = mine.get(mid)
            if it.upsert:
                if m is not None and m.immutable:
                    raise Immutable(mid, "upsert may not replace it")
                continue
            if m is None or m.content_hash != content_hash(it.content):
                raise AlreadyExists(
                    field, f"memory {mid} exists with other content (upsert replaces it)")
            held[i] = m
        return held

    def check_new(self, item: NewMemory, index: int, batch: bool) -> NewMemory:
        """``item`` validated (``index``: its place in a batch, named in errors): a stream checks
        each item as it arrives, before holding the next."""
        p = f"requests[{index}]." if batch else ""
        s = self._settings
        if item.id and item.request_id:
            raise InvalidArgument(f"{p}request_id", "may not be given together with id")
        vec = None
        if item.vector is not None and len(item.vector) > 0:
            vec = check.vector(item.vector, self._store.dimension, f"{p}vector")
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
            memory_type=memory_types.checked(item.memory_type, f"{p}memory_type"),
        )

    def consolidate(
        self, tenant: str, dry_run: bool = False
    ) -> tuple[list[tuple[str, list[str]]], int]:
        return consolidate(self._store, self._placement, self._repeats, self._retrieval,
                           self._relations, self._fn, self._zones, self._clock,
                           self._overlay_pending, tenant, dry_run)
