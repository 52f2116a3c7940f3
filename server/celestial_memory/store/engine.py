"""The primitives the two Qdrant SDKs really differ in: the engine interface.

An engine holds two parts, the memories (four named vectors per point) and the ledger (events,
the rebalance lease and markers; no vectors), and translates backend-neutral conditions
(``payload.Condition``) and hybrid queries into its SDK's calls. It knows nothing of tenants,
zones or the memory function: ``repository.MemoryRepository`` is written once above it.

Two engines implement it: ``EdgeEngine`` (Qdrant Edge in-process, the default) and
``QdrantEngine`` (qdrant-client: a server, a cluster, Qdrant Cloud, or ``:memory:``).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt
from celestial_memory.domain.models import HybridQuery, Sparse, Vector
from celestial_memory.store.payload import Condition

Part = Literal["memories", "ledger"]
MEMORIES: Part = "memories"
LEDGER: Part = "ledger"


@dataclass(slots=True)
class Point:
    """A point to write: its id, named vectors (dense arrays or sparse keyword vectors; none in
    the ledger) and payload."""

    id: str
    vectors: Mapping[str, Vector | Sparse]
    payload: dict[str, Any]


@dataclass(slots=True)
class Record:
    """A point as read back: payload and the dense vectors asked for."""

    id: str
    payload: dict[str, Any]
    vectors: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Order:
    key: str
    descending: bool = False


class Engine(Protocol):
    name: str  # the backend's name in Stats: edge, qdrant-local or qdrant-remote
    dimension: int

    def upsert(
        self, part: Part, points: Sequence[Point], *, insert_only: bool = False,
        only_if: Sequence[Condition] = (),
    ) -> None:
        """Write points. ``insert_only`` keeps a point that exists; ``only_if`` replaces an
        existing point only when it matches (the lease's compare-and-set)."""
        ...

    def retrieve(
        self, part: Part, ids: Sequence[str], payload: bool | Sequence[str] = True,
        vectors: Sequence[str] = (),
    ) -> list[Record]:
        """The points among ``ids`` that exist, with all or some payload fields."""
        ...

    def set_payload(
        self, part: Part, fields: Mapping[str, Any], *, ids: Sequence[str] = (),
        where: Sequence[Condition] = (),
    ) -> None:
        """Set the same fields on the points named by ``ids`` or matching ``where`` (one)."""
        ...

    def set_payloads(
        self, part: Part, updates: Sequence[tuple[str, Mapping[str, Any]]],
        where: Sequence[Condition],
    ) -> None:
        """Set different fields on many points, each only if it matches ``where``."""
        ...

    def delete(self, part: Part, where: Sequence[Condition]) -> None:
        ...

    def count(self, part: Part, where: Sequence[Condition]) -> int:
        ...

    def scroll(
        self, part: Part, where: Sequence[Condition], limit: int, offset: str | None = None,
        payload: bool | Sequence[str] = True, vectors: Sequence[str] = (),
        order: Order | None = None,
    ) -> tuple[list[Record], str | None]:
        """A page in id order from ``offset`` (inclusive), and the next page's offset (None at
        the end); or, with ``order``, the first ``limit`` by that indexed field."""
        ...

    def facet(
        self, part: Part, key: str, where: Sequence[Condition], limit: int
    ) -> list[tuple[Any, int]]:
        """Each value of ``key`` among matching points and how many have it (exact)."""
        ...

    def fused_search(
        self, query: HybridQuery, filters: Sequence[Sequence[Condition]], limit: int
    ) -> list[list[Hashable]]:
        """One hybrid query per filter, all in one batch: the content vector and both keyword
        vectors as prefetches, fused by RRF. Returns the engine's keys for the hits, best first
        (``str(key)`` is the id; ``signal_scores`` takes them back without conversion)."""
        ...

    def signal_scores(
        self, query: HybridQuery, where: Sequence[Condition], keys: Sequence[Hashable]
    ) -> npt.NDArray[np.float64]:
        """Exact score of each point by each of SIGNALS (rows follow ``keys``, 0 where a point
        has no matching term or fails ``where``), in one batch."""
        ...

    def similarities(
        self, vector: Vector, where: Sequence[Condition], limit: int
    ) -> dict[str, float]:
        """Exact cosine of ``vector`` to the content vector of each matching point."""
        ...

    def keys(self, ids: Sequence[str]) -> list[Hashable]:
        """Ids as ``signal_scores`` takes them."""
        ...

    def optimize(self, min_new: int = 1000) -> bool:
        """Build the vector indexes where the engine must be told to and at least ``min_new``
        points were written since the last build; True if it built."""
        ...

    def flush(self) -> None:
        ...

    def close(self) -> None:
        ...
