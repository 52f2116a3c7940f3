"""Tenant isolation on every backend: tenant A can never read, change, delete, count, export or
overwrite tenant B's memories, whatever it asks for."""

from __future__ import annotations

import pytest
from celestial_memory.domain.models import MemoryFilter
from celestial_memory.domain.requests import Imported, MemoryChanges, NewMemory, RecallQuery
from celestial_memory.errors import AlreadyExists, NotFound
from celestial_memory.memory.service import MemoryService


def seed(service: MemoryService) -> tuple[list[str], list[str]]:
    a = [m.id for m in service.store_many("A", [NewMemory(f"alpha note {i} about budgets",
                                                          tags=["x"], session_id="s")
                                                for i in range(3)])]
    b = [m.id for m in service.store_many("B", [NewMemory(f"beta note {i} about budgets",
                                                          tags=["x"], session_id="s")
                                                for i in range(4)])]
    return a, b


def test_a_cannot_read_b(service: MemoryService) -> None:
    a, b = seed(service)
    for mid in b:
        with pytest.raises(NotFound):
            service.get("A", mid)
    found = {r.memory.id for r in service.recall("A", RecallQuery("beta note budgets", limit=50,
                                                                   min_relevance=0.0))}
    assert found == set(a)
    assert service.store.get("A", b) == {}


def test_a_cannot_change_or_delete_b(service: MemoryService) -> None:
    _, b = seed(service)
    with pytest.raises(NotFound):
        service.update("A", b[0], MemoryChanges(content="hijacked", pinned=True))
    assert not service.delete("A", b[0])
    assert service.delete_by_filter("A", MemoryFilter(tags_any=["x"])) == 3
    assert service.stats("B").total == 4
    assert service.get("B", b[0]).content == "beta note 0 about budgets"


def test_a_cannot_overwrite_b_by_id(service: MemoryService) -> None:
    _, b = seed(service)
    # Ids are unique across tenants: a taken id is refused, whoever holds it.
    with pytest.raises(AlreadyExists):
        service.store_many("A", [NewMemory("mine now", id=b[0])])
    theirs = service.store.export_pages("B")
    record = next(m for page in theirs for m in page if m.id == b[0])
    with pytest.raises(AlreadyExists):
        service.transfer.import_batch("A", [Imported(record, None)])
    assert service.get("B", b[0]).content == "beta note 0 about budgets"
    assert service.stats("A").total == 3


def test_counts_exports_and_rebalances_are_per_tenant(service: MemoryService) -> None:
    a, _ = seed(service)
    assert service.stats("A").total == 3 and service.stats("B").total == 4
    exported = [m.id for page in service.transfer.export_pages("A") for m in page]
    assert sorted(exported) == sorted(a)
    service.clock.advance(200 * 86_400)  # type: ignore[attr-defined]
    report = service.rebalance("A")
    assert report.forgotten == 3  # A's neglected cloud memories, none of B's
    assert service.stats("B").total == 4 and service.stats("A").total == 0
