"""Consolidate: the repeats among memories stored before merged into their oldest
(memory/repeats.py finds and folds them; docs/design.md, "Repeats")."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import cast

from celestial_memory.clock import Clock
from celestial_memory.domain.models import Memory, Vector, ZoneEvent
from celestial_memory.domain.reinforcing import reinforce
from celestial_memory.domain.scoring import MemoryFunction
from celestial_memory.domain.zones import ZoneTable
from celestial_memory.graph.relations import Relations
from celestial_memory.memory.repeats import Repeats
from celestial_memory.recall.retrieval import Retrieval
from celestial_memory.store.repository import MemoryRepository
from celestial_memory.zones.placement import Placement
from celestial_memory.zones.rebalancer import event_id


def consolidate(
store: MemoryRepository, placement: Placement, repeats: Repeats, retrieval: Retrieval,
relations: Relations, fn: MemoryFunction, zones: ZoneTable, clock: Clock,
overlay_pending: Callable[[str, Sequence[Memory]], None], tenant: str, dry_run: bool = False,
) -> tuple[list[tuple[str, list[str]]], int]:
    """Merge the repeats among memories stored before (memory/repeats.py ``groups``): each group's
    oldest memory stays, counts each other one as a mention plus its recalls, keeps its
    wording and provenance (id included), importance (the highest), pin and tags; each
    folded one leaves a "merged" ledger event and is deleted. Returns (stays, folded ids)
    per group and how many memories were examined. Holds the tenant's lock throughout (a
    scan of its live memories)."""
    with placement.locked(tenant):
        groups, scanned = repeats.groups(tenant)
        if dry_run or not groups:
            return [(m.id, [o.id for o in os]) for m, os in groups], scanned
        overlay_pending(tenant, [m for t, os in groups for m in (t, *os)])
        now = clock.now()
        merges: list[tuple[Memory, list[Memory]]] = []
        for target, others in groups:
            folded = []
            for o in others:
                if repeats.fold(target, o, o.id) is not None:
                    folded.append(o)
                    repeats.keep(target, o.merged)
            if folded:
                target.recall_count += sum(o.recall_count + 1 for o in folded) - 1
                merges.append((target, folded))
        targets = [t for t, _ in merges]
        if not merges:
            return [], scanned
        reinforce(fn, zones, targets, [t.context_score for t in targets], now,
                  True)
        # Written whole (a target may have taken a repeat's wording): keyword vectors are
        # rebuilt from the text, as an import does, and so are a long one's passages; the read
        # kept the dense ones.
        index = retrieval.index_vectors(
            [t.content for t in targets], [t.context for t in targets],
            [cast(Vector, t.vector) for t in targets], [False] * len(targets),
            [t.index.context_dense if t.index else None for t in targets],
            passages_here=[True] * len(targets))
        for t, ix in zip(targets, index, strict=True):
            t.index = ix
        store.append_events([
            ZoneEvent(event_id(o.id, repr(now), int(o.zone), "merged"), tenant, o.id, o.zone,
                      t.zone, "merged", now, o.content_hash)
            for t, os in merges for o in os])
        # Written before the repeats go: a crash between leaves a repeat twice, not lost.
        store.upsert(targets, tenant=tenant)
        # The repeats' relations move to the memory they went into, then the repeats go.
        relations.relink(tenant, {o.id: t.id for t, os in merges for o in os})
        store.delete(tenant, [o.id for _, os in merges for o in os])
        placement.reinforce(tenant, targets)  # supersedes what was queued
        placement.enforce(tenant, targets, keep_ids={t.id for t in targets})
    return [(m.id, [o.id for o in os]) for m, os in merges], scanned
