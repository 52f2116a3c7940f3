"""Long-running operations (AIP-151) of a tenant: what a reflection is while it runs and after
it ends, as the store keeps it (store/operations_store.py) and the API shows it. What a
reflection writes (Reflection, its insights and summaries) is here too, being an operation's
result."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import IntEnum

PREFIX = "operations/"  # an operation's name is PREFIX + a UUID
REFLECTION = "reflection"  # the one kind of operation so far


class Stage(IntEnum):
    """How far an operation got; the values are the API's."""

    QUEUED = 1  # accepted, waiting for a worker
    READING = 2  # reading the tenant's recent memories
    ASKING_MODEL = 3  # the model calls
    WRITING = 4  # storing insights and summaries: too late to cancel
    DONE = 5  # ended: see ``result`` or ``failure``


@dataclass(frozen=True, slots=True)
class Insight:
    id: str
    content: str
    entity: str
    sources: list[str]
    created: bool = False


@dataclass(frozen=True, slots=True)
class EntitySummary:
    entity: str
    summary: str
    id: str
    sources: list[str]


@dataclass(slots=True)
class Reflection:
    dry_run: bool
    read: int = 0  # memories of the window
    calls: int = 0
    tokens: int = 0
    insights: list[Insight] = field(default_factory=list)
    summaries: list[EntitySummary] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ReflectionAsked:
    """What a reflection was asked to do (Reflect's request, validated)."""

    dry_run: bool = True
    window: int = 0  # 0: the server's reflect_window
    entities: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Failure:
    """Why an operation ended without a result: the service error's class name (errors.py;
    the API maps it to a status code as it maps a raised one), its message, and when a new
    try may succeed."""

    error: str
    message: str
    retry_after_s: float = 0.0


@dataclass(slots=True)
class Operation:
    name: str
    tenant: str
    asked: ReflectionAsked
    created_at: float
    updated_at: float
    kind: str = REFLECTION
    stage: Stage = Stage.QUEUED
    ended_at: float | None = None
    automatic: bool = False  # started by the reflection trigger, not by a caller
    trigger_count: int = 0  # the trigger's new memories it answers (settled when it ends)
    read: int = 0
    calls: int = 0
    planned_calls: int = 0  # known once the memories are read
    tokens: int = 0
    cancel_requested: bool = False
    result: Reflection | None = None
    failure: Failure | None = None

    @property
    def done(self) -> bool:
        return self.stage == Stage.DONE

    @property
    def id(self) -> str:
        """The store's key: the UUID of the name."""
        return self.name.removeprefix(PREFIX)


def operation_name(tenant: str, request_id: str = "") -> str:
    """A new operation's name: derived from the tenant and ``request_id`` when given (a retried
    start finds the operation the first made), random otherwise."""
    if request_id:
        return PREFIX + str(uuid.uuid5(uuid.NAMESPACE_URL, f"celestial-operation:{tenant}\0"
                                                           f"{request_id}"))
    return PREFIX + str(uuid.uuid4())


def operation_id(name: str) -> str | None:
    """The UUID an operation's name holds, or None when it is no operation's name."""
    if not name.startswith(PREFIX):
        return None
    try:
        return str(uuid.UUID(name.removeprefix(PREFIX)))
    except ValueError:
        return None


def canonical_name(name: str) -> str:
    """The one spelling of an operation's name (its UUID as operation_name writes it), or ""
    for another spelling of the same UUID: every call then agrees on what a name names."""
    op_id = operation_id(name)
    return PREFIX + op_id if op_id and name == PREFIX + op_id else ""
