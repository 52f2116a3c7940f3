"""Memory types, as stored (a keyword payload field, indexed) and as a filter names them.

A plain Store is an ``episode``: what was said or what happened, as it was said. The other
types are what is drawn from episodes (facts, preferences, triples, insights), by a caller that
knows or by an extractor. Memories written before types existed have no stored type and read as
episodes, so a filter for episodes also matches a memory without the field (``type_condition``
in store/payload.py turns such a filter into "none of the other types").
"""

from __future__ import annotations

from collections.abc import Sequence

from celestial_memory.errors import InvalidArgument

FACT = "fact"
PREFERENCE = "preference"
TRIPLE = "triple"
INSIGHT = "insight"
EPISODE = "episode"
# In the proto's order (MemoryType 1..5).
MEMORY_TYPES = (FACT, PREFERENCE, TRIPLE, INSIGHT, EPISODE)
DEFAULT = EPISODE


def checked(value: str, field: str = "memory_type") -> str:
    """A type a request gives: one of MEMORY_TYPES; empty means the default (episode)."""
    if not value:
        return DEFAULT
    if value not in MEMORY_TYPES:
        raise InvalidArgument(field, f"unknown memory type {value!r}: one of "
                                     + ", ".join(MEMORY_TYPES))
    return value


def checked_many(values: Sequence[str], field: str) -> list[str]:
    """A filter's types, each known, once each, in MEMORY_TYPES order."""
    for i, v in enumerate(values):
        if v not in MEMORY_TYPES:
            raise InvalidArgument(f"{field}[{i}]", f"unknown memory type {v!r}")
    return [t for t in MEMORY_TYPES if t in values]
