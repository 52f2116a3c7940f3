"""What a reflection wrote and the operation it runs as (``reflect``, ``start_reflection``):
plain dataclasses, no protobuf; importable from ``celestial_client.types`` too."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class Insight:
    """An insight ``reflect`` wrote (or would): a memory tagged "insight", related
    derived_from ``source_ids``."""

    id: str
    content: str
    entity: str
    source_ids: list[str]
    created: bool  # stored by this call (False in a dry run, or when stored before)


@dataclass(frozen=True, slots=True)
class EntitySummary:
    """An entity's summary ``reflect`` wrote (or would): its profile's summary from then on."""

    entity: str
    summary: str
    id: str
    source_ids: list[str]


@dataclass(frozen=True, slots=True)
class Reflection:
    """What ``reflect`` wrote (or, in a dry run, would write), and what it cost."""

    insights: list[Insight]
    summaries: list[EntitySummary]
    dry_run: bool
    memories_read: int
    model_calls: int
    model_tokens: int


@dataclass(frozen=True, slots=True)
class OperationError:
    """Why an operation ended without a result: the status ``code``'s name (e.g.
    "RESOURCE_EXHAUSTED": the tenant's model budget; "ABORTED": the server stopped or restarted
    while it ran; "CANCELLED"), a stable ``reason``, the ``message``, and when starting it again
    may succeed (seconds, or None)."""

    code: str
    reason: str
    message: str
    retry_after: float | None = None


@dataclass(frozen=True, slots=True)
class Operation:
    """A long-running operation (a reflection): ``name`` for ``get_operation``,
    ``watch_operation`` and ``cancel_operation``; its progress (``stage``: queued, reading,
    asking_model, writing or done; memories read, model calls made of those planned, tokens);
    once ``done``, its ``result`` or its ``error``."""

    name: str
    kind: str
    done: bool
    stage: str
    dry_run: bool
    memories_read: int
    model_calls: int
    planned_model_calls: int
    model_tokens: int
    created_at: datetime
    updated_at: datetime
    ended_at: datetime | None
    cancel_requested: bool
    automatic: bool  # started by the server's trigger, not by a caller
    result: Reflection | None = None
    error: OperationError | None = None
