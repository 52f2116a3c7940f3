"""What callers ask of the service, decoded from the wire but not yet validated (the service
validates every field before it writes anything)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from celestial_memory.domain.models import Memory, MemoryFilter, Vector


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
    context: str = ""  # indexed for search, not part of the content (retrieval.py)


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
