"""Input checks. Each raises InvalidArgument naming the request field, before anything is written."""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Mapping, Sequence

import numpy as np
from celestial_memory.config import Settings
from celestial_memory.domain import memory_types
from celestial_memory.domain.models import MAX_KEPT, MemoryFilter, Provenance, Vector
from celestial_memory.errors import InvalidArgument

# google.protobuf.Timestamp's range (0001-01-01 to 9999-12-31): every time the service keeps
# must be sendable back as one.
MIN_TIME, MAX_TIME = -62_135_596_800.0, 253_402_300_799.0
# Metadata keys become payload paths (metadata.<key>) in filters: letters, digits, _ and -.
_METADATA_KEY = re.compile(r"[\w-]{1,64}")


def shown(value: object, limit: int = 64) -> str:
    """A bad value as an error message shows it: quoted, and cut short."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def setting_env(name: str) -> str:
    """The environment variable that sets the setting ``name``: CELESTIAL_MAX_CONTENT_CHARS."""
    return f"{Settings.model_config.get('env_prefix', '')}{name}".upper()


def _too_long(length: int, most: int, setting: str) -> str:
    # A text limit is an operator's choice: the message names the setting, so that whoever
    # meets it can ask for it to be raised rather than guess at it.
    return f"must be at most {most} characters, got {length} ({setting_env(setting)} raises it)"


def content(value: str, s: Settings, field: str = "content") -> str:
    if not value or not value.strip():
        raise InvalidArgument(field, "must not be empty or only white space")
    if len(value) > s.max_content_chars:
        raise InvalidArgument(field, _too_long(len(value), s.max_content_chars,
                                               "max_content_chars"))
    return value


def context(value: str, s: Settings, field: str = "context") -> str:
    """Optional context text: may be empty; white space alone counts as none."""
    if len(value) > s.max_context_chars:
        raise InvalidArgument(field, _too_long(len(value), s.max_context_chars,
                                               "max_context_chars"))
    return value.strip()


def request_id(value: str, field: str = "request_id") -> str:
    """An idempotency key: 1 to 128 characters, no NUL."""
    if not 0 < len(value) <= 128 or "\x00" in value:
        raise InvalidArgument(field, "must be 1 to 128 characters without NUL")
    return value


def unique_ids(ids: Sequence[str], fields: Sequence[str]) -> None:
    """Refuse a request that names one id twice (``fields``: where each id came from)."""
    seen: set[str] = set()
    for mid, field in zip(ids, fields, strict=True):
        if mid and mid in seen:
            raise InvalidArgument(field, f"id {mid} appears twice")
        seen.add(mid)


def unit_interval(value: float | None, field: str) -> float | None:
    if value is None:
        return None
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise InvalidArgument(field, f"must be in [0, 1], got {value}")
    return float(value)


def limit(value: int, s: Settings) -> int:
    if value == 0:
        return s.default_recall_limit
    if value < 0 or value > s.max_recall_limit:
        raise InvalidArgument("limit", f"must be 1 to {s.max_recall_limit}, got {value}")
    return value


def hops(value: int, field: str = "expand") -> int:
    """Steps of graph expansion along relations: 0 (off) to 2."""
    if not 0 <= value <= 2:
        raise InvalidArgument(field, f"must be 0 to 2, got {value}")
    return value


def memory_id(value: str, field: str = "id") -> str:
    try:
        return str(uuid.UUID(value))
    except (ValueError, AttributeError, TypeError):
        raise InvalidArgument(field, f"not a UUID: {shown(value)}") from None


def vector(values: Sequence[float] | Vector, dimension: int, field: str) -> Vector:
    """A vector of the store's dimension, finite in float32, scaled to unit length. Vectors are
    compared by cosine, so the scale carries nothing; scaling here (in float64) keeps a vector
    of huge or tiny components from overflowing or underflowing the engine's float32 norm,
    which would store it as all zeros."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or v.shape[0] != dimension:
        raise InvalidArgument(field, f"must have {dimension} dimensions, got {v.size}")
    if not np.all(np.isfinite(v.astype(np.float32))):
        raise InvalidArgument(field, "contains NaN or infinity (or a value beyond float32)")
    norm = float(np.linalg.norm(v))
    if norm == 0.0:
        raise InvalidArgument(field, "is all zeros")
    return (v / norm).astype(np.float32)


def label(value: str, s: Settings, field: str) -> str:
    """A short identifier kept and filtered on (session, agent, a tag)."""
    if len(value) > s.max_label_chars:
        raise InvalidArgument(field, f"longer than {s.max_label_chars} characters")
    if "\x00" in value:
        raise InvalidArgument(field, "contains a NUL character")
    return value


def tags(values: Sequence[str], s: Settings, field: str = "tags") -> list[str]:
    if len(values) > s.max_tags:
        raise InvalidArgument(field, f"more than {s.max_tags} tags")
    for i, t in enumerate(values):
        if not t.strip():
            raise InvalidArgument(f"{field}[{i}]", "is empty")
        label(t, s, f"{field}[{i}]")
    return list(values)


def metadata(values: Mapping[str, str], s: Settings, field: str = "metadata") -> dict[str, str]:
    if len(values) > s.max_metadata_entries:
        raise InvalidArgument(field, f"more than {s.max_metadata_entries} entries")
    for key, value in values.items():
        if not _METADATA_KEY.fullmatch(key):
            raise InvalidArgument(
                field, f"bad key {shown(key)}: 1 to 64 letters, digits, '_' or '-'")
        if len(value) > s.max_metadata_value_chars:
            raise InvalidArgument(f"{field}[{key}]",
                                  f"longer than {s.max_metadata_value_chars} characters")
    return dict(values)


def timestamp(value: float | None, field: str) -> float | None:
    if value is not None and not (math.isfinite(value) and MIN_TIME <= value <= MAX_TIME):
        raise InvalidArgument(field, "is not a time between the years 1 and 9999")
    return value


def memory_filter(flt: MemoryFilter, s: Settings, field: str = "filter") -> MemoryFilter:
    unit_interval(flt.min_importance, f"{field}.min_importance")
    tags(flt.tags_any, s, f"{field}.tags_any")
    tags(flt.tags_all, s, f"{field}.tags_all")
    metadata(flt.metadata, s, f"{field}.metadata")
    label(flt.session_id, s, f"{field}.session_id")
    label(flt.agent_id, s, f"{field}.agent_id")
    tags(flt.entities_any, s, f"{field}.entities_any")  # labels too, at most max_tags
    flt.memory_types = memory_types.checked_many(flt.memory_types, f"{field}.memory_types")
    for name in ("created", "recalled"):
        lo = timestamp(getattr(flt, f"{name}_after"), f"{field}.{name}_after")
        hi = timestamp(getattr(flt, f"{name}_before"), f"{field}.{name}_before")
        if lo is not None and hi is not None and lo >= hi:
            raise InvalidArgument(f"{field}.{name}_after", f"must be before {field}.{name}_before")
    return flt


def merged(entries: Sequence[Provenance], s: Settings, field: str) -> list[Provenance]:
    """The repeats an imported memory says were merged into it: what a merge itself could have
    kept (memory/repeats.py), each entry checked as a stored memory's own fields are."""
    if len(entries) > MAX_KEPT:
        raise InvalidArgument(field, f"more than {MAX_KEPT} entries")
    size = 0
    for i, p in enumerate(entries):
        f = f"{field}[{i}]"
        if p.id:
            p.id = memory_id(p.id, f"{f}.id")
        content(p.content, s, f"{f}.content")
        p.context = context(p.context, s, f"{f}.context")
        label(p.session_id, s, f"{f}.session_id")
        label(p.agent_id, s, f"{f}.agent_id")
        metadata(p.metadata, s, f"{f}.metadata")
        timestamp(p.created_at, f"{f}.created_at")
        size += p.size()
        if size > s.max_merged_bytes:
            raise InvalidArgument(field, f"more than {s.max_merged_bytes} bytes of wording")
    return list(entries)
