"""The primitives the two Qdrant SDKs really differ in: the engine interface.

An engine holds two parts, the memories (four named vectors per point) and the ledger (events,
the rebalance lease and markers; no vectors), and translates backend-neutral conditions
(``payload.Condition``) and hybrid queries into its SDK's calls. It knows nothing of tenants,
zones or the memory function: ``repository.MemoryRepository`` is written once above it.
Implemented by ``EdgeEngine`` (Qdrant Edge in-process, the default) and ``QdrantEngine``
(qdrant-client: a server, a cluster, Qdrant Cloud, or ``:memory:``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt
from celestial_memory.domain.models import HybridQuery, Sparse, Vector
from celestial_memory.store.payload import AnyOf, Between, Condition, Either, Eq, Ids, Neither

Part = Literal["memories", "ledger"]
MEMORIES: Part = "memories"
LEDGER: Part = "ledger"
Payload = bool | Sequence[str]  # all fields, none, or these
Names = Sequence[str]  # point ids, or vector names
Where = Sequence[Condition]  # a conjunction
Fields = Mapping[str, Any]


def valid_ids(ids: Names) -> list[str]:
    """The ids that can name a point (UUIDs): no point is held under any other, so a read of
    one (a relation imported before ids were checked, say) finds nothing rather than failing."""
    out = []
    for i in ids:
        try:
            uuid.UUID(i)
        except (ValueError, AttributeError, TypeError):
            continue
        out.append(i)
    return out


# A search hit: the engine's key and its score.
Hit = tuple[Hashable, float]


@dataclass(frozen=True, slots=True)
class Scored:
    scores: npt.NDArray[np.float64]  # rows: the keys asked; columns: SIGNALS
    matches: list[set[str]]  # per condition asked: str(key) of the points matching it


@dataclass(slots=True)
class Point:
    """A point to write: named vectors (none in the ledger) and payload."""

    id: str
    vectors: Mapping[str, Vector | Sparse]
    payload: dict[str, Any]


@dataclass(slots=True)
class Record:
    """A point as read back: payload and the dense vectors asked for."""

    id: str
    payload: dict[str, Any]
    vectors: dict[str, Any] = field(default_factory=dict)
    # With an ordered scroll: the ordering field's value as the index holds it, exact (Qdrant
    # Edge gives payload floats back within an ulp, which an equality window would miss).
    order_value: float | None = None


Page = tuple[list[Record], str | None]  # records and the next offset


@dataclass(frozen=True, slots=True)
class Order:
    key: str
    descending: bool = False


FILTERS_KEPT = 4096


@dataclass(frozen=True, slots=True)
class FilterTypes:
    """An SDK's filter classes. Both SDKs take the same keyword arguments for these, except
    for ranges (a class each) and id sets (a list or a set): ``has_id`` builds one from ids."""

    filter: Callable[..., Any]
    field: Callable[..., Any]
    match_value: Callable[..., Any]
    match_any: Callable[..., Any]
    range: Callable[..., Any]
    has_id: Callable[[list[Any]], Any]
    # Filters built before, by their conditions: a recall asks for the same tenant and zone
    # filters on every call, and building one took ~10% of a vector recall's samples. Id sets
    # are never kept (they differ each time); the SDKs' filter objects are read, not changed.
    _built: dict[tuple[Condition, ...], Any] = field(default_factory=dict, compare=False,
                                                     repr=False)

    def condition(self, c: Condition) -> Any:
        if isinstance(c, Eq):
            return self.field(key=c.key, match=self.match_value(value=c.value))
        if isinstance(c, AnyOf):
            return self.field(key=c.key, match=self.match_any(any=list(c.values)))
        if isinstance(c, Between):
            return self.field(key=c.key, range=self.range(gte=c.gte, lt=c.lt))
        if isinstance(c, Either):
            return self.filter(should=[self.condition(o) for o in c.options])
        if isinstance(c, Neither):
            return self.filter(must_not=[self.condition(o) for o in c.options])
        try:
            return self.has_id(list(c.ids))
        except ValueError:  # Qdrant Edge refuses an id that is no UUID; it names no point
            return self.has_id(valid_ids(c.ids))

    def of(self, where: Where, keys: Sequence[Hashable] | None = None) -> Any:
        """The conjunction of ``where`` (and of ``keys``, engine keys), None when empty."""
        if keys is None:
            return self.kept(where)
        return self.filter(must=[*(self.condition(c) for c in where), self.has_id(list(keys))])

    def kept(self, where: Where) -> Any:
        """``of(where)``, built once and kept (up to ``FILTERS_KEPT``), unless it names ids."""
        key = tuple(where)
        keep = not any(_names_ids(c) for c in key)
        if keep and (built := self._built.get(key)) is not None:
            return built
        must = [self.condition(c) for c in key]
        built = self.filter(must=must) if must else None
        if keep:
            if len(self._built) >= FILTERS_KEPT:  # filters with times in them are unbounded
                self._built.clear()
            self._built[key] = built
        return built


# Per filter, the most memories a recall's search of passages adds to the candidates: long
# memories are few, and each one found is rescored like any candidate.
PASSAGE_CANDIDATES = 10


def with_passage_hits(fused: Sequence[Sequence[Hit]], found: Sequence[Sequence[Hit]],
                      cosines: bool, limit: int) -> list[list[Hit]]:
    """Each filter's candidates and the long memories its search of passages found. With
    ``cosines`` (a query without keywords: both lists score by cosine) a memory keeps the better
    of its two scores and the best ``limit`` are kept; otherwise (fused ranks, not cosines) the
    passage hits not already there follow the fused ones."""
    out = []
    for hits, extra in zip(fused, found, strict=True):
        if cosines:
            best: dict[Hashable, float] = dict(hits)
            for k, s in extra:
                best[k] = max(best.get(k, s), s)
            out.append(sorted(best.items(), key=lambda h: -h[1])[:limit])
        else:
            seen = {k for k, _ in hits}
            out.append([*hits, *((k, s) for k, s in extra if k not in seen)])
    return out


def fold_passages(scores: npt.NDArray[np.float64], rows: Mapping[Hashable, int],
                  found: Sequence[Hit]) -> None:
    """The content signal (column 0) of each long memory in ``found`` raised to its best
    passage's cosine, in place: the content vector read only the text's beginning."""
    for k, s in found:
        i = rows[k]
        if not s <= scores[i, 0]:  # NaN (not scored) or lower
            scores[i, 0] = s


def _names_ids(c: Condition) -> bool:
    return isinstance(c, Ids) or (isinstance(c, Either) and any(_names_ids(o) for o in c.options))


class Engine(Protocol):
    name: str  # the backend's name in Stats: edge, qdrant-local or qdrant-remote
    dimension: int

    def upsert(self, part: Part, points: Sequence[Point], *, insert_only: bool = False,
               only_if: Where = ()) -> None:
        """``insert_only`` keeps a point that exists; ``only_if`` replaces an existing point
        only when it matches (the lease's compare-and-set)."""

    def retrieve(self, part: Part, ids: Names, payload: Payload = True,
                 vectors: Names = ()) -> list[Record]:
        """The points among ``ids`` that exist."""

    def set_payload(self, part: Part, fields: Fields, *, ids: Names = (),
                    where: Where = ()) -> None:
        """The same fields on the points named by ``ids`` or else matching ``where``."""

    def set_payloads(self, part: Part, updates: Sequence[tuple[str, Fields]],
                     where: Where) -> None:
        """Different fields on many points, each only if it matches ``where``."""

    def delete(self, part: Part, where: Where) -> None: ...

    def count(self, part: Part, where: Where) -> int: ...

    def scroll(self, part: Part, where: Where, limit: int, offset: str | None = None,
               payload: Payload = True, vectors: Names = (), order: Order | None = None) -> Page:
        """A page in id order from ``offset`` (inclusive) and the next offset (None at the
        end); with ``order``, the first ``limit`` by that indexed field."""

    def facet(self, part: Part, key: str, where: Where, limit: int) -> list[tuple[Any, int]]:
        """Each value of ``key`` among matching points and how many have it (exact)."""

    def fused_search(self, query: HybridQuery, filters: Sequence[Where],
                     limit: int) -> list[list[Hit]]:
        """One hybrid query per filter, in one batch: the content vector and both keyword
        vectors as prefetches, fused by RRF; where long memories are held, their passages are
        searched in the same batch too (``with_passage_hits``). Returns engine keys
        (``str(key)`` is the id) with their scores, best first; ``signal_scores`` takes the
        keys back unconverted. A query without keywords has one input, so it is a plain search
        of the content vector and its scores are that vector's exact cosines (a long memory's
        the better of it and its best passage's)."""

    def nearest(self, vectors: Sequence[Vector], where: Where, limit: int) -> list[list[Hit]]:
        """For each vector, the points matching ``where`` nearest by the content vector, with
        their cosines, best first; one batch."""

    def signal_scores(self, query: HybridQuery, where: Where, keys: Sequence[Hashable],
                      columns: Sequence[int] | None = None,
                      matching: Sequence[Condition] = ()) -> Scored:
        """Exact score of each point by each of SIGNALS, in one batch (rows follow ``keys``;
        a long memory's content signal is its best passage's where higher, ``fold_passages``;
        keyword columns only for a keyword query; only ``columns`` when given). NaN where a
        point was not scored: no matching term, no such vector, or it fails ``where``. For each
        of ``matching``, the keys of the points that also match it, in the same batch (the
        payload index answers; no payload is read)."""

    def keys(self, ids: Names) -> list[Hashable]:
        """Ids as ``signal_scores`` takes them."""

    @property
    def passages(self) -> bool:
        """Whether the store keeps long memories' passages (payload.PASSAGES): a store made
        before they existed does not, and keeps what is written without them."""

    def optimize(self, min_new: int = 1000) -> bool:
        """Build the vector indexes where the engine must be told to and at least ``min_new``
        points were written since the last build; True if it built."""

    def available(self) -> bool:
        """Whether the store answers now (the health check asks every second or so)."""

    def flush(self) -> None: ...

    def close(self) -> None: ...
