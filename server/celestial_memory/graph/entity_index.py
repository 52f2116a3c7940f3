"""The entities a tenant's memories mention (graph/entities.py extracts them at store time into
an indexed field): the list, most mentioned first, and one entity's profile."""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field

from celestial_memory.domain.models import Memory
from celestial_memory.domain.requests import derived_id
from celestial_memory.errors import InvalidArgument, NotFound
from celestial_memory.graph.entities import (
    DATE,
    MAX_ENTITIES,
    MAX_KEY,
    NUMBER,
    PERSON_OR_NAME,
    PLACE,
    TITLE,
    Entity,
    normalise_key,
)
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
    """An entity id as the extractor makes them, "<kind>:<key>" with a known kind and the key
    normalised (lower-case, single-spaced, at most MAX_KEY characters); a key with a control or
    format character is refused (keys are shown in lists and profiles)."""
    kind, sep, key = value.partition(":")
    kinds = sorted(set(ID_KINDS.values()))
    if not sep or kind not in kinds or not key.strip() or len(value) > 128:
        raise InvalidArgument(field_name, f"must be '<kind>:<key>' with a kind of {kinds}, "
                                          "at most 128 characters")
    if any(unicodedata.category(c)[0] == "C" for c in key if c not in " \t\n"):
        raise InvalidArgument(field_name, "the key holds a control or format character")
    return f"{kind}:{normalise_key(key)}"


def checked_entities(values: Sequence[str], field_name: str) -> list[str]:
    """The entities an import gives a memory, exactly as the extractor writes them: valid ids
    already normalised, none twice, at most twice MAX_ENTITIES (the rules' cap for one text,
    and as many again from a model)."""
    if len(values) > 2 * MAX_ENTITIES:
        raise InvalidArgument(field_name, f"holds {len(values)} entities; at most "
                                          f"{2 * MAX_ENTITIES}")
    for i, v in enumerate(values):
        if entity_id(v, f"{field_name}[{i}]") != v:
            raise InvalidArgument(f"{field_name}[{i}]", f"the key must be lower-case, "
                                  f"single-spaced and at most {MAX_KEY} characters")
    if len(set(values)) != len(values):
        raise InvalidArgument(field_name, "names an entity twice")
    return list(values)


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
