"""Reflection: insights about the entities of a tenant's recent memories, by the model
(docs/design.md, "Reflection and three resolutions").

A reflection reads the tenant's newest ``reflect_window`` live memories (insights left out),
groups them by the entities they mention (the ``entities`` field, graph/) and by topic (the
tags callers give them, as groups "tag:<tag>": the service has no topic model, and a caller's
tags are the topics it chose), and takes the largest groups that at least
``reflect_min_mentions`` memories make (or the entities and topics asked for). The model gets
``reflect_entities_per_call`` groups a call, each with its newest memories, and answers a
summary and insights for each (prompt.py). Each insight is stored as a
memory tagged "insight", with an id derived from its entity and text (the same insight twice is
one memory), and related derived_from the memories it names; each entity's summary is one
memory per entity (its id derived from the entity, written again by every reflection), which
the entity's profile shows. Insights are written through the Store path (memory/storing.py), so they
are placed, scored and found like any memory; they never merge into another as a repeat.

Without a model there is no reflection: Reflect is refused, never faked. A reflection runs as
a long-running operation, step by step (reflection/operations.py): ``plan`` reads and groups,
``ask`` is one model call, ``keep`` takes what it answered, ``write`` stores it. The automatic
trigger is reflection/trigger.py.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from celestial_memory.config import Settings
from celestial_memory.domain.memory_types import INSIGHT
from celestial_memory.domain.models import Memory, MemoryFilter
from celestial_memory.domain.operations import (
    EntitySummary,
    Insight,
    Reflection,
    ReflectionAsked,
)
from celestial_memory.domain.requests import MemoryWriter, NewMemory, derived_id
from celestial_memory.errors import FailedPrecondition, InvalidArgument, ModelUnavailable
from celestial_memory.graph.entity_index import entity_id, summary_id
from celestial_memory.graph.relations import Relations
from celestial_memory.observability import metrics
from celestial_memory.reflection.prompt import MAX_SHOWN, Group, Reflected, body, parse, prompt
from celestial_memory.store.repository import MemoryRepository
from celestial_memory.understanding.chat import ChatModel, ModelError

log = logging.getLogger(__name__)

__all__ = ["EntitySummary", "Insight", "Plan", "Reflection", "Reflector"]

INSIGHT_TAG = "insight"  # every memory Reflect writes carries it
SUMMARY_TAG = "entity-summary"  # and an entity's summary this one too
# Metadata of what Reflect writes: what it is and which entity it is about.
KIND_KEY, ABOUT_KEY = "celestial_kind", "celestial_about"
MAX_WINDOW = 2000
MAX_ASKED = 64  # entities one request may name
TOPIC = "tag"  # a topic group's id is "tag:<tag>"
RESERVED_TAGS = frozenset({INSIGHT_TAG, SUMMARY_TAG})  # Reflect's own, not topics


@dataclass(slots=True)
class Plan:
    """What one reflection reads and asks about: the groups, a model call per chunk."""

    read: int  # memories of the window
    chunks: list[list[Group]]


class Reflector:
    def __init__(self, settings: Settings, store: MemoryRepository, storing: MemoryWriter,
                 relations: Relations, model: ChatModel | None) -> None:
        self._s, self._store, self._storing = settings, store, storing
        self._relations, self._model = relations, model

    def check(self, dry_run: bool, window: int, entities: Sequence[str]) -> ReflectionAsked:
        """A request, validated before anything starts: InvalidArgument, or FailedPrecondition
        without a model."""
        if not 0 <= window <= MAX_WINDOW:
            raise InvalidArgument("window", f"must be 0 to {MAX_WINDOW}, got {window}")
        if len(entities) > MAX_ASKED:
            raise InvalidArgument("entities", f"more than {MAX_ASKED}")
        asked = tuple(dict.fromkeys(e if e.startswith(f"{TOPIC}:") and len(e) <= 128 and e[4:]
                                    else entity_id(e, "entities") for e in entities))
        if self._model is None:
            raise FailedPrecondition("reflection needs a model: set CELESTIAL_LLM_BASE_URL and "
                                     "CELESTIAL_LLM_MODEL")
        return ReflectionAsked(dry_run, window, asked)

    def plan(self, tenant: str, asked: ReflectionAsked) -> Plan:
        """Read the window and group it: the model calls the reflection will make."""
        recent, _ = self._store.recent_page(tenant, MemoryFilter(),
                                            asked.window or self._s.reflect_window, None)
        recent = [m for m in recent if m.memory_type != INSIGHT and INSIGHT_TAG not in m.tags]
        groups = self._groups(recent, asked.entities)
        step = self._s.reflect_entities_per_call
        return Plan(len(recent), [groups[i:i + step] for i in range(0, len(groups), step)])

    def _groups(self, recent: Sequence[Memory], asked: Sequence[str]) -> list[Group]:
        """The entities and topics to reflect on, largest in the window first (ties by id),
        each with its memories, newest first."""
        by: dict[str, list[Memory]] = defaultdict(list)
        for m in recent:
            for e in m.entities:
                by[e].append(m)
            for t in dict.fromkeys(m.tags):
                if t not in RESERVED_TAGS:
                    by[f"{TOPIC}:{t}"].append(m)
        if asked:
            return [Group(e, by[e]) for e in asked if by.get(e)]
        ranked = sorted((e for e, ms in by.items() if len(ms) >= self._s.reflect_min_mentions),
                        key=lambda e: (-len(by[e]), e))
        return [Group(e, by[e]) for e in ranked[:self._s.reflect_max_entities]]

    def ask(self, groups: Sequence[Group]) -> tuple[list[Reflected], int]:
        """One model call about ``groups``: what it answered of each, and the tokens it cost;
        ModelUnavailable when it failed."""
        assert self._model is not None
        k = self._s.reflect_max_insights
        try:
            answer = self._model.ask(prompt(k), body(groups), json_answer=True)
            found = parse(answer.text, groups, k)
        except ModelError as e:
            metrics.MODEL_CALLS.labels("reflect", "failed").inc()
            raise ModelUnavailable(f"the model failed to reflect: {e}", 5.0) from e
        metrics.MODEL_CALLS.labels("reflect", "ok").inc()
        metrics.MODEL_TOKENS.labels("reflect").inc(answer.tokens)
        return found, answer.tokens

    def keep(self, tenant: str, g: Group, r: Reflected, out: Reflection) -> None:
        """What the model said of ``g``, as insights and a summary of ``out``."""
        cap = self._s.max_content_chars  # what a Store of them accepts
        for t in r.insights:
            text = t.text[:cap]
            out.insights.append(Insight(derived_id(tenant, f"insight\0{g.entity}\0{text}"),
                                        text, g.entity, t.sources))
        if r.summary:
            out.summaries.append(EntitySummary(g.entity, r.summary[:cap],
                                               summary_id(tenant, g.entity),
                                               [m.id for m in g.memories[:MAX_SHOWN]]))

    def write(self, tenant: str, out: Reflection) -> None:
        """The insights (create-only: one stored before stays as it is) and the summaries
        (written again), then their derived_from relations."""
        def item(mid: str, text: str, entity: str, kind: str) -> NewMemory:
            tags = [INSIGHT_TAG] + ([SUMMARY_TAG] if kind == SUMMARY_TAG else [])
            # Typed insight, not understood again by the extractor (the model wrote it).
            return NewMemory(text, tags=tags, id=mid, upsert=kind == SUMMARY_TAG,
                             metadata={KIND_KEY: kind, ABOUT_KEY: entity},
                             memory_type=INSIGHT, understand=False)

        items = [item(i.id, i.content, i.entity, INSIGHT_TAG) for i in out.insights]
        items += [item(x.id, x.summary, x.entity, SUMMARY_TAG) for x in out.summaries]
        if not items:
            return
        stored = self._storing.store_batch(tenant, items)
        out.insights = [Insight(i.id, i.content, i.entity, i.sources, created)
                        for i, created in zip(out.insights, stored.created[:len(out.insights)],
                                               strict=True)]
        self._relations.derive(tenant, {**{i.id: i.sources for i in out.insights},
                                        **{x.id: x.sources for x in out.summaries}})
        log.info("reflected on %d entities of %r: %d insights (%d new), %d model calls",
                 len(out.summaries), tenant[:256], len(out.insights),
                 sum(i.created for i in out.insights), out.calls)
