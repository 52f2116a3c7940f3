"""What Reflect asks the model, and a strict reading of its answer. A few entities go in one
call, each with the memories that mention it, numbered within the entity; the model answers
for each a summary and insights, each insight naming the memories it rests on. An answer that
is not the JSON asked for, or that skips or invents an entity, fails the call rather than being
half used; an insight that names no memory it was given is dropped (an insight must come from
somewhere)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from celestial_memory.domain.models import Memory
from celestial_memory.understanding.chat import numbered_entries

MAX_SHOWN = 20  # memories of one entity sent (its newest)
MAX_MEMORY_CHARS = 500  # of each memory sent (its start says the most)
MAX_INSIGHT_CHARS = 500  # of an insight or a summary kept

PROMPT = (
    "You reflect on memories an assistant keeps about its users. For each numbered entity you "
    "get the memories that mention it, newest first, each numbered within its entity and "
    "dated. Write a one-sentence summary of what the memories say about the entity, and at "
    "most {k} insights: short general statements that several memories support together "
    "(habits, preferences, changes over time, what someone keeps asking about), not a "
    "restatement of one memory, each with the numbers of the memories it rests on. Use only "
    "what the memories say; write no insight rather than a guess. Write in the memories' "
    "language. Answer with JSON only, exactly: "
    '{{"entities": [{{"n": 1, "summary": "Alice works at Acme and lives in Oslo.", '
    '"insights": [{{"text": "Alice mostly asks about ethics lately", "sources": [1, 3]}}]}}]}} '
    "with one entry per entity, in order."
)


@dataclass(slots=True)
class Group:
    """One entity and the memories of the window that mention it, newest first."""

    entity: str
    memories: list[Memory]


@dataclass(frozen=True, slots=True)
class Thought:
    text: str
    sources: list[str]  # memory ids


@dataclass(slots=True)
class Reflected:
    """What the model made of one entity."""

    summary: str = ""
    insights: list[Thought] = field(default_factory=list)


def prompt(max_insights: int) -> str:
    return PROMPT.format(k=max_insights)


def body(groups: Sequence[Group]) -> str:
    lines: list[str] = []
    for n, g in enumerate(groups, 1):
        lines.append(f"Entity {n}: {g.entity}")
        for i, m in enumerate(g.memories[:MAX_SHOWN], 1):
            day = datetime.fromtimestamp(m.created_at, UTC).strftime("%Y-%m-%d")
            lines.append(f"  [{i}] ({day}) {' '.join(m.content.split())[:MAX_MEMORY_CHARS]}")
    return "\n".join(lines)


def _text(v: object) -> str:
    return " ".join(v.split())[:MAX_INSIGHT_CHARS].strip() if isinstance(v, str) else ""


def parse(answer: str, groups: Sequence[Group], max_insights: int) -> list[Reflected]:
    """What the model said of each group, or ModelError naming what is wrong."""
    out: list[Reflected] = []
    for k, entry in enumerate(numbered_entries(answer, "entities", len(groups), "entity"), 1):
        shown = groups[k - 1].memories[:MAX_SHOWN]
        got = Reflected(summary=_text(entry.get("summary")))
        raw = entry.get("insights")
        for item in raw if isinstance(raw, list) else []:
            if not isinstance(item, dict) or not (said := _text(item.get("text"))):
                continue
            nums = item.get("sources")
            ids = list(dict.fromkeys(
                shown[i - 1].id for i in (nums if isinstance(nums, list) else [])
                if isinstance(i, int) and not isinstance(i, bool) and 1 <= i <= len(shown)))
            if ids and all(t.text != said for t in got.insights):
                got.insights.append(Thought(said, ids))
        got.insights = got.insights[:max_insights]
        out.append(got)
    return out
