"""How ``celestial`` shows what the service answers: aligned tables and lines for people, or one
JSON document (``--json``). Apart from the commands, so that other tools (the LoCoMo report)
print the same tables without the command line."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from google.protobuf.message import Message

from celestial_client._core.contract_json import to_dict
from celestial_client.types import (
    Entity,
    EntityProfile,
    Memory,
    NextMove,
    RecallResult,
    RelatedMemory,
    Relation,
    Stats,
    ZoneEvent,
)


@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    """What a command answers: ``text`` for people, ``data`` for ``--json`` (the service's
    response itself where the command is one read or write of the contract, printed as its JSON
    mapping; else a document of the command's own), and its exit status (e.g. 3 when there was
    nothing to delete)."""

    text: str
    data: dict[str, Any] | Message
    status: int = 0


# What a terminal would act on rather than show, or what shows as something it is not: C0
# controls but tab and newline (ESC starts CSI and OSC sequences, which can clear the screen,
# retitle the window or write the clipboard; CR overwrites the line), DEL, C1 controls (8-bit
# CSI/OSC), the bidirectional marks, embeddings, overrides and isolates that reorder what is
# shown, zero-width characters and the byte-order mark, and the line and paragraph separators.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e"
                     "\u2060-\u2069\ufeff]")


def printable(text: str) -> str:
    """``text`` as a terminal should show it: each unsafe character as its escape (``\\x1b``,
    ``\\u202e``), everything else as it is. Stored content is anyone's input."""
    return _UNSAFE.sub(lambda m: (f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100
                                  else f"\\u{ord(m[0]):04x}"), text)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def _short(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _n(x: float, digits: int = 3) -> str:
    """A number for people: rounding first so that -0.0000001 reads 0.000, not -0.000."""
    return f"{round(x, digits) + 0.0:.{digits}f}"


def show_memory(m: Memory) -> str:
    """A memory for people. Its score is shown once: the score as of the answer (the total I of
    the terms on the "now" line), not the one stored at its last write (``Memory.score``), which
    differs once time has passed since that write."""
    b = m.breakdown
    score = m.score if b is None else b.total
    lines = [
        f"id           {m.id}",
        f"content      {m.content}",
        f"zone         {m.zone.value}   score {_n(score)}   importance {_n(m.importance, 2)}",
        f"recalled     {m.recall_count} times, last {m.last_recalled_at:%Y-%m-%d %H:%M:%S}",
        f"created      {m.created_at:%Y-%m-%d %H:%M:%S}   pinned {m.pinned}",
    ]
    if m.archived_at is not None:
        lines.append(f"archived     {m.archived_at:%Y-%m-%d %H:%M:%S} (celestial restore {m.id})")
    if m.merged:
        lines.append(f"repeats      {len(m.merged)} merged in, the last: {m.merged[-1].content!r}")
    if m.tags:
        lines.append(f"tags         {', '.join(m.tags)}")
    if m.metadata:
        lines.append("metadata     " + ", ".join(f"{k}={v}" for k, v in m.metadata.items()))
    for i, r in enumerate(m.relations):
        lines.append(("relations    " if i == 0 else " " * 13) + show_relation(m.id, r))
    if m.entities:
        lines.append(f"entities     {', '.join(m.entities)}")
    for i, (subject, relation, obj) in enumerate(m.triples):
        lines.append(("facts        " if i == 0 else " " * 13) + f"{subject} | {relation} | {obj}")
    if m.understanding:
        lines.append(f"model        {m.understanding}")
    if b is not None:
        lines.append(
            f"now          R {_n(b.recall)}  F {_n(b.freshness)}  A {_n(b.importance, 2)}  "
            f"C {_n(b.context)}  I {_n(b.total)}"
        )
    if not m.archived:
        lines.append(f"next move    {show_next_move(m)}")
    return "\n".join(lines)


def show_next_move(m: Memory) -> str:
    """A memory's next scheduled move in words: "to outer at 2026-11-26 15:42:00 unless
    recalled" (the first rebalance after that time makes it; a time already past means the
    next one, but only the server's clock says which, so the time is shown as it is)."""
    move = m.next_move
    if move is None:
        return "none: pinned" if m.pinned else (
            "none scheduled: its score never falls below this zone's threshold")
    where = "to the archive (forgotten)" if move.zone is None else f"to {move.zone.value}"
    return f"{where} at {move.at:%Y-%m-%d %H:%M:%S} unless recalled"


def _move_cell(move: NextMove | None) -> str:
    if move is None:
        return "-"
    return f"{'archive' if move.zone is None else move.zone.value} {move.at:%Y-%m-%d %H:%M}"


def show_memories(memories: Sequence[Memory], empty: str) -> str:
    """Memories one a line: where each is, where it goes next, and its text."""
    if not memories:
        return empty
    rows = [(m.zone.value, m.recall_count, _n(m.importance, 2),
             f"{m.created_at:%Y-%m-%d %H:%M}", _move_cell(m.next_move), _short(m.content, 50),
             m.id) for m in memories]
    return table(["zone", "recalls", "imp", "created", "next move", "content", "id"], rows)


def show_recall(results: Sequence[RecallResult]) -> str:
    if not results:
        return "no memory passed the relevance gate"
    rows = [
        (i + 1, "archive" if r.archived else r.found_in.value, _n(r.relevance),
         _n(r.breakdown.total),
         r.memory.zone.value, r.memory.recall_count, _short(r.content), r.id)
        for i, r in enumerate(results)
    ]
    return table(["#", "zone", "relev", "score", "now in", "recalls", "content", "id"], rows)


def show_relation(memory_id: str, r: Relation) -> str:
    """A relation as ``memory_id`` holds it, drawn in its own direction."""
    ends = (memory_id, r.id) if r.outgoing else (r.id, memory_id)
    return f"{ends[0]} -{r.relation}-> {ends[1]}   weight {_n(r.weight, 2)}   by {r.made_by}"


def _path(start: str, related: RelatedMemory) -> str:
    """The steps from ``start``, each drawn in the walk's direction: ``-about->`` along the
    relation, ``<-follows-`` against it (a walk may follow a relation backwards)."""
    steps, here = [], start
    for h in related.path:
        forward = h.from_id == here
        steps.append(f"-{h.relation}->" if forward else f"<-{h.relation}-")
        here = h.to_id if forward else h.from_id
    return " ".join(steps)


def show_related(start: str, found: Sequence[RelatedMemory]) -> str:
    if not found:
        return f"no memory is related to {start}"
    rows = [(len(r.path), _n(math.prod(h.weight for h in r.path), 2), _path(start, r),
             _short(r.content), r.id) for r in found]
    return table(["steps", "weight", "path", "content", "id"], rows)


def show_entities(entities: Sequence[Entity]) -> str:
    if not entities:
        return "no entities: no memory mentions a name, place, date, number or title"
    return table(["mentions", "kind", "key", "id"],
                 [(e.mentions, e.kind, e.key, e.id) for e in entities])


def show_entity(p: EntityProfile) -> str:
    e = p.entity
    lines = [
        f"entity       {e.id}   kind {e.kind}   key {e.key!r}",
        f"mentions     {e.mentions} memories, first {p.first_seen:%Y-%m-%d %H:%M:%S}, "
        f"last {p.last_seen:%Y-%m-%d %H:%M:%S}",
    ]
    if p.most_recalled:
        lines += ["most recalled:", table(
            ["recalls", "zone", "content", "id"],
            [(m.recall_count, m.zone.value, _short(m.content), m.id) for m in p.most_recalled])]
    return "\n".join(lines)


def _jsonable(value: object) -> object:
    """``json.dumps``'s fallback: dates as ISO 8601 (the dataclasses hold nothing else it
    cannot write; zones are strings already)."""
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"not JSON: {type(value).__name__}")


def as_json(document: dict[str, Any] | Message) -> str:
    """One JSON document: a response of the service as the contract's JSON mapping (the
    document the HTTP port answers), or a command's own document with the dataclasses in it as
    objects. What ``printable`` escapes is escaped as ``\\uXXXX`` here too (JSON escapes only
    C0 controls itself), so a document shown on a terminal is as safe as the text, and decodes
    to the exact stored text."""
    if isinstance(document, Message):
        document = to_dict(document)

    def plain(v: Any) -> Any:
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return plain(dataclasses.asdict(v))
        if isinstance(v, list | tuple):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {_key(k): plain(x) for k, x in v.items()}
        return v

    text = json.dumps({k: plain(v) for k, v in document.items()}, default=_jsonable,
                      ensure_ascii=False, indent=2)
    # Outside strings the document holds only ASCII punctuation, spaces and newlines (which
    # _UNSAFE leaves alone), so every match is inside a string, where \uXXXX means the same.
    return _UNSAFE.sub(lambda m: f"\\u{ord(m[0]):04x}", text)


def _key(k: object) -> str:
    """A JSON key: a pair of zones (a rebalance's moves) as "outer->belt"."""
    if isinstance(k, tuple):
        return "->".join(str(getattr(x, "value", x)) for x in k)
    return str(getattr(k, "value", k))


def show_stats(s: Stats) -> str:
    rows = [
        (z.zone.value, z.count, z.capacity if z.capacity else "-",
         "-" if z.min_score is None else f"{z.min_score:.2f}")
        for z in s.zones
    ]
    return (
        table(["zone", "count", "capacity", "min score"], rows)
        + f"\ntotal {s.total}   archived {s.archived}   model {s.embedding_model} "
        f"({s.dimension}d)   backend {s.backend}"
    )


def show_ledger(events: Sequence[ZoneEvent]) -> str:
    if not events:
        return "no events"
    rows = [
        (f"{e.at:%Y-%m-%d %H:%M:%S}", e.reason, e.from_zone.value,
         e.to_zone.value if e.to_zone else f"({e.reason})", e.memory_id)
        for e in events
    ]
    return table(["at", "reason", "from", "to", "memory"], rows)
