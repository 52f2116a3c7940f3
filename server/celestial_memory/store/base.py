"""The one small interface every storage backend implements.

Every call is scoped to one tenant, and every call that touches many memories is one batched
round trip (or an in-process batch for the embedded store). The scenario suite in
``tests/scenarios`` runs against every backend.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt
from celestial_memory.domain.models import HybridQuery, Memory, MemoryFilter, Vector, ZoneEvent
from celestial_memory.domain.zones import Zone
from celestial_memory.store.payload import Condition


@dataclass(slots=True)
class Candidates:
    """A recall's candidates: unique ids in zone order, the zone each was first found in, and
    their exact scores by each of SIGNALS (rows follow ``ids``)."""

    ids: list[str]
    zones: list[int]
    signals: npt.NDArray[np.float64]


class MemoryStore(Protocol):
    backend_name: str
    dimension: int

    def upsert(self, memories: Sequence[Memory]) -> None:
        """Insert or replace memories; each must carry its vector."""
        ...

    def get(
        self, tenant: str, ids: Sequence[str], with_vectors: bool = False
    ) -> dict[str, Memory]:
        """The memories of ``tenant`` among ``ids`` (missing ones are absent)."""
        ...

    def owners(self, ids: Sequence[str]) -> dict[str, str]:
        """The tenant of each id that exists, whatever its tenant: ids are global, so a write
        with a caller's id must not take another tenant's point."""
        ...

    def set_fields(self, tenant: str, updates: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """Overwrite payload fields of many memories in one batch: (id, {field: value})."""
        ...

    def delete(self, tenant: str, ids: Sequence[str]) -> int:
        """Delete memories of ``tenant``; returns how many existed."""
        ...

    def delete_by_filter(self, tenant: str, flt: MemoryFilter) -> int:
        ...

    def search_zones(
        self, tenant: str, query: HybridQuery, zones: Sequence[Zone], flt: MemoryFilter, limit: int
    ) -> list[list[str]]:
        """Candidate ids per zone, best first: one hybrid query (dense and keyword prefetches
        fused by RRF) per zone, all sent as one batch."""
        ...

    def signal_scores(
        self, tenant: str, query: HybridQuery, ids: Sequence[str]
    ) -> npt.NDArray[np.float64]:
        """Exact score of each memory by each of SIGNALS (rows follow ``ids``; 0 where a memory
        has no matching term), in one batch."""
        ...

    def candidates(
        self, tenant: str, query: HybridQuery, zones: Sequence[Zone], flt: MemoryFilter, limit: int
    ) -> Candidates:
        """``search_zones``, then ``signal_scores`` over the union: a recall's two round trips
        (``candidates_of`` composes them; a backend may do it with less conversion)."""
        ...

    def similarities(self, tenant: str, vector: Vector, ids: Sequence[str]) -> dict[str, float]:
        """Cosine similarity of ``vector`` to each of ``ids``, computed by the engine."""
        ...

    def count_by_zone(self, tenant: str) -> dict[Zone, int]:
        ...

    def tenants(self) -> list[str]:
        """Every tenant that has at least one memory."""
        ...

    def scan(
        self, tenant: str, flt: MemoryFilter, page_size: int = 1024
    ) -> Iterator[list[Memory]]:
        """Every matching memory of ``tenant`` (without vectors), page by page."""
        ...

    # -- batch work for the rebalancer: conditions are payload.Condition, ANDed with the tenant

    def recent(self, tenant: str, flt: MemoryFilter, limit: int) -> list[Memory]:
        """The newest ``limit`` memories matching ``flt``, newest first (order_by on the
        created_at range index)."""
        ...

    def export_pages(
        self, tenant: str, after_id: str = "", page_size: int = 512
    ) -> Iterator[list[Memory]]:
        """Every memory of a tenant in id order, after ``after_id``, with ``vector`` and
        ``index.context_dense`` set (keyword vectors are rebuilt from the text on import)."""
        ...

    def count_where(self, tenant: str, conds: Sequence[Condition]) -> int:
        ...

    def set_where(self, tenant: str, conds: Sequence[Condition], fields: Mapping[str, Any]) -> None:
        """Set the same fields on every matching memory, in one operation."""
        ...

    def set_same(self, tenant: str, ids: Sequence[str], fields: Mapping[str, Any]) -> None:
        """Set the same fields on many memories, in one operation. ``ids`` must come from a read
        scoped to ``tenant`` (the rebalancer's own scans): they are written by id, the fastest
        path, without the tenant filter that request-facing writes carry."""
        ...

    def scan_fields(
        self, tenant: str, fields: Sequence[str], conds: Sequence[Condition] = (),
        page_size: int = 20_000,
    ) -> Iterator[list[tuple[str, dict[str, Any]]]]:
        """(id, payload subset) of every matching memory, page by page."""
        ...

    # -- the ledger (append-only) and the rebalance lease, kept beside the memories

    def append_events(self, events: Sequence[ZoneEvent]) -> None:
        """Write events; an event id already present is left as it is (idempotent)."""
        ...

    def read_events(
        self, tenant: str, since: float | None, limit: int, memory_id: str = ""
    ) -> list[ZoneEvent]:
        """Events of ``tenant`` at or after ``since``, oldest first."""
        ...

    def acquire_lease(self, name: str, holder: str, now: float, ttl: float) -> str:
        """Take or renew the lease ``name`` unless another holder's is unexpired; returns the
        holder after the attempt (``holder`` itself on success)."""
        ...

    def release_lease(self, name: str, holder: str) -> None:
        ...

    def read_marker(self, name: str) -> float | None:
        """A named number kept beside the memories (e.g. when a tenant was last rebalanced)."""
        ...

    def write_marker(self, name: str, value: float) -> None:
        ...

    def optimize(self, min_new: int = 1000) -> bool:
        """Build the vector indexes where the backend needs to be told and at least ``min_new``
        points were written since the last build; True if it built."""
        ...

    def flush(self) -> None:
        ...

    def close(self) -> None:
        ...


def candidates_of(
    store: MemoryStore, tenant: str, query: HybridQuery, zones: Sequence[Zone],
    flt: MemoryFilter, limit: int,
) -> Candidates:
    """``MemoryStore.candidates`` from the store's own ``search_zones`` and ``signal_scores``."""
    first = first_zones(zones, store.search_zones(tenant, query, zones, flt, limit))
    ids = list(first)
    return Candidates(ids, list(first.values()), store.signal_scores(tenant, query, ids))


K = TypeVar("K", bound=Hashable)


def first_zones(zones: Sequence[Zone], per_zone: Sequence[Sequence[K]]) -> dict[K, int]:
    """Each candidate (an id, or a backend's own key for it) and the first zone it was found
    in, in zone order."""
    first: dict[K, int] = {}
    for zone, keys in zip(zones, per_zone, strict=True):
        for k in keys:
            first.setdefault(k, int(zone))
    return first
