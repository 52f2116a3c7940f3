"""Context that brings an included memory's neighbours: each recalled memory's related ones
(its PER_MEMORY strongest, AT_MOST in all) follow it in the ranking the prompt block is filled
from (shown, not reinforced)."""

from __future__ import annotations

from collections.abc import Sequence

from celestial_memory.domain.models import Memory
from celestial_memory.domain.zones import Zone
from celestial_memory.memory.prompt_context import Assembler
from celestial_memory.store.repository import MemoryRepository

PER_MEMORY = 8  # neighbours read for each recalled memory, strongest relation first
AT_MOST = 64  # neighbours read for one block


def with_neighbours(store: MemoryRepository, tenant: str, assembler: Assembler,
                    mems: Sequence[Memory], zones: Sequence[Zone | None]) -> list[int]:
    """The block filled from the ranking with each memory's related ones right after it;
    returns the recalled memories it holds (the recall reinforces only those)."""
    have = {m.id for m in mems}
    # Each memory's strongest few, and a few in all: what is read is bounded by constants, not
    # by how many relations the recalled memories hold (256 each at most).
    wanted = list(dict.fromkeys(
        e.other for m in mems
        for e in sorted(m.edges, key=lambda e: (-e.weight, -e.at))[:PER_MEMORY]
        if e.other not in have))[:AT_MOST]
    found = {mid: m for mid, m in store.get(tenant, wanted).items() if not m.archived}
    order: list[tuple[Memory, Zone | None, int | None]] = []
    for i, (m, z) in enumerate(zip(mems, zones, strict=True)):
        order.append((m, z, i))
        for e in m.edges:
            if (n := found.pop(e.other, None)) is not None:
                order.append((n, n.zone, None))
    keep = assembler.select([m for m, _, _ in order], [z for _, z, _ in order])
    recalled = [order[k][2] for k in keep]
    return [i for i in recalled if i is not None]
