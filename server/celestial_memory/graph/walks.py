"""Walks along relations (Related): every memory within 1 to 3 steps of one, nearest first, then
strongest path, each reached once by its strongest shortest path (docs/design.md, "Connected
memory").

A walk's cost is bounded by MAX_REACHED, not by the graph: each step reads the frontier's
relations a chunk of memories at a time and keeps only the strongest candidates that can still
be answered, so a dense graph (256 relations on every memory) never holds more than a few
chunks of relations and a few thousand candidates at once. Only ids and paths are kept; the
memories themselves are read a page at a time by whoever pages through the walk. A walk made for
a first page is kept until WALK_TTL_S after its latest page (a few, least recently used first
out) and its later pages are slices of it rather than new walks: the pages of one walk are one
snapshot, with no memory twice and none skipped when relations change between pages (a memory
erased meanwhile is left out of its page). The next first page walks again.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from celestial_memory.domain import validation as check
from celestial_memory.errors import InvalidArgument, NotFound
from celestial_memory.graph.relations import relation_name
from celestial_memory.store.graph_store import GraphStore

MAX_DEPTH = 3
MAX_REACHED = 2000  # memories one walk may answer: a bound on its work, whatever the graph
CHUNK = 64  # frontier memories whose relations are read (and held) at once
KEPT_WALKS = 16  # walks kept for their later pages (each at most MAX_REACHED ids and paths)
WALK_TTL_S = 60.0


@dataclass(frozen=True, slots=True)
class Hop:
    """One step of a walk, in the relation's own direction (a walk may go against it)."""

    source: str
    target: str
    relation: str
    weight: float


@dataclass(slots=True)
class Reached:
    """A memory a walk reached, and the steps that led there."""

    id: str
    path: list[Hop]

    @property
    def strength(self) -> float:
        out = 1.0
        for h in self.path:
            out *= h.weight
        return out


def _rank(r: Reached) -> tuple[float, str]:
    return -r.strength, r.id


def _strongest(found: dict[str, Reached], n: int) -> dict[str, Reached]:
    """The ``n`` strongest of ``found`` (ties by id). A candidate dropped here can only come
    back stronger: the bar the kept ones set only rises as the step goes on."""
    if len(found) <= n:
        return found
    return {r.id: r for r in heapq.nsmallest(n, found.values(), key=_rank)}


def walk(graph: GraphStore, tenant: str, start: str, depth: int,
         names: frozenset[str] = frozenset()) -> list[Reached]:
    """Every memory of ``tenant`` within ``depth`` steps of ``start`` (either direction, only
    relations in ``names`` when given), nearest first, then strongest path, then id; at most
    MAX_REACHED. One read of relations per CHUNK frontier memories and one existence read per
    step; NotFound when ``start`` is not the tenant's."""
    first = graph.edges_of(tenant, [start])  # also the first step's relations
    if start not in first:
        raise NotFound(f"memory {start} not found")
    frontier: dict[str, Reached] = {start: Reached(start, [])}
    seen = {start}
    out: list[Reached] = []
    for _ in range(depth):
        room = MAX_REACHED - len(out)
        found: dict[str, Reached] = {}
        ids = sorted(frontier)
        for chunk in (ids[i:i + CHUNK] for i in range(0, len(ids), CHUNK)):
            edges = first if not out and chunk == [start] else graph.edges_of(tenant, chunk)
            for mid in chunk:
                here = frontier[mid]
                for e in edges.get(mid, ()):
                    if e.other in seen or (names and e.relation not in names):
                        continue
                    hop = (Hop(mid, e.other, e.relation, e.weight) if e.outgoing
                           else Hop(e.other, mid, e.relation, e.weight))
                    cand = Reached(e.other, [*here.path, hop])
                    if e.other not in found or _rank(cand) < _rank(found[e.other]):
                        found[e.other] = cand
            if len(found) > 2 * room:
                found = _strongest(found, room)
        found = _strongest(found, room)
        if not found:
            break
        # Only memories the tenant still holds count (an edge may outlive its other end).
        held = graph.holding(tenant, sorted(found))
        level = sorted((r for r in found.values() if r.id in held), key=_rank)
        out += level
        seen.update(found)
        frontier = {r.id: r for r in level}
        if len(out) >= MAX_REACHED:
            break
    return out


class Walks:
    """Walks for Related, the later pages of one answered from the walk its first page made."""

    def __init__(self, graph: GraphStore, now: Callable[[], float] = time.monotonic) -> None:
        self._graph = graph
        self._now = now
        self._kept: OrderedDict[tuple[object, ...], tuple[float, list[Reached]]] = OrderedDict()
        self._lock = threading.Lock()

    def reached(self, tenant: str, start: str, depth: int, relations: Sequence[str] = (),
                first_page: bool = True) -> list[Reached]:
        start = check.memory_id(start)
        if not 1 <= depth <= MAX_DEPTH:
            raise InvalidArgument("depth", f"must be 1 to {MAX_DEPTH}, got {depth}")
        names = frozenset(relation_name(r, "relations") for r in relations)
        key = (tenant, start, depth, names)
        if not first_page:
            with self._lock:
                kept = self._kept.get(key)
                now = self._now()
                if kept is not None and now - kept[0] < WALK_TTL_S:
                    # A walk being paged through stays while its pages keep coming.
                    self._kept[key] = (now, kept[1])
                    self._kept.move_to_end(key)
                    return kept[1]
        out = walk(self._graph, tenant, start, depth, names)
        with self._lock:
            self._kept[key] = (self._now(), out)
            self._kept.move_to_end(key)
            while len(self._kept) > KEPT_WALKS:
                self._kept.popitem(last=False)
        return out
