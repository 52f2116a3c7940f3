"""Recall (Core to Cloud, with reinforcement) and the context block built from it.

The candidates and their relevance come from recall/candidates.py; here they are put in zone
order behind the gate (recall/retrieval.py), read, and reinforced under the tenant's lock
(zones/placement.py), so that a reinforcement not yet written is counted."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from celestial_memory.clock import Clock
from celestial_memory.config import Settings
from celestial_memory.domain import validation as check
from celestial_memory.domain.models import Memory, RecallResult
from celestial_memory.domain.paging import ENVELOPE_BYTES
from celestial_memory.domain.reinforcing import reinforce
from celestial_memory.domain.requests import RecallQuery
from celestial_memory.domain.scoring import MemoryFunction
from celestial_memory.domain.zones import Zone, ZoneTable
from celestial_memory.encoding.embedding import Embedder
from celestial_memory.errors import InvalidArgument
from celestial_memory.memory.cancellation import NEVER, Cancellation
from celestial_memory.memory.context_neighbours import with_neighbours
from celestial_memory.memory.prompt_context import Assembler, ContextBlock, TokenCounter
from celestial_memory.observability import metrics
from celestial_memory.recall.candidates import RecallCandidates
from celestial_memory.recall.retrieval import zone_order
from celestial_memory.store.payload import ARCHIVE_ZONE
from celestial_memory.store.repository import MemoryRepository
from celestial_memory.zones.placement import Placement


class Recalling:
    def __init__(self, settings: Settings, store: MemoryRepository, embedder: Embedder,
                 candidates: RecallCandidates, fn: MemoryFunction, zones: ZoneTable,
                 clock: Clock, placement: Placement, tokens: TokenCounter,
                 skipped_found: Callable[[str, list[RecallResult]], None]) -> None:
        self.settings, self.store, self.embedder = settings, store, embedder
        self._candidates, self.fn, self.zones, self.clock = candidates, fn, zones, clock
        self.placement, self.tokens = placement, tokens
        # Told of a recall that returned archived memories (the turn policy's skipped turns).
        self._skipped_found = skipped_found

    def recall(
        self, tenant: str, q: RecallQuery, cancel: Cancellation = NEVER
    ) -> list[RecallResult]:
        """Hybrid search in every zone, rescored, in zone order behind the gate (recall/retrieval.py);
        reinforces what it returns unless asked not to, or unless ``cancel`` says the caller is
        gone (nothing is reinforced for an answer no one receives)."""
        s = self.settings
        limit = check.limit(q.limit, s)
        flt = check.memory_filter(q.filter, s)
        gate = check.unit_interval(q.min_relevance, "min_relevance")
        gate = s.min_relevance if gate is None else gate
        stages = metrics.Stages()
        if q.query_vector is not None and len(q.query_vector) > 0:
            qvec = check.vector(q.query_vector, self.store.dimension, "query_vector")
            text = check.content(q.query, s, "query") if q.query.strip() else ""
        else:
            text = check.content(q.query, s, "query")
            with stages("encode"):
                qvec = self.embedder.embed([text])[0]
        context_text = check.content(q.context, s, "context") if q.context.strip() else ""
        got = self._candidates.find(tenant, q, text, qvec, flt, gate, limit, stages)
        cands, relevance, via = got.candidates, got.relevance, got.via
        if not cands.ids:
            stages.done()
            return []
        ids, signals = cands.ids, cands.signals
        zone_of = dict(zip(ids, cands.zones, strict=True))
        with stages("encode"):
            cvec = self.embedder.embed([context_text])[0] if context_text else None

        with self.placement.locked(tenant):
            pending = self.placement.pending(tenant, ids)
            for mid, p in pending.items():  # a reinforcement not written yet may have moved it
                zone_of[mid] = min(zone_of[mid], int(p.zone))
            with stages("rescoring"):
                ranked = zone_order(
                    ids, [zone_of[mid] for mid in ids], relevance, gate, s.zone_margin,
                    by_zone=not q.ignore_zones, key=got.key,
                )[:limit]
            with stages("payloads"):
                # Payloads only for what is returned (one read), not for every candidate (the
                # ranker read only the few fields its features use).
                found = self.store.get(tenant, [ids[r.index] for r in ranked])
                ranked = [r for r in ranked if ids[r.index] in found]  # deleted meanwhile
                if cvec is not None:
                    context = self.store.similarities(tenant, cvec,
                                                      [ids[r.index] for r in ranked])
                else:  # the query is the context: C = its cosine to the content
                    context = {ids[r.index]: float(signals[r.index, 0]) for r in ranked}
            mems = [found[ids[r.index]] for r in ranked]
            # Found in the archive, or archived since the search: returned as it is (a restore
            # brings it back), never reinforced. One restored since is still reported as found.
            archived = [zone_of[m.id] == ARCHIVE_ZONE or m.archived for m in mems]
            for m, out in zip(mems, archived, strict=True):
                if waiting := pending.get(m.id):  # count from the pending reinforcement
                    m.recall_count = waiting.recall_count
                    m.last_recalled_at = waiting.last_recalled_at
                    m.context_score = waiting.context_score
                if not out:
                    m.zone = Zone(zone_of[m.id])
            found_in = [m.zone for m in mems]
            keep = list(range(len(mems)))
            if q.select is not None:
                keep = q.select(mems, [None if a else z for z, a in zip(found_in, archived,
                                                                        strict=True)])
            if q.fit is not None:  # only what the answer can carry is returned and reinforced
                keep = keep[:q.fit([mems[i] for i in keep])]
            mems, ranked = [mems[i] for i in keep], [ranked[i] for i in keep]
            archived, found_in = [archived[i] for i in keep], [found_in[i] for i in keep]
            cs = [max(context.get(m.id, 0.0), 0.0) for m in mems]
            if q.reinforce:
                cancel.check("the recall")
            with stages("reinforcement"):
                live = [i for i, out in enumerate(archived) if not out]
                at = self.clock.now()  # one time for the whole answer (its memories' terms too)
                breakdowns = reinforce(self.fn, self.zones, mems, cs, at, q.reinforce, live)
                if q.reinforce and live:
                    # Capacity follows off the recall's path (zones/placement.py).
                    self.placement.reinforce(tenant, [mems[i] for i in live])
        stages.done()
        results = [RecallResult(m, z, r.relevance, b, archived=a, via=via.get(m.id), at=at)
                   for m, z, r, b, a
                   in zip(mems, found_in, ranked, breakdowns, archived, strict=True)]
        if any(archived):  # a turn the turn policy skipped, needed after all
            self._skipped_found(tenant, results)
        return results

    def context_results(self, tenant: str, q: RecallQuery, max_tokens: int,
                        cancel: Cancellation = NEVER, neighbours: bool = False,
                        ) -> tuple[ContextBlock, list[RecallResult]]:
        """The recall's memories as a block for a prompt within ``max_tokens``
        (memory/prompt_context.py); only the memories the block holds are reinforced. ``q.limit`` is
        how many to consider (0: 30). ``neighbours``: the memories related to each recalled one
        (one step) follow it in the ranking the block is filled from, as far as the budget
        allows; they are shown, not reinforced."""
        if not 0 < max_tokens <= self.settings.max_prompt_tokens:
            raise InvalidArgument("max_tokens",
                                  f"must be 1 to {self.settings.max_prompt_tokens}, got {max_tokens}")
        # The block shares its answer with the ids it lists (each memory's once, 38 bytes).
        s = self.settings
        room = s.max_message_bytes - ENVELOPE_BYTES - 40 * s.max_recall_limit
        assembler = Assembler(max_tokens, self.tokens, room, s.summary_max_chars)
        select = assembler.select
        if neighbours:
            def select(mems: Sequence[Memory], zones: Sequence[Zone | None]) -> list[int]:
                return with_neighbours(self.store, tenant, assembler, mems, zones)
        got = self.recall(tenant, replace(q, select=select,
                                          limit=q.limit or min(30, s.max_recall_limit)), cancel)
        return assembler.block, got

