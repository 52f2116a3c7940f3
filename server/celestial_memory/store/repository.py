"""The memory repository: what the service and the rebalancer ask of storage, written once over
either engine (store/engine.py).

It owns tenant scoping (every read and every field update carries the tenant; ids are global and
an upsert replaces a point whatever its tenant, so callers check ``owners`` before writing a
caller's id, and new memories are written insert-only), the payload layout (store/payload.py),
recall candidates, pages of lists and exports, the ledger, the rebalance lease and markers.
Every call that touches many memories is one batched engine call. The scenario and congruence
suites in ``tests/scenarios`` run it against every engine.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
from celestial_memory.domain.models import HybridQuery, Memory, MemoryFilter, Sparse, Vector
from celestial_memory.domain.selection import Members, Selection
from celestial_memory.domain.zones import Zone
from celestial_memory.errors import NotFound
from celestial_memory.store.engine import LEDGER, MEMORIES, Engine, Hit, Point
from celestial_memory.store.graph_store import GraphStore
from celestial_memory.store.ledger_records import LedgerRecords
from celestial_memory.store.operations_store import OperationsStore
from celestial_memory.store.pages import readable
from celestial_memory.store.payload import (
    ARCHIVE_ZONE,
    DENSE,
    MEMBER_FIELDS,
    SIGNALS,
    AnyOf,
    Condition,
    Eq,
    conditions,
    ledger_conditions,
    members,
    payload_fields,
    search_vectors,
    selection_conditions,
    to_payload,
)
from celestial_memory.store.ranking_facts import RankingFacts
from celestial_memory.store.understanding_store import UnderstandingStore

log = logging.getLogger(__name__)


@dataclass(slots=True)
class Candidates:
    """A recall's candidates: unique ids in zone order, the zone each was first found in,
    their exact scores by each of SIGNALS (rows follow ``ids``) and, when asked about some
    entities, which of them each mentions."""

    ids: list[str]
    zones: list[int]
    signals: npt.NDArray[np.float64]
    mentions: list[list[str]] | None = None

    def head(self, n: int) -> Candidates:
        """The first ``n`` candidates."""
        return Candidates(self.ids[:n], self.zones[:n], self.signals[:n],
                          None if self.mentions is None else self.mentions[:n])

    def joined(self, other: Candidates) -> Candidates:
        mentions = None
        if self.mentions is not None or other.mentions is not None:
            mentions = ((self.mentions or [[] for _ in self.ids])
                        + (other.mentions or [[] for _ in other.ids]))
        return Candidates(self.ids + other.ids, self.zones + other.zones,
                          np.concatenate([self.signals.reshape(-1, len(SIGNALS)),
                                          other.signals.reshape(-1, len(SIGNALS))]), mentions)


def first_zones(
    zones: Sequence[Zone], per_zone: Sequence[Sequence[Hit]]
) -> dict[Hashable, tuple[int, float]]:
    """Each candidate key, the first zone it was found in (in zone order) and its score."""
    first: dict[Hashable, tuple[int, float]] = {}
    for zone, hits in zip(zones, per_zone, strict=True):
        for k, score in hits:
            first.setdefault(k, (int(zone), score))
    return first


def _settled(signals: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Engine scores with what was not scored settled: a memory stored without a contextual
    vector (its context vector would equal its content vector, payload.search_vectors) scores
    its content cosine there; anything else not scored scores 0."""
    if len(signals):
        signals[:, 1] = np.where(np.isnan(signals[:, 1]), signals[:, 0], signals[:, 1])
    return np.nan_to_num(signals, nan=0.0)


class MemoryRepository(LedgerRecords):
    """Memories, recall candidates and selections here; pages of lists and exports
    (store/pages.py) and the ledger, leases and markers (store/ledger_records.py) as mixins
    over the same engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.backend_name = engine.name
        self.dimension = engine.dimension
        self.graph = GraphStore(engine)  # relations and entities (graph/)
        self.understanding = UnderstandingStore(engine)  # the model's queue (understanding/)
        self.operations = OperationsStore(engine)  # long-running operations (reflection/)
        self.ranking_facts = RankingFacts(engine)  # what the learned ranker reads (ranking/)

    # -- memories ----------------------------------------------------------------------------

    def upsert(
        self, memories: Sequence[Memory], insert_only: bool = False, tenant: str | None = None
    ) -> None:
        """Insert or replace memories (``insert_only``: an id that exists is left as it is;
        ``tenant``: an existing point is replaced only if it is that tenant's); each must carry
        its vector and index vectors."""
        self.engine.upsert(MEMORIES, [Point(m.id, search_vectors(m), to_payload(m))
                                      for m in memories], insert_only=insert_only,
                           only_if=[Eq("tenant", tenant)] if tenant is not None else ())

    def get_one(self, tenant: str, memory_id: str) -> Memory:
        """The memory ``memory_id`` of ``tenant``, or NotFound."""
        found = self.get(tenant, [memory_id])
        if memory_id not in found:
            raise NotFound(f"memory {memory_id} not found")
        return found[memory_id]

    def get(
        self, tenant: str, ids: Sequence[str], with_vectors: bool = False
    ) -> dict[str, Memory]:
        """The memories of ``tenant`` among ``ids`` (missing and foreign ones are absent)."""
        records = self.engine.retrieve(MEMORIES, ids, vectors=[DENSE] if with_vectors else ())
        mine = {r.id: r for r in records if r.payload.get("tenant") == tenant}
        out = {m.id: m for m in readable(mine.values())}
        for mid, m in out.items():
            if DENSE in mine[mid].vectors:
                m.vector = np.asarray(mine[mid].vectors[DENSE], dtype=np.float32)
        return out

    def merged_holders(
        self, tenant: str, ids: Sequence[str], live_only: bool = True
    ) -> dict[str, Memory]:
        """For each of ``ids`` that was merged into a memory of ``tenant`` as a repeat (a
        request_id's id, or a consolidated memory's), that memory; live ones only unless not
        ``live_only``."""
        if not ids:
            return {}
        records, _ = self.engine.scroll(
            MEMORIES, conditions(tenant, extra=[AnyOf("repeat_ids", tuple(ids))],
                                 archive=False if live_only else None),
            len(ids), None)
        out: dict[str, Memory] = {}
        for m in readable(records):
            for p in m.merged:
                if p.id in ids:
                    out[p.id] = m
        return out

    def live_by_hash(self, tenant: str, hashes: Sequence[str]) -> dict[str, str]:
        """A live memory of ``tenant`` for each content hash that one has (the indexed
        ``content_hash``)."""
        if not hashes:
            return {}
        records, _ = self.engine.scroll(
            MEMORIES, conditions(tenant, extra=[AnyOf("content_hash", tuple(set(hashes)))],
                                 archive=False), 4 * len(hashes), None, payload=["content_hash"])
        out: dict[str, str] = {}
        for r in records:
            out.setdefault(str(r.payload.get("content_hash", "")), r.id)
        return out

    def owners(self, ids: Sequence[str]) -> dict[str, str]:
        """The tenant of each id that exists, whatever its tenant."""
        records = self.engine.retrieve(MEMORIES, ids, payload=["tenant"])
        return {r.id: str(r.payload.get("tenant", "")) for r in records}

    def save(self, tenant: str, memories: Sequence[Memory], attributes: Sequence[str],
             archived_too: bool = False) -> None:
        """Write the named attributes of memories of ``tenant`` (models.REINFORCED, EDITED);
        a memory of another tenant, or one in the archive (unless ``archived_too``: a restore),
        is left alone."""
        self.write_fields(tenant, [(m.id, payload_fields(m, attributes)) for m in memories],
                          archived_too)

    def write_fields(self, tenant: str, updates: Sequence[tuple[str, dict[str, Any]]],
                     archived_too: bool = False) -> None:
        """Write payload fields of memories of ``tenant`` by id (a journal's, or ``save``'s); an
        id that is gone, another tenant's or archived (unless ``archived_too``) is left alone:
        a reinforcement written behind never brings back what forgetting archived meanwhile."""
        self.engine.set_payloads(MEMORIES, updates,
                                 conditions(tenant, archive=None if archived_too else False))

    def archive(self, ids: Sequence[str], at: float) -> None:
        """Move memories (ids from a read scoped to their tenant, the rebalancer's) out of the
        zones into the archive: one payload write, points and vectors kept."""
        if ids:
            self.engine.set_payload(MEMORIES, {"zone": ARCHIVE_ZONE, "archived_at": at}, ids=ids)

    def set_zone(
        self, tenant: str, zone: Zone, *, ids: Sequence[str] = (), where: Selection | None = None
    ) -> None:
        """Move memories to ``zone``: those matching ``where``, or ``ids``, which must come from
        a read scoped to ``tenant`` (the rebalancer's own); they are written by id, the fastest
        path, without the tenant filter that request-facing writes carry."""
        if where is not None:
            self.engine.set_payload(MEMORIES, {"zone": int(zone)},
                                    where=selection_conditions(tenant, where))
        elif ids:
            self.engine.set_payload(MEMORIES, {"zone": int(zone)}, ids=ids)

    def delete(self, tenant: str, ids: Sequence[str]) -> int:
        """Delete memories of ``tenant`` (live or archived; points, vectors and all); returns
        how many existed. Relations other memories hold to them go first."""
        if not ids:
            return 0
        self.graph.unlink(tenant, ids)
        return self._delete(conditions(tenant, ids=ids))

    def delete_by_filter(self, tenant: str, flt: MemoryFilter) -> int:
        return self.delete(tenant, list(self.matching(tenant, flt)))

    def matching(self, tenant: str, flt: MemoryFilter | None = None,
                 ids: Sequence[str] = (), archive: bool | None = None) -> dict[str, Zone]:
        """The ids of ``tenant`` (live or archived; ``archive`` as ``conditions`` takes it)
        that ``flt`` or ``ids`` name, with the zone each is in (an archived one left the
        cloud)."""
        where = conditions(tenant, flt, ids=ids, archive=archive)
        out: dict[str, Zone] = {}
        offset: str | None = None
        while True:
            records, offset = self.engine.scroll(MEMORIES, where, 20_000, offset, payload=["zone"])
            for r in records:
                z = int(r.payload.get("zone", Zone.CLOUD))
                out[str(r.id)] = Zone.CLOUD if z == ARCHIVE_ZONE else Zone(z)
            if offset is None:
                return out

    def _delete(self, where: Sequence[Condition]) -> int:
        n = self.engine.count(MEMORIES, where)
        self.engine.delete(MEMORIES, where)
        return n

    def erase_from_ledger(self, tenant: str, ids: Sequence[str]) -> None:
        """Blank the content hash of every event of these memories (deleted ones: erasure)."""
        if ids:  # one filtered write for all of them
            self.engine.set_payload(LEDGER, {"content_hash": ""}, where=[
                Eq("tenant", tenant), *ledger_conditions("event", None),
                AnyOf("memory_id", tuple(ids))])

    # -- recall ------------------------------------------------------------------------------

    def search_zones(
        self, tenant: str, query: HybridQuery, zones: Sequence[Zone], flt: MemoryFilter, limit: int
    ) -> list[list[str]]:
        """Candidate ids per zone, best first, in one batch."""
        return [[str(k) for k, _ in hits] for hits in self._search(tenant, query, zones, flt, limit)]

    def _search(
        self, tenant: str, query: HybridQuery, zones: Sequence[Zone], flt: MemoryFilter, limit: int
    ) -> list[list[Hit]]:
        filters = [conditions(tenant, replace(flt, zones=[zone])) for zone in zones]
        return self.engine.fused_search(query, filters, limit)

    def signal_scores(
        self, tenant: str, query: HybridQuery, ids: Sequence[str]
    ) -> npt.NDArray[np.float64]:
        """Exact score of each memory by each of SIGNALS (0 for a foreign or missing id)."""
        return _settled(self.engine.signal_scores(query, [Eq("tenant", tenant)],
                                                  self.engine.keys(ids)).scores)

    def scored(self, tenant: str, query: HybridQuery, ids: Sequence[str],
               zones: Sequence[int], entities: Sequence[str] = ()) -> Candidates:
        """``ids`` as candidates: their exact scores and which of ``entities`` they mention."""
        return self._rescored(tenant, query, dict(zip(self.engine.keys(ids),
                                                      ((z, 0.0) for z in zones), strict=True)),
                              entities, keep_search_scores=False)

    def candidates(
        self, tenant: str, query: HybridQuery, zones: Sequence[Zone], flt: MemoryFilter,
        limit: int, entities: Sequence[str] = (), archive: bool = False,
    ) -> Candidates:
        """A recall's two batched round trips: the zone searches, then the exact scores of
        their union (``_rescored``) and, in the same batch, which of ``entities`` each
        mentions. ``archive``: the archive is searched in the same batch and its candidates
        follow the zones', with ARCHIVE_ZONE as their zone."""
        filters = [conditions(tenant, replace(flt, zones=[zone])) for zone in zones]
        if archive:
            filters.append(conditions(tenant, replace(flt, zones=[]), archive=True))
        hits = self.engine.fused_search(query, filters, limit)
        first = first_zones(zones, hits[:len(zones)])
        if archive:
            for k, score in hits[-1]:
                first.setdefault(k, (ARCHIVE_ZONE, score))
        return self._rescored(tenant, query, first, entities)

    def _rescored(
        self, tenant: str, query: HybridQuery, first: dict[Hashable, tuple[int, float]],
        entities: Sequence[str] = (), keep_search_scores: bool = True,
    ) -> Candidates:
        """Candidates (engine key -> zone, search score) with their exact scores: one batch.
        The engine's own keys go in unconverted. A query without keywords has its content
        cosines from the search already (``fused_search``), so only the contextual vector is
        rescored."""
        keys = list(first)
        where = [Eq("tenant", tenant)]
        asked = [Eq("entities", e) for e in entities]
        if query.keywords.is_empty() and keep_search_scores:
            got = self.engine.signal_scores(query, where, keys, columns=(1,), matching=asked)
            got.scores[:, 0] = [score for _, score in first.values()]
        else:
            got = self.engine.signal_scores(query, where, keys, matching=asked)
        ids = [str(k) for k in keys]
        return Candidates(ids, [z for z, _ in first.values()], _settled(got.scores),
                          [[e for e, m in zip(entities, got.matches, strict=True) if i in m]
                           for i in ids] if entities else None)

    def nearest_live(
        self, tenant: str, vectors: Sequence[Vector], limit: int
    ) -> list[list[tuple[str, float]]]:
        """For each vector, the live memories of ``tenant`` nearest by content, with their
        cosines, best first."""
        hits = self.engine.nearest(vectors, conditions(tenant, archive=False), limit)
        return [[(str(k), float(score)) for k, score in h] for h in hits]

    def contents(self, tenant: str, ids: Sequence[str]) -> dict[str, str]:
        """The content of each live memory of ``tenant`` among ``ids``."""
        records = self.engine.retrieve(MEMORIES, ids, payload=["tenant", "content", "zone"])
        return {str(r.id): str(r.payload["content"]) for r in records
                if r.payload.get("tenant") == tenant and r.payload.get("zone") != ARCHIVE_ZONE}

    def similarities(self, tenant: str, vector: Vector, ids: Sequence[str]) -> dict[str, float]:
        """Cosine similarity of ``vector`` to each of ``ids``, computed by the engine."""
        # The content-vector column of the exact rescoring, without keywords.
        scores = self.signal_scores(tenant, HybridQuery(vector, Sparse([], [])), ids)
        return {mid: float(s) for mid, s in zip(ids, scores[:, 0], strict=True) if s != 0.0}

    # -- reads -------------------------------------------------------------------------------

    def count_by_zone(self, tenant: str) -> dict[Zone, int]:
        counts = dict.fromkeys(Zone, 0)
        for value, n in self.engine.facet(MEMORIES, "zone", conditions(tenant, archive=False),
                                          len(Zone)):
            counts[Zone(int(value))] = n
        return counts

    def count_archived(self, tenant: str) -> int:
        return self.engine.count(MEMORIES, conditions(tenant, archive=True))

    def tenants(self) -> list[str]:
        """Every tenant that has at least one memory."""
        return sorted(str(v) for v, _ in self.engine.facet(MEMORIES, "tenant", [], 1_000_000))

    # -- selections, for the rebalancer ----------------------------------------------------

    def count(self, tenant: str, sel: Selection) -> int:
        return self.engine.count(MEMORIES, selection_conditions(tenant, sel))

    def members(self, tenant: str, sel: Selection, page_size: int = 20_000) -> Members:
        """The state of every selected memory, read page by page into columns."""
        where = selection_conditions(tenant, sel)
        rows: list[tuple[str, dict[str, object]]] = []
        offset: str | None = None
        while True:
            records, offset = self.engine.scroll(MEMORIES, where, page_size, offset,
                                                 payload=MEMBER_FIELDS)
            rows += [(r.id, r.payload) for r in records]
            if offset is None:
                return members(rows)

    # -- engine upkeep -----------------------------------------------------------------------

    def optimize(self, min_new: int = 1000) -> bool:
        return self.engine.optimize(min_new)

    def available(self) -> bool:
        return self.engine.available()

    def flush(self) -> None:
        self.engine.flush()

    def close(self) -> None:
        self.engine.close()
