"""The durable queue between a Store and the model (``CELESTIAL_EXTRACTOR=llm``).

A new memory is written with ``understand_due`` set: the queue is that indexed field, so a
memory the Store acknowledged is queued in the same write, and a killed server resumes where it
was. A pass takes the due memories, longest waiting first, groups them by tenant, asks the model
about up to ``understand_batch`` of them in one call, and writes what it found with
``understand_due`` cleared in the same point update, so a memory understood is never asked
about again. A failed call (timeout, HTTP error, malformed answer) puts its memories back with
a doubled backoff; after ``understand_max_tries`` they leave the queue with the error recorded
on the memory (``understand_error``), never silently. Each tenant has a budget of calls and
tokens per minute: past it, its memories wait for the next minute and other tenants go on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from celestial_memory.clock import Clock
from celestial_memory.config import Settings
from celestial_memory.domain.memory_types import FACT
from celestial_memory.domain.requests import MemoryWriter, NewMemory
from celestial_memory.errors import CelestialError
from celestial_memory.graph.entities import MAX_ENTITIES
from celestial_memory.graph.entity_index import ref
from celestial_memory.graph.relations import EXTRACTED_FROM, Relations
from celestial_memory.observability import metrics
from celestial_memory.store.repository import MemoryRepository
from celestial_memory.store.understanding_store import Waiting
from celestial_memory.understanding.budget import Budget, ModelBudgets
from celestial_memory.understanding.chat import ModelError
from celestial_memory.understanding.extraction import LlmExtractor, Understood

log = logging.getLogger(__name__)

CALLS_PER_PASS = 8  # model calls one pass may make (then the loop comes back at once)


@dataclass(frozen=True, slots=True)
class Pass:
    understood: int = 0  # memories written with what the model found
    retried: int = 0  # put back for a later try
    given_up: int = 0  # left with their error recorded
    over_budget: int = 0  # left waiting: their tenant spent its minute


class ExtractionQueue:
    def __init__(self, settings: Settings, store: MemoryRepository, extractor: LlmExtractor,
                 clock: Clock) -> None:
        self._s, self._store, self._extractor, self._clock = settings, store, extractor, clock
        # Each tenant's model budget, shared with reflection (reflection/operations.py).
        self.budgets = ModelBudgets()
        self._storing: MemoryWriter | None = None
        self._relations: Relations | None = None

    def close(self) -> None:
        self._extractor.close()

    def waiting(self, tenant: str | None = None) -> int:
        n = self._store.understanding.waiting(tenant)
        if tenant is None:
            metrics.UNDERSTAND_WAITING.set(n)
        return n

    def run_once(self) -> Pass:
        """One pass over what is due: at most ``CALLS_PER_PASS`` model calls, tenants that
        spent least of their minute served first, each within its budget."""
        s = self._s
        now = self._clock.now()
        due = self._store.understanding.due_tenants(now)
        totals = {"understood": 0, "retried": 0, "given_up": 0, "over_budget": 0}
        calls = 0
        for tenant in sorted(due, key=lambda t: (self.budgets[t].used(now), t)):
            budget = self.budgets[tenant]
            allowed = min(budget.calls_left(now, s.understand_calls_per_minute),
                          CALLS_PER_PASS - calls)
            if allowed <= 0 or not budget.allows(now, s.understand_calls_per_minute,
                                                 s.understand_tokens_per_minute):
                totals["over_budget"] += due[tenant]
                continue
            items = self._store.understanding.due(tenant, now, s.understand_batch * allowed)
            asked = 0
            for start in range(0, len(items), s.understand_batch):
                if not budget.allows(now, s.understand_calls_per_minute,
                                     s.understand_tokens_per_minute):
                    break
                calls += 1
                batch = items[start:start + s.understand_batch]
                asked += len(batch)
                for k, v in self._one_call(tenant, batch, budget, now).items():
                    totals[k] += v
            totals["over_budget"] += max(0, due[tenant] - asked)
        return Pass(**totals)

    def _one_call(self, tenant: str, batch: list[Waiting], budget: Budget,
                  now: float) -> dict[str, int]:
        try:
            found, tokens = self._extractor.understand([w.content for w in batch])
        except ModelError as e:
            budget.spend(now, 0)
            metrics.MODEL_CALLS.labels("extract", "failed").inc()
            return self._failed(tenant, batch, str(e), now)
        except Exception as e:  # a reading this code did not foresee: a failed try, not a stall
            log.exception("model understanding: reading the answer failed")
            budget.spend(now, 0)
            metrics.MODEL_CALLS.labels("extract", "failed").inc()
            return self._failed(tenant, batch, f"unreadable answer ({type(e).__name__})", now)
        budget.spend(now, tokens)
        metrics.MODEL_CALLS.labels("extract", "ok").inc()
        metrics.MODEL_TOKENS.labels("extract").inc(tokens)
        # The facts first, the sources out of the queue after: a crash between them asks again,
        # and the facts' request ids make the second store a retry, not a copy.
        try:
            self._store_facts(tenant, batch, found)
        except CelestialError as e:
            return self._failed(tenant, batch, f"storing its facts failed: {e}", now)
        self._store.understanding.write(tenant, [
            (w.id, _understood(w, u)) for w, u in zip(batch, found, strict=True)])
        return {"understood": len(batch)}

    def keep_facts_with(self, storing: MemoryWriter, relations: Relations) -> None:
        """Store the model's facts as memories of type fact, related ``extracted_from`` their
        source (without it, facts are not kept)."""
        self._storing, self._relations = storing, relations

    def _store_facts(self, tenant: str, batch: list[Waiting], found: list[Understood]) -> None:
        if self._storing is None or self._relations is None:
            return
        items: list[NewMemory] = []
        sources: list[str] = []
        for w, u in zip(batch, found, strict=True):
            for k, fact in enumerate(u.facts):
                # Not understood again (the model wrote it); a repeat of a fact merges.
                items.append(NewMemory(fact, memory_type=FACT, request_id=f"fact:{w.id}:{k}",
                                       understand=False))
                sources.append(w.id)
        if not items:
            return
        stored = self._storing.store_batch(tenant, items)
        self._relations.link_derived(tenant, [(m.id, src) for m, src in
                                        zip(stored.memories, sources, strict=True)],
                               EXTRACTED_FROM)

    def _failed(self, tenant: str, batch: list[Waiting], error: str,
                now: float) -> dict[str, int]:
        s = self._s
        updates: list[tuple[str, dict[str, Any]]] = []
        given_up = 0
        for w in batch:
            tries = w.tries + 1
            if tries >= s.understand_max_tries:
                given_up += 1
                updates.append((w.id, {"understand_due": None, "understand_tries": tries,
                                       "understand_error": error[:500]}))
            else:
                updates.append((w.id, {
                    "understand_due": now + s.understand_backoff_s * 2 ** (tries - 1),
                    "understand_tries": tries}))
        self._store.understanding.write(tenant, updates)
        if given_up:
            metrics.UNDERSTAND_GIVEN_UP.inc(given_up)
            log.warning("model understanding: %d memories of %r given up after %d tries: %s",
                        given_up, tenant[:256], s.understand_max_tries, error[:200])
        else:
            log.info("model understanding: %d memories of %r to retry: %s", len(batch),
                     tenant[:256], error[:200])
        return {"retried": len(batch) - given_up, "given_up": given_up}


def _understood(w: Waiting, u: Understood) -> dict[str, Any]:
    """The fields written for a memory the model read: its entities (the rules' first, then the
    model's, at most twice the rules' cap), its triples and summary (the rules' stay where the
    model gave none), and out of the queue."""
    entities = list(dict.fromkeys([*w.entities, *(ref(e) for e in u.entities)]))
    out: dict[str, Any] = {"entities": entities[:2 * MAX_ENTITIES], "understand_due": None,
                           "understand_tries": w.tries + 1, "understand_error": ""}
    if u.triples:
        out["triples"] = [t.to_list() for t in u.triples]
    if u.summary:
        out["summary"] = u.summary
    return out
