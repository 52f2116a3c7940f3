"""The entities a tenant's memories mention (graph/entities.py extracts them at store time into
an indexed field): the list, most mentioned first, and one entity's profile."""

from __future__ import annotations

from dataclasses import dataclass, field

from celestial_memory.domain.models import Memory
from celestial_memory.domain.requests import derived_id
from celestial_memory.errors import InvalidArgument, NotFound
from celestial_memory.graph.entities import DATE, NUMBER, PERSON_OR_NAME, PLACE, TITLE, Entity
from celestial_memory.store.engine import Order
from celestial_memory.store.repository import MemoryRepository

# The most entities a list reads (the index answers their counts in one facet call).
MAX_LISTED = 10_000
MOST_RECALLED = 10
# Memories of one entity read to find its most recalled (recall counts are not indexed).
PROFILE_SCAN = 2000


@dataclass(frozen=True, slots=True)
class EntityCount:
    id: str  # "<kind>:<key>"
    mentions: int

    @property
    def kind(self) -> str:
        return self.id.partition(":")[0]

    @property
    def key(self) -> str:
        return self.id.partition(":")[2]


@dataclass(slots=True)
class EntityProfile:
    entity: EntityCount
    first_seen: float
    last_seen: float
    most_recalled: list[Memory] = field(default_factory=list)
    summary: Memory | None = None  # what the last Reflect made of it (reflection/)


# Names and places share one kind in ids: the extractor calls "Boston" a place after "in" and
# a name elsewhere, and both mentions are of one entity.
ID_KINDS = {PERSON_OR_NAME: "name", PLACE: "name", DATE: "date", NUMBER: "number",
            TITLE: "title"}


def ref(e: Entity) -> str:
    """The id a memory's mention of ``e`` is indexed by: "<kind>:<key>"."""
    return f"{ID_KINDS[e.kind]}:{e.key}"


def summary_id(tenant: str, entity: str) -> str:
    """The id of the memory holding ``entity``'s summary: one per entity, written again by each
    Reflect that writes about it (reflection/)."""
    return derived_id(tenant, f"entity-summary\0{entity}")


def entity_id(value: str, field_name: str = "entity") -> str:
    kind, sep, key = value.partition(":")
    kinds = sorted(set(ID_KINDS.values()))
    if not sep or kind not in kinds or not key or len(value) > 128:
        raise InvalidArgument(field_name, f"must be '<kind>:<key>' with a kind of {kinds}")
    return value


class EntityIndex:
    def __init__(self, store: MemoryRepository) -> None:
        self._store = store
        self._graph = store.graph

    def listed(self, tenant: str) -> list[EntityCount]:
        """Every entity live memories mention (at most MAX_LISTED), most mentioned first."""
        return [EntityCount(e, n) for e, n in self._graph.entity_counts(tenant, MAX_LISTED)]

    def profile(self, tenant: str, entity: str) -> EntityProfile:
        entity = entity_id(entity)
        first = self._graph.mentioning(tenant, entity, 1, Order("created_at"))
        if not first:
            raise NotFound(f"no memory mentions {entity}")
        last = self._graph.mentioning(tenant, entity, 1, Order("created_at", descending=True))
        some = self._graph.mentioning(tenant, entity, PROFILE_SCAN)
        some.sort(key=lambda m: (-m.recall_count, -m.last_recalled_at, m.id))
        summary = self._store.get(tenant, [summary_id(tenant, entity)])
        return EntityProfile(EntityCount(entity, self._graph.count_mentioning(tenant, entity)),
                             first[0].created_at, last[0].created_at, some[:MOST_RECALLED],
                             next(iter(summary.values()), None))
