"""Relations between memories of one tenant: directed, named, weighted edges (docs/design.md,
"Connected memory").

Each relation is kept at both ends, as payload of the two memories it joins (``Memory.edges``:
the other end, the name, the weight, who made it, when, and which way it points), with the other
ends' ids in an indexed field. So a memory's neighbours come with its payload (no second lookup),
a walk reads one batch of payloads per step, and an erasure finds every memory that points at a
deleted one with one filtered scan. Writes are read-modify-write of both ends under the tenant's
lock (zones/placement.py).

Made here: by the caller (Relate), by session order (each new memory follows the latest earlier
memory of its session), by repeats (a repeat merged into a memory hands it its relations) and by
reflection (an insight is derived_from the memories it came from, reflection/).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from celestial_memory.clock import Clock
from celestial_memory.config import Settings
from celestial_memory.domain import validation as check
from celestial_memory.domain.models import Edge, Memory
from celestial_memory.errors import InvalidArgument, NotFound, ResourceExhausted
from celestial_memory.store.repository import MemoryRepository
from celestial_memory.zones.placement import Placement

FOLLOWS = "follows"  # a memory follows the previous one of its session
EXTRACTED_FROM = "extracted_from"  # a fact the model read in a memory points at it
DERIVED_FROM = "derived_from"  # an insight of Reflect points at what it came from
_RELATION = re.compile(r"[a-z0-9_-]{1,64}")


def relation_name(value: str, field: str = "relation") -> str:
    if not _RELATION.fullmatch(value):
        raise InvalidArgument(field, "must be 1 to 64 lower-case letters, digits, '_' or '-'")
    return value


MAKERS = frozenset({"caller", "session", "repeat", "derived"})


def checked_edges(edges: Sequence[Edge], own: str, cap: int, field: str) -> list[Edge]:
    """A memory's relations as an import gives them, held to what Relate and the service
    write: at most ``cap``, each to another memory's id, a relation name, a weight in [0, 1],
    a known maker and time, and none twice (same other end, name and direction)."""
    if len(edges) > cap:
        raise InvalidArgument(field, f"holds {len(edges)} relations; at most {cap} "
                                     "(max_relations)")
    out: list[Edge] = []
    seen: set[tuple[str, str, bool]] = set()
    for i, e in enumerate(edges):
        at = f"{field}[{i}]"
        other = check.memory_id(e.other, f"{at}.id")
        if other == own:
            raise InvalidArgument(f"{at}.id", "a memory cannot be related to itself")
        relation = relation_name(e.relation, f"{at}.relation")
        weight = check.unit_interval(e.weight, f"{at}.weight")
        if e.made_by not in MAKERS:
            raise InvalidArgument(f"{at}.made_by", f"must be one of {sorted(MAKERS)}")
        check.timestamp(e.at, f"{at}.created_at")
        if (key := (other, relation, e.outgoing)) in seen:
            raise InvalidArgument(at, "repeats an earlier relation (same id, name, direction)")
        seen.add(key)
        out.append(Edge(other, relation, float(weight or 0.0), e.made_by, e.at, e.outgoing))
    return out


def with_edge(edges: Iterable[Edge], edge: Edge) -> tuple[list[Edge], bool]:
    """``edges`` with ``edge`` set (one per other end, name and direction); and whether it
    is new."""
    out, new = [], True
    for e in edges:
        if (e.other, e.relation, e.outgoing) == (edge.other, edge.relation, edge.outgoing):
            new = False
            continue
        out.append(e)
    out.append(edge)
    return out, new


class Relations:
    def __init__(self, settings: Settings, store: MemoryRepository, placement: Placement,
                 clock: Clock) -> None:
        self._settings = settings
        self._store = store
        self._graph = store.graph
        self._placement = placement
        self._clock = clock

    # -- the caller's relations ---------------------------------------------------------------

    def relate(self, tenant: str, source: str, target: str, relation: str,
               weight: float | None = None) -> tuple[Edge, bool]:
        """Relate ``source`` to ``target`` (both the tenant's, live or archived): the edge as
        ``source`` holds it, and whether it is new (else its weight was set again)."""
        source, target = check.memory_id(source, "from_id"), check.memory_id(target, "to_id")
        if source == target:
            raise InvalidArgument("to_id", "must differ from from_id")
        relation = relation_name(relation)
        w = check.unit_interval(weight, "weight")
        w = 1.0 if w is None else w
        with self._placement.locked(tenant):
            edges = self._edges(tenant, [source, target])
            now = self._clock.now()
            out = Edge(target, relation, w, "caller", now, True)
            edges[source], new = with_edge(edges[source], out)
            edges[target], _ = with_edge(edges[target], replace(out, other=source,
                                                                outgoing=False))
            cap = self._settings.max_relations
            for mid in (source, target):
                if len(edges[mid]) > cap:
                    raise ResourceExhausted(f"memory {mid} holds {cap} relations already")
            self._graph.write_edges(tenant, edges)
        return out, new

    def link_derived(self, tenant: str, pairs: Sequence[tuple[str, str]], relation: str) -> None:
        """Relate each (derived, source) pair with weight 1, made by "derived", in one read and
        one write; a pair whose memory is gone, or that would pass ``max_relations``, is
        skipped (what was derived stays, unlinked, rather than failing the rest)."""
        ids = list(dict.fromkeys(m for pair in pairs for m in pair))
        if not ids:
            return
        with self._placement.locked(tenant):
            edges = self._graph.edges_of(tenant, ids)
            now = self._clock.now()
            changed: set[str] = set()
            for derived, source in pairs:
                if derived == source or derived not in edges or source not in edges:
                    continue
                if max(len(edges[derived]), len(edges[source])) >= self._settings.max_relations:
                    continue
                out = Edge(source, relation, 1.0, "derived", now, True)
                edges[derived], new = with_edge(edges[derived], out)
                edges[source], _ = with_edge(edges[source], replace(out, other=derived,
                                                                    outgoing=False))
                if new:
                    changed.update((derived, source))
            self._graph.write_edges(tenant, {m: edges[m] for m in changed})

    def unrelate(self, tenant: str, source: str, target: str, relation: str = "") -> int:
        """Remove the relations from ``source`` to ``target`` (named ``relation``, or all);
        how many there were."""
        source, target = check.memory_id(source, "from_id"), check.memory_id(target, "to_id")
        if relation:
            relation_name(relation)
        with self._placement.locked(tenant):
            edges = self._graph.edges_of(tenant, [source, target])
            if source not in edges:
                raise NotFound(f"memory {source} not found")

            def gone(e: Edge, other: str, outgoing: bool) -> bool:
                return (e.other == other and e.outgoing == outgoing
                        and (not relation or e.relation == relation))

            kept = {source: [e for e in edges[source] if not gone(e, target, True)]}
            if target in edges:
                kept[target] = [e for e in edges[target] if not gone(e, source, False)]
            removed = len(edges[source]) - len(kept[source])
            if removed:
                self._graph.write_edges(tenant, kept)
        return removed

    def _edges(self, tenant: str, ids: Sequence[str]) -> dict[str, list[Edge]]:
        edges = self._graph.edges_of(tenant, ids)
        for mid in ids:
            if mid not in edges:
                raise NotFound(f"memory {mid} not found")
        return edges

    # -- relations made by the service ----------------------------------------------------------

    def follow_sessions(self, tenant: str, memories: Sequence[Memory]) -> dict[str, list[Edge]]:
        """Each new memory (or the memory a new repeat merged into) follows the latest earlier
        memory of its session: within the batch by creation time, and the batch's first of a
        session follows that session's latest stored before it. Called under the tenant's lock
        once the memories are written. Returns the relations each of them now has."""
        by_session: dict[str, list[Memory]] = {}
        for m in memories:
            if m.session_id:
                by_session.setdefault(m.session_id, []).append(m)
        if not by_session:
            return {}
        now = self._clock.now()
        pairs: list[tuple[str, str]] = []
        for session, items in by_session.items():
            items = sorted(items, key=lambda m: (m.created_at, m.id))
            before = self._graph.latest_before(tenant, session, items[0].created_at)
            chain = ([before] if before else []) + [m.id for m in items]
            pairs += [(a, b) for a, b in itertools.pairwise(chain) if a != b]
        ids = sorted({mid for p in pairs for mid in p})
        edges = self._graph.edges_of(tenant, ids)
        w = self._settings.session_weight
        for prev, nxt in pairs:
            if prev in edges and nxt in edges:
                edges[nxt], _ = with_edge(edges[nxt], Edge(prev, FOLLOWS, w, "session", now, True))
                edges[prev], _ = with_edge(edges[prev], Edge(nxt, FOLLOWS, w, "session", now,
                                                             False))
        edges = self._trimmed(tenant, edges)
        self._graph.write_edges(tenant, edges)
        return edges

    def derive(self, tenant: str, links: Mapping[str, Sequence[str]]) -> None:
        """Relate each derived memory in ``links`` derived_from each of its sources (made_by
        "derived"), in place of the derived_from relations it had (an entity's summary written
        again): all of them in two reads and one write. Ends gone meanwhile are skipped; each
        memory keeps its newest ``max_relations``."""
        if not links:
            return
        with self._placement.locked(tenant):
            edges = self._graph.edges_of(tenant, list(links))
            derived = [d for d in links if d in edges]
            old = {d: {e.other for e in edges[d] if e.relation == DERIVED_FROM and e.outgoing}
                   for d in derived}
            ends = set().union(*old.values(), *(links[d] for d in derived)) - set(edges)
            edges.update(self._graph.edges_of(tenant, sorted(ends)))
            now = self._clock.now()
            for d in derived:
                edges[d] = [e for e in edges[d] if not (e.relation == DERIVED_FROM and e.outgoing)]
                for mid in old[d] & set(edges):
                    edges[mid] = [e for e in edges[mid] if not (
                        e.other == d and e.relation == DERIVED_FROM and not e.outgoing)]
                for mid in dict.fromkeys(links[d]):
                    if mid in edges and mid != d:
                        out = Edge(mid, DERIVED_FROM, 1.0, "derived", now, True)
                        edges[d], _ = with_edge(edges[d], out)
                        edges[mid], _ = with_edge(edges[mid], replace(out, other=d,
                                                                      outgoing=False))
            self._graph.write_edges(tenant, self._trimmed(tenant, edges))

    def relink(self, tenant: str, moved: Mapping[str, str | None]) -> int:
        """Point every relation at a memory in ``moved`` to its new id instead (a repeat
        consolidated into another memory), or remove it (None: an erased memory); the moved
        memories' own relations go with them when they have a new id. Returns how many
        memories changed. Called under the tenant's lock."""
        if not moved:
            return 0
        holders = self._graph.pointing_at(tenant, list(moved))
        own = {mid: holders.pop(mid) for mid in list(holders) if mid in moved}
        targets = {t for t in moved.values() if t is not None}
        holders.update({t: es for t, es in self._graph.edges_of(tenant, sorted(targets)).items()
                        if t not in holders})
        for old, new in moved.items():
            if new is not None:
                holders[new] = holders.get(new, []) + [
                    replace(e, made_by="repeat" if e.made_by == "caller" else e.made_by)
                    for e in own.get(old, [])]
        changed: dict[str, list[Edge]] = {}
        for mid, es in holders.items():
            out: list[Edge] = []
            for e in es:
                other = moved.get(e.other, e.other)
                if other is None or other == mid:
                    continue
                out, _ = with_edge(out, replace(e, other=other))
            if out != es:
                changed[mid] = out
        self._graph.write_edges(tenant, self._trimmed(tenant, changed))
        return len(changed)

    def settle_imported(self, tenant: str, written: Sequence[Memory],
                        before: Mapping[str, list[Edge]]) -> None:
        """Make the relations an import wrote agree with the tenant's graph, in one change:
        a relation to a memory another tenant holds is dropped (ids are global: it can never
        be this tenant's); one to a memory the tenant holds gets its mirror there when it lacks
        it (or is dropped when that end holds ``max_relations``); one to an id no one holds is
        kept, for the rest of the import may bring it. A replaced memory's relations that the
        import no longer lists leave their other ends. ``before``: the replaced memories'
        relations before the import. What a consistent export holds changes nothing, so
        re-importing one writes nothing here. Called under the ids' locks, after the write."""
        with self._placement.locked(tenant):
            own = {m.id: list(m.edges) for m in written}
            others = ({e.other for es in own.values() for e in es}
                      | {e.other for es in before.values() for e in es}) - set(own)
            edges = self._graph.edges_of(tenant, sorted(others))
            foreign = {mid for mid, t in self._store.owners(sorted(others - set(edges))).items()
                       if t != tenant}
            keys = {mid: {(e.other, e.relation, e.outgoing) for e in es}
                    for mid, es in (*own.items(), *edges.items())}
            changed: set[str] = set()
            cap = self._settings.max_relations
            for mid in own:
                kept = []
                for e in own[mid]:
                    mirror = (mid, e.relation, not e.outgoing)
                    if e.other in foreign:
                        continue
                    if e.other in keys and mirror not in keys[e.other]:
                        if len(keys[e.other]) >= cap:
                            continue
                        end = own if e.other in own else edges
                        end[e.other] = [*end[e.other], replace(e, other=mid,
                                                               outgoing=not e.outgoing)]
                        keys[e.other].add(mirror)
                        changed.add(e.other)
                    kept.append(e)
                if len(kept) != len(own[mid]):
                    own[mid] = kept
                    changed.add(mid)
            for mid, old in before.items():
                now = {(e.other, e.relation, e.outgoing) for e in own.get(mid, [])}
                for e in old:
                    if (e.other, e.relation, e.outgoing) not in now and e.other in edges:
                        edges[e.other] = [x for x in edges[e.other] if
                                          (x.other, x.relation, x.outgoing)
                                          != (mid, e.relation, not e.outgoing)]
                        changed.add(e.other)
            merged = {**edges, **own}
            self._graph.write_edges(tenant, {mid: merged[mid] for mid in changed})

    def _trimmed(self, tenant: str, edges: dict[str, list[Edge]]) -> dict[str, list[Edge]]:
        """``edges`` with each memory's newest ``max_relations``; a relation dropped at one end
        is dropped at its other end too (read when not among them), so the change written
        leaves no relation known at one end only."""
        cap = self._settings.max_relations
        dropped: dict[str, set[tuple[str, str, bool]]] = {}
        for mid, es in edges.items():
            if len(es) > cap:
                for e in es[:-cap]:
                    dropped.setdefault(e.other, set()).add((mid, e.relation, not e.outgoing))
                edges[mid] = es[-cap:]
        if dropped:
            edges.update(self._graph.edges_of(tenant, [o for o in dropped if o not in edges]))
            for other, mirrors in dropped.items():
                if other in edges:
                    edges[other] = [e for e in edges[other]
                                    if (e.other, e.relation, e.outgoing) not in mirrors]
        return edges
