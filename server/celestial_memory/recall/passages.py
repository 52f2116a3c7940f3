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
# A character outside ASCII counts this many times toward a passage's length: a Chinese or
# Japanese character is about one token where an English one is about a quarter of one, and a
# 300-character window of Chinese (~300 tokens) ran past the 256 the encoder reads.
WIDE = 4
# The most passages one memory gets (about): a wider text gets wider windows, so what a memory
# may cost stays bounded by its length limit whatever the text (32,768 characters of Korean at
# the narrow windows above made 440 passages). 20,000 characters of English keep their 300-wide
# windows (about 95); at 64 windows of about 390 a fact in its last line lost first place.
MAX_PASSAGES = 128
# Where a sentence or line ends (in English and CJK punctuation): a window is cut there where
# it can be; a sentence longer than a window is cut at whitespace.
_BREAK = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])\s*|\n+")
_SPACE = re.compile(r"\s+")


def width(text: str) -> int:
    """``text``'s length as a passage counts it (``WIDE``)."""
    return len(text) if text.isascii() else sum(1 if c.isascii() else WIDE for c in text)


def passages(text: str, size: int) -> list[str]:
    """``text`` in windows of whole sentences (lines, or words for a sentence wider than
    ``size``) at most ``size`` wide (``width``; wider where MAX_PASSAGES would be passed: the
    count is kept near it, not exactly); each window after the first begins with the
    last sentence of the one before when that is under half of ``size``, so a fact that spans
    two sentences is whole in one window. A text at most ``size`` wide is itself."""
    text = text.strip()
    wide_text = width(text)
    if size <= 0 or wide_text <= size:
        return [text] if text else []
    # Widened so that the windows (overlapping by about a sentence) stay within MAX_PASSAGES.
    size = max(size, -(-wide_text * 5 // 4 // MAX_PASSAGES))
    units = [(u, width(u)) for s in _BREAK.split(text) for u in _words(s.strip(), size) if u]
    out: list[str] = []
    window: list[tuple[str, int]] = []
    wide = 0  # the window's width, a space between units
    for u, w in units:
        if window and wide + 1 + w > size:
            out.append(" ".join(x for x, _ in window))
            last = window[-1]
            keep = len(window) > 1 and last[1] < size // 2 and last[1] + 1 + w <= size
            window, wide = ([last], last[1]) if keep else ([], 0)
        wide += w + (1 if window else 0)
        window.append((u, w))
    if window:
        out.append(" ".join(x for x, _ in window))
    return out


def _words(sentence: str, size: int) -> list[str]:
    """A sentence wider than ``size`` cut at whitespace (a word wider than that, where it
    reaches ``size``)."""
    if width(sentence) <= size:
        return [sentence]
    out: list[str] = []
    piece: list[str] = []
    wide = 0
    for word in _SPACE.split(sentence):
        for part in _cut(word, size):
            w = width(part)
            if piece and wide + 1 + w > size:
                out.append(" ".join(piece))
                piece, wide = [], 0
            wide += w + (1 if piece else 0)
            piece.append(part)
    if piece:
        out.append(" ".join(piece))
    return out


def _cut(word: str, size: int) -> list[str]:
    """A word in pieces at most ``size`` wide."""
    if width(word) <= size:
        return [word]
    out, start, wide = [], 0, 0
    for i, c in enumerate(word):
        w = 1 if c.isascii() else WIDE
        if wide + w > size:
            out.append(word[start:i])
            start, wide = i, 0
        wide += w
    return [*out, word[start:]]
