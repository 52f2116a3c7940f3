"""What the model-backed understanding asks of storage: the durable queue of memories waiting
for a model, kept as an indexed field of the memories themselves (``understand_due``), and the
write of what the model found. A memory and its place in the queue are one point, so a Store
that is acknowledged is queued, and a killed server finds the queue where it was."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from celestial_memory.store.engine import MEMORIES, Engine, Order
from celestial_memory.store.payload import Between, Eq

DUE_SLACK_S = 0.001  # "at now or before" with a half-open range (a float may come back a bit off)
QUEUE_PAYLOAD = ["tenant", "content", "entities", "understand_due", "understand_tries"]


@dataclass(frozen=True, slots=True)
class Waiting:
    id: str
    tenant: str
    content: str
    entities: list[str]
    tries: int


class UnderstandingStore:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def due_tenants(self, now: float, limit: int = 10_000) -> dict[str, int]:
        """The tenants with memories due at ``now`` or before, and how many each."""
        counts = self._engine.facet(MEMORIES, "tenant", self._due(now), limit)
        return {str(t): int(n) for t, n in counts}

    def due(self, tenant: str, now: float, limit: int) -> list[Waiting]:
        """Memories of ``tenant`` (live or archived) whose turn has come, longest waiting
        first."""
        records, _ = self._engine.scroll(
            MEMORIES, [Eq("tenant", tenant), *self._due(now)], limit, None,
            payload=QUEUE_PAYLOAD, order=Order("understand_due"))
        return [Waiting(r.id, tenant, str(r.payload.get("content", "")),
                        list(r.payload.get("entities") or []),
                        int(r.payload.get("understand_tries", 0))) for r in records]

    @staticmethod
    def _due(now: float) -> list[Any]:
        return [Between("understand_due", lt=now + DUE_SLACK_S)]

    def waiting(self, tenant: str | None = None) -> int:
        """Memories in the queue, due or not (of one tenant, or all)."""
        where: list[Any] = [Between("understand_due", gte=0.0)]
        if tenant is not None:
            where.append(Eq("tenant", tenant))
        return self._engine.count(MEMORIES, where)

    def write(self, tenant: str, updates: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Set fields of memories of ``tenant`` still in the queue, one batched write: what the
        model found with ``understand_due`` cleared, or the next try's time."""
        if updates:
            self._engine.set_payloads(MEMORIES, updates, [Eq("tenant", tenant),
                                                          Between("understand_due", gte=0.0)])
