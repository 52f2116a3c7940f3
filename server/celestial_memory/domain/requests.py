"""What callers ask of the service, decoded from the wire but not yet validated (the service
validates every field before it writes anything)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from celestial_memory.domain.models import Memory, MemoryFilter, Vector
from celestial_memory.domain.zones import Zone


@dataclass(slots=True)
class NewMemory:
    content: str
    importance: float | None = None
    tags: list[str] = field(default_factory=list)
    session_id: str = ""
    agent_id: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    created_at: float | None = None
    vector: Sequence[float] | Vector | None = None
    id: str = ""
    pinned: bool = False
    context: str = ""  # indexed for search, not part of the content (recall/retrieval.py)
    request_id: str = ""  # an idempotency key: the id is derived from it (memory/service.py)
    upsert: bool = False  # replace a memory the tenant holds under the same id
    memory_type: str = ""  # one of understanding/types.MEMORY_TYPES; empty: episode
    immutable: bool = False  # protected from update, merging and forgetting
    # Queued for the model (CELESTIAL_EXTRACTOR=llm); False for what the model itself wrote.
    understand: bool = True
    # Written straight into the archive (a turn the turn policy skipped): never in the zones,
    # never merged into another memory, never sent to the model.
    archived: bool = False
    # The content's vector as this server's encoder gave it (Observe encodes a turn once).
    embedded: Vector | None = None
    # The live memories nearest that vector, with their cosines, as this server searched them for
    # this write (Observe's novelty): the repeat check reads them instead of searching again.
    nearest: Sequence[tuple[str, float]] | None = None


@dataclass(slots=True)
class RecallQuery:
    query: str = ""
    limit: int = 0
    filter: MemoryFilter = field(default_factory=MemoryFilter)
    reinforce: bool = True
    context: str = ""
    query_vector: Sequence[float] | None = None
    min_relevance: float | None = None
    ignore_zones: bool = False  # rank by relevance alone (plain hybrid search)
    include_archived: bool = False  # search the archive too, always
    deep: bool | None = None  # the archive when the zones fall short; None: the server's default
    expand: int | None = None  # graph expansion, hops (0-2); None: the server's default
    # Picks which of the ranked memories (with the zone each was found in, None for the
    # archive) are returned and reinforced, in rank order: a Context block's budget.
    select: Callable[[Sequence[Memory], Sequence[Zone | None]], list[int]] | None = None
    # How many of the memories to return, from the first, fit one answer (the front end's
    # message limit): the rest are neither returned nor reinforced.
    fit: Callable[[Sequence[Memory]], int] | None = None


@dataclass(slots=True)
class MemoryChanges:
    content: str | None = None
    importance: float | None = None
    tags: list[str] | None = None
    metadata: dict[str, str] | None = None
    pinned: bool | None = None
    vector: Sequence[float] | None = None


@dataclass(slots=True)
class Imported:
    """One memory as an import receives it (the proto's ExportedMemory, decoded)."""

    memory: Memory  # vector set; tenant ignored
    context_vector: Vector | None


# Ids derived from request ids: uuid5 in this namespace of "<len(tenant)>:<tenant><request_id>",
# so one key names one memory per tenant, and two tenants' keys never meet (the length prefix
# keeps "a" + "x\ny" apart from "a\nx" + "y").
REQUEST_IDS = uuid.UUID("6f1d3c1e-8b0a-5c4e-9a57-2f3e1c0d9b42")


def derived_id(tenant: str, request_id: str) -> str:
    return str(uuid.uuid5(REQUEST_IDS, f"{len(tenant)}:{tenant}{request_id}"))


@dataclass(slots=True)
class Stored:
    """What a store answers: each item's memory, and whether it was created (False: the tenant
    already held it with the same content, and nothing was written)."""

    memories: list[Memory]
    created: list[bool]
    # Per item: the id of the live memory it repeated and was merged into ("" when stored).
    merged_into: list[str] = field(default_factory=list)


class MemoryWriter(Protocol):
    """The Store path as the layers below the memory services see it: extraction and reflection
    write what they derive through it without depending on the services that implement it."""

    def store_batch(self, tenant: str, items: Sequence[NewMemory]) -> Stored: ...
