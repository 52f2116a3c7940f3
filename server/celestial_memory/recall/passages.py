"""A long memory's passages: its text in short windows of whole sentences, each embedded.

The encoder reads a text's first 256 tokens (about 1,000 characters of English); the content
vector of a longer memory says nothing of the rest. A memory longer than ``passages_over_chars``
is also stored with one vector per passage (store/payload.py ``PASSAGES``, a Qdrant multivector
compared by MaxSim), so a query matching any part of it finds it: its dense relevance is the
best of its content cosine and its passages' (docs/design.md, "Long memories"). Passages are
short (``passage_chars``): a fact embedded with a page of other talk around it is diluted.
"""

from __future__ import annotations

import re

# A long memory's keywords weigh each term as its best passage does, times this: the terms of
# one query found in different passages add up as if in one, which no short memory's can, and
# at full weight long memories crowded short answers out (LoCoMo turns beside other
# conversations' sessions: evidence recall@5 0.751 without passages, 0.732 at 1.0, 0.747 at
# 0.75, 0.751 at 0.5; at 0.5 a fact at the end of a 20,000-character memory lost first place
# to a short memory sharing two of the question's words; docs/benchmarks.md, "Long memories").
KEYWORD_SCALE = 0.75
# Where a sentence or line ends: a window is cut there where it can be.
_BREAK = re.compile(r"(?<=[.!?])\s+|\n+")


def passages(text: str, size: int) -> list[str]:
    """``text`` in windows of whole sentences (lines, or words for a sentence longer than
    ``size``) of at most ``size`` characters; each window after the first begins with the last
    sentence of the one before when that is under half of ``size``, so a fact that spans two
    sentences is whole in one window. A text of at most ``size`` characters is itself."""
    text = text.strip()
    if size <= 0 or len(text) <= size:
        return [text] if text else []
    units = [u for s in _BREAK.split(text) for u in _words(s.strip(), size) if u]
    out: list[str] = []
    window: list[str] = []
    for u in units:
        if window and len(" ".join([*window, u])) > size:
            out.append(" ".join(window))
            window = [window[-1]] if len(window) > 1 and len(window[-1]) < size // 2 else []
            if window and len(" ".join([*window, u])) > size:
                window = []
        window.append(u)
    if window:
        out.append(" ".join(window))
    return out


def _words(sentence: str, size: int) -> list[str]:
    """A sentence longer than ``size`` cut at spaces (a word longer than that, at ``size``)."""
    if len(sentence) <= size:
        return [sentence]
    out: list[str] = []
    rest = sentence
    while len(rest) > size:
        cut = rest.rfind(" ", 0, size + 1)
        cut = cut if cut > 0 else size
        out.append(rest[:cut].strip())
        rest = rest[cut:].strip()
    return [*out, rest]
