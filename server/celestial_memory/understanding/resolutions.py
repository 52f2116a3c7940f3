"""Three resolutions of a memory for a tight prompt: its text, a one-line summary and a
subject-relation-object triple (docs/design.md, "Reflection and three resolutions").

The rules here give both at store time, without a model: the summary is the first sentence,
cut at a word to ``summary_max_chars``; the triple is read from a first sentence of the form
"<Name> <verb phrase> <object>" with a verb phrase from a short English list, else there is
none. A model configured for understanding (understanding/extraction.py) replaces both later
with its own. Context (memory/prompt_context.py) uses the shortest that fits when the text does not.
"""

from __future__ import annotations

import re

from celestial_memory.domain.models import Memory

FULL, SUMMARY, TRIPLE = "full", "summary", "triple"
MAX_OBJECT = 80  # characters of a rule triple's object
HEAD = 4096  # characters of a text the rules read

_SENTENCE_END = re.compile(r"(?<=[.!?。])\s|\n")
# Verb phrases a rule triple may have, longest first so that "lives in" wins over "lives".
_VERBS = sorted([
    "is", "was", "are", "were", "likes", "loves", "hates", "prefers", "enjoys", "wants",
    "needs", "has", "had", "owns", "visited", "studies", "plays", "speaks", "drives",
    "lives in", "lived in", "moved to", "works at", "works for", "works as", "worked at",
    "was born in", "was born on", "is from", "comes from", "is allergic to", "is married to",
    "teaches", "uses", "reads", "writes", "bought", "adopted", "joined", "started",
    "work at", "work for", "live in", "like", "love", "prefer", "have", "am",
], key=len, reverse=True)
_TRIPLE = re.compile(
    r"^(?P<s>I|(?:[A-Z][\w'-]{0,39})(?: [A-Z][\w'-]{0,39}){0,2}) (?P<r>" + "|".join(map(re.escape, _VERBS))
    + r") (?P<o>\S.*)$")


def first_sentence(text: str) -> str:
    """The first sentence (or line) on one line; only the text's start is read, which bounds
    the work on a long text (a summary is at most 1,000 characters)."""
    flat = text[:HEAD].strip()
    cut = _SENTENCE_END.search(flat)
    return " ".join((flat[:cut.start()] if cut else flat).split())


def rule_summary(text: str, limit: int) -> str:
    """The first sentence of ``text`` on one line, cut at a word to ``limit`` characters
    (with an ellipsis when cut)."""
    line = first_sentence(text)
    if len(line) <= limit:
        return line
    cut = line[:limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:-") + "…"


def rule_triple(text: str) -> tuple[str, str, str] | None:
    """(subject, relation, object) of a first sentence like "Alice works at Acme", or None."""
    m = _TRIPLE.match(first_sentence(text).rstrip(".!?"))
    if m is None:
        return None
    obj = m["o"].strip()
    if len(obj) > MAX_OBJECT:
        obj = obj[:MAX_OBJECT].rsplit(" ", 1)[0] + "…"
    return m["s"], "_".join(m["r"].split()), obj


def by_rules(m: Memory, limit: int) -> None:
    """Set ``m``'s summary and triples by the rules (its text is new or changed)."""
    m.summary = rule_summary(m.content, limit)
    t = rule_triple(m.content)
    m.triples = [t] if t is not None else []


def summary_of(m: Memory, limit: int) -> str:
    """The memory's summary: the one stored, or the rules' for a memory stored without one."""
    return m.summary or rule_summary(m.content, limit)


def triple_of(m: Memory) -> tuple[str, str, str] | None:
    return m.triples[0] if m.triples else rule_triple(m.content)


def triple_text(t: tuple[str, str, str]) -> str:
    """A triple as a line of a prompt: "Alice works at Acme" (the relation's words spaced)."""
    return f"{t[0]} {t[1].replace('_', ' ')} {t[2]}"
