"""What the client returns: plain dataclasses, no protobuf."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Generic, TypeVar

# What the turn policy answers (observe, policy): their own module, named here too.
from celestial_client._core.policy_types import Observation as Observation
from celestial_client._core.policy_types import PeerSharing as PeerSharing
from celestial_client._core.policy_types import PolicyDecision as PolicyDecision
from celestial_client._core.policy_types import PolicySharing as PolicySharing
from celestial_client._core.policy_types import PolicyStatus as PolicyStatus
from celestial_client._core.policy_types import PolicyTrace as PolicyTrace

# What a reflection wrote, and the operation it runs as: their own module, named here too.
from celestial_client.reflection_types import EntitySummary as EntitySummary
from celestial_client.reflection_types import Insight as Insight
from celestial_client.reflection_types import Operation as Operation
from celestial_client.reflection_types import OperationError as OperationError
from celestial_client.reflection_types import Reflection as Reflection

T = TypeVar("T")


class Zone(StrEnum):
    CORE = "core"
    INNER = "inner"
    OUTER = "outer"
    BELT = "belt"
    CLOUD = "cloud"

    @property
    def rank(self) -> int:
        """0 for core to 4 for cloud: sort by this, not by the name."""
        return list(Zone).index(self)


# What a memory is, in the proto's order (MemoryType 1..5): a plain store is an episode.
MEMORY_TYPES = ("fact", "preference", "triple", "insight", "episode")


@dataclass(frozen=True, slots=True)
class ScoreBreakdown:
    recall: float
    freshness: float
    importance: float
    context: float
    total: float


@dataclass(frozen=True, slots=True)
class MergedRepeat:
    """A near-duplicate folded into a memory instead of stored as a copy: its wording and
    source (``id``: the memory it was before a consolidation, or its request_id's id)."""

    content: str
    created_at: datetime
    id: str = ""
    session_id: str = ""
    agent_id: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    context: str = ""


@dataclass(frozen=True, slots=True)
class Relation:
    """One relation of a memory as the memory at this end sees it: the memory at the other end
    (``id``), the relation's name and weight (0 to 1), who made it ("caller", "session": each
    memory follows the previous one of its session, "repeat": moved from a merged repeat), and
    whether it points away from this memory (``outgoing``) or to it."""

    id: str
    relation: str
    weight: float
    made_by: str
    created_at: datetime
    outgoing: bool


@dataclass(frozen=True, slots=True)
class Memory:
    id: str
    tenant: str
    content: str
    zone: Zone
    score: float
    importance: float
    recall_count: int
    created_at: datetime
    last_recalled_at: datetime
    tags: list[str] = field(default_factory=list)
    session_id: str = ""
    agent_id: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    pinned: bool = False
    breakdown: ScoreBreakdown | None = None
    context: str = ""
    # Forgotten: moved out of the zones into the archive (``restore`` brings it back).
    archived: bool = False
    archived_at: datetime | None = None
    merged: list[MergedRepeat] = field(default_factory=list)
    relations: list[Relation] = field(default_factory=list)  # both directions
    entities: list[str] = field(default_factory=list)  # ids "<kind>:<key>" (see Entity)
    summary: str = ""  # one line: by rules when stored, by the server's model later
    # Facts it states (subject, relation, object), by rules or a model, and the state of the
    # model's reading: "" (no model asked), "waiting", "done" or "failed: <why>".
    triples: list[tuple[str, str, str]] = field(default_factory=list)
    understanding: str = ""
    next_move: NextMove | None = None  # None: nothing scheduled (pinned, archived, or never)
    # fact, preference, triple, insight or episode (MEMORY_TYPES); a plain store is an episode.
    memory_type: str = "episode"
    # Protected: not updated, merged into or forgotten; only an admin key deletes it.
    immutable: bool = False


@dataclass(frozen=True, slots=True)
class NextMove:
    """Where the rebalance takes a memory next unless a recall or an update comes first:
    ``zone`` (None: into the archive, forgotten) once ``at`` has passed (the first rebalance
    after it moves it; at or before now: the next one)."""

    zone: Zone | None
    at: datetime

    @property
    def archive(self) -> bool:
        return self.zone is None


@dataclass(frozen=True, slots=True)
class Via:
    """How a recall's graph expansion reached a result: from the result ``from_id``, along
    ``relation`` (of ``weight``), ``hops`` steps (1 or 2)."""

    from_id: str
    relation: str
    weight: float
    hops: int


@dataclass(frozen=True, slots=True)
class RecallResult:
    memory: Memory
    found_in: Zone
    relevance: float
    breakdown: ScoreBreakdown
    archived: bool = False  # found in the archive by a deep recall; not reinforced
    via: Via | None = None  # set when reached through a relation of another result

    # Shortcuts for the common reads.
    @property
    def id(self) -> str:
        return self.memory.id

    @property
    def content(self) -> str:
        return self.memory.content

    @property
    def zone(self) -> Zone:
        return self.memory.zone


@dataclass(frozen=True, slots=True)
class Hop:
    """One step of a walk along relations. A walk may follow a relation backwards, so
    ``from_id`` and ``to_id`` are the relation's own ends, not the walk's direction."""

    from_id: str
    to_id: str
    relation: str
    weight: float


@dataclass(frozen=True, slots=True)
class RelatedMemory:
    """A memory that ``related`` reached, and the steps from the start to it (walk order)."""

    memory: Memory
    path: list[Hop]

    @property
    def id(self) -> str:
        return self.memory.id

    @property
    def content(self) -> str:
        return self.memory.content

    @property
    def depth(self) -> int:
        """How many steps from the start."""
        return len(self.path)


@dataclass(frozen=True, slots=True)
class Entity:
    """Something the tenant's memories mention (a name, place, date, number with a unit or
    quoted title): its id "<kind>:<key>", kind, normalised key and how many live memories
    mention it."""

    id: str
    kind: str
    key: str
    mentions: int


@dataclass(frozen=True, slots=True)
class EntityProfile:
    """One entity: the creation times of the first and last memory mentioning it, and its most
    recalled memories (at most 10), most recalled first; and what the last ``reflect`` made
    of it (empty before), in the memory ``summary_id``."""

    entity: Entity
    first_seen: datetime
    last_seen: datetime
    most_recalled: list[Memory]
    summary: str = ""
    summary_id: str = ""


@dataclass(frozen=True, slots=True)
class ZoneStats:
    zone: Zone
    count: int
    capacity: int | None
    min_score: float | None  # None for the Cloud, which has no lower bound


@dataclass(frozen=True, slots=True)
class Stats:
    zones: list[ZoneStats]
    total: int
    embedding_model: str
    dimension: int
    backend: str
    archived: int = 0  # forgotten memories in the archive, not in total


@dataclass(frozen=True, slots=True)
class ServerSetting:
    """One setting of the running server (``server_config``): its value as JSON reads it (text,
    a number, a bool, a list; None when unset), where the value came from when the server
    started ("flag": a flag of ``celestial serve``; "env"; "default") and the environment
    variable that sets it. A secret's value never leaves the server: ``secret`` is True and
    ``value`` is "set" or ""."""

    name: str
    value: Any
    source: str
    env: str
    secret: bool = False


@dataclass(frozen=True, slots=True)
class RebalanceReport:
    scanned: int
    moved: dict[tuple[Zone, Zone], int]
    evicted: int
    forgotten: int
    dry_run: bool
    duration_ms: float
    full: bool = False
    skipped_by: str = ""
    purged: int = 0  # archived memories past the retention, deleted for good


@dataclass(frozen=True, slots=True)
class ZoneEvent:
    """A ledger entry: a memory evicted by capacity, or forgotten (``to_zone`` None)."""

    id: str
    memory_id: str
    from_zone: Zone
    to_zone: Zone | None
    reason: str
    at: datetime
    content_hash: str


@dataclass(slots=True)
class StoreItem:
    """One item of ``store_batch``."""

    content: str
    importance: float | None = None
    tags: list[str] = field(default_factory=list)
    session_id: str = ""
    agent_id: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    created_at: datetime | float | None = None
    vector: list[float] | None = None
    id: str = ""
    pinned: bool = False
    context: str = ""  # indexed for search with the memory, not part of its content
    # An idempotency key (the id is derived from it); the client makes one when neither is set.
    request_id: str = ""
    upsert: bool = False  # replace the memory the tenant holds under this id
    memory_type: str = ""  # one of MEMORY_TYPES; empty: episode
    immutable: bool = False  # protected (see Memory.immutable)


@dataclass(frozen=True, slots=True)
class AdminEvent:
    """An admin call recorded in the ledger as it started (never the key itself)."""

    id: str
    tenant: str
    method: str
    key_id: str
    at: datetime


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a list; pass ``next_page_token`` back for the next ("" at the end)."""

    items: list[T]
    next_page_token: str


@dataclass(frozen=True, slots=True)
class LedgerPage:
    events: list[ZoneEvent]
    admin_events: list[AdminEvent]
    next_page_token: str


@dataclass(frozen=True, slots=True)
class ExportedMemory:
    """A memory with everything needed to restore it: what ``export`` yields and
    ``import_memories`` takes. ``record`` keeps the exported bytes, exact to the nanosecond,
    and is what is sent back on import; a record built by hand (``record`` empty) is sent from
    the fields."""

    memory: Memory
    vector: list[float]
    context_vector: list[float]
    context_score: float
    written_at: datetime
    record: bytes = field(default=b"", repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class ImportResult:
    imported: int  # written
    skipped: int  # already held by the tenant, left as they were (unless replace)


@dataclass(frozen=True, slots=True)
class Consolidation:
    """What ``consolidate`` merged (or would): per group, the memory that stays and the ids
    folded into it."""

    merges: list[tuple[str, list[str]]]
    scanned: int
    dry_run: bool
    unlisted: int = 0  # merges made (or found) beyond what one answer lists


@dataclass(frozen=True, slots=True)
class PromptContext:
    """A Context block: ``text`` to paste into a prompt, never over the budget; its ``tokens``
    counted by ``tokenizer``; the ids it holds, those folded into them as repeats, and those
    left out to fit."""

    text: str
    tokens: int
    tokenizer: str
    included_ids: list[str]
    folded_ids: list[str]
    omitted_ids: list[str]
    # How the block shows each of included_ids: "full" (its text), or, when that did not fit,
    # "summary" (its one-line summary) or "triple" (its first fact).
    included_resolutions: list[str] = field(default_factory=list)
