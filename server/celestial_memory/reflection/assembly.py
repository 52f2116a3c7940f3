"""The service's reflection operations, put together from its parts."""

from __future__ import annotations

from collections.abc import Callable

from celestial_memory.clock import Clock
from celestial_memory.config import Settings
from celestial_memory.domain.requests import MemoryWriter
from celestial_memory.graph.relations import Relations
from celestial_memory.reflection.operations import ReflectionOperations
from celestial_memory.reflection.reflector import Reflector
from celestial_memory.store.repository import MemoryRepository
from celestial_memory.understanding.budget import ModelBudgets
from celestial_memory.understanding.chat import ChatModel


def reflections(settings: Settings, store: MemoryRepository, storing: MemoryWriter,
                relations: Relations, clock: Clock, model: ChatModel | None,
                budgets: ModelBudgets | None, flush: Callable[[str], None]) -> ReflectionOperations:
    """The service's reflections: ``budgets`` are the extraction queue's when it runs (one
    budget per tenant for both), new ones otherwise."""
    reflector = Reflector(settings, store, storing, relations, model)
    # A store only this process opens: what it finds unfinished, a stopped server left.
    exclusive = store.backend_name in ("edge", "qdrant-local")
    return ReflectionOperations(settings, store.operations, reflector, budgets or ModelBudgets(),
                                clock, flush, exclusive, model is not None)
