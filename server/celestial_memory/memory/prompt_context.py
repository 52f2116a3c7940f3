"""Context for a prompt: the recalled memories an agent pastes into a prompt, assembled within a
token budget (the Context RPC).

The memories are taken most relevant first while they fit; a memory whose words are all words
of one already taken (the repeat rule's word test, memory/repeats.py) is folded into it, and one that
says more than a taken memory replaces that memory's wording in its place. The block lists them
grouped by zone, Core first (the archive last), each dated, most relevant first within a zone,
and ends by saying how many were folded and how many left out. Tokens are counted with the
embedding model's own tokenizer (the only one a server without network can be sure to have);
the block is counted whole once assembled and shortened until it fits, so it never exceeds the
budget, whatever the tokenizer does at the joins. A memory whose text does not fit is shown
by the first of its shorter resolutions that fits, its one-line summary or its triple
(understanding/resolutions.py), and the block says which form each memory took.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from celestial_memory.domain.models import Memory
from celestial_memory.domain.zones import Zone
from celestial_memory.memory.repeats import Repeats, same_text
from celestial_memory.understanding import resolutions
from celestial_memory.understanding.resolutions import FULL, SUMMARY, TRIPLE

HEADER = "Relevant memories, grouped by zone (core first), most relevant first within a zone:"
# Bytes a block may take per token of its budget: English runs at about 4-5 UTF-8 bytes a token
# and Korean at 3-6, so only text the tokenizer cannot split (long runs without spaces) meets it.
BYTES_PER_TOKEN = 16
# Room for the header and the closing note, in bytes (zone headings count with their lines).
FRAME_BYTES = 256


class TokenCounter(Protocol):
    name: str

    def count(self, texts: Sequence[str]) -> list[int]: ...


class ModelTokens:
    """Tokens of a Hugging Face fast tokenizer, without the special tokens a model adds. A copy
    of its own, without truncation: the encoder's is set for truncation on every call from
    another thread, and a fast tokenizer used by two threads at once refuses one of them."""

    def __init__(self, tokenizer: Any, name: str) -> None:
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_str(tokenizer.backend_tokenizer.to_str())
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        self._lock = threading.Lock()
        self.name = name

    def count(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        with self._lock:
            return [len(e.ids) for e in self._tokenizer.encode_batch(list(texts),
                                                                     add_special_tokens=False)]


class WordTokens:
    """Words and punctuation marks: for an embedder without a tokenizer (tests' fakes)."""

    name = "words"
    _TOKEN = re.compile(r"\w+|[^\w\s]")

    def count(self, texts: Sequence[str]) -> list[int]:
        return [len(self._TOKEN.findall(t)) for t in texts]


def token_counter(embedder: Any) -> TokenCounter:
    inner = getattr(embedder, "inner", embedder)
    tokenizer = getattr(inner, "tokenizer", None)
    if callable(tokenizer) and hasattr(tokenizer, "backend_tokenizer"):
        return ModelTokens(tokenizer, f"{inner.name} (the embedding model's tokenizer)")
    return WordTokens()


@dataclass(slots=True)
class _Entry:
    index: int  # in the recall's ranking
    memory: Memory
    zone: Zone | None  # None: found in the archive
    text: str
    terms: frozenset[str]
    cost: int  # tokens of its line
    form: str = FULL  # which resolution its line shows: full, summary or triple

    @property
    def place(self) -> tuple[int, int]:
        """Its place in the block: by zone, Core first and the archive last, then by rank."""
        return (len(Zone) if self.zone is None else int(self.zone), self.index)


@dataclass(slots=True)
class ContextBlock:
    text: str = ""
    tokens: int = 0
    tokenizer: str = ""
    included: list[str] = field(default_factory=list)  # ids, in the block's order
    folded: list[str] = field(default_factory=list)
    omitted: list[str] = field(default_factory=list)
    forms: list[str] = field(default_factory=list)  # of each included memory: full, summary, triple


class Assembler:
    """``select`` is handed to the recall: it picks, from the ranked memories, those the block
    holds (and so the recall reinforces), and keeps the block."""

    def __init__(self, max_tokens: int, counter: TokenCounter, max_bytes: int,
                 summary_chars: int = 160) -> None:
        self.max_tokens, self.counter = max_tokens, counter
        self.summary_chars = summary_chars
        # Tokens alone do not bound a block: the model's tokenizer makes one unknown token of a
        # word longer than 100 characters, so a few long words could fill megabytes. Bytes
        # bound it too, at most BYTES_PER_TOKEN a token (far above any real text's) and within
        # one answer.
        self.max_bytes = min(max_bytes, max_tokens * BYTES_PER_TOKEN + FRAME_BYTES)
        self.block = ContextBlock(tokenizer=counter.name)

    @staticmethod
    def _line(m: Memory) -> str:
        day = datetime.fromtimestamp(m.created_at, UTC).strftime("%Y-%m-%d")
        return f"- [{day}] {' '.join(m.content.split())}"

    def _forms(self, m: Memory, full: str) -> list[tuple[str, str]]:
        """The lines a memory may be shown by, longest first: its text, then its summary and
        its triple (understanding/resolutions.py) where each is shorter than the one before.
        A short form says what it is, so that the agent reading it knows more was said."""
        day = datetime.fromtimestamp(m.created_at, UTC).strftime("%Y-%m-%d")
        out = [(FULL, full)]
        summary = resolutions.summary_of(m, self.summary_chars)
        if summary and len(summary) < len(" ".join(m.content.split())):
            out.append((SUMMARY, f"- [{day}] (summary) {summary}"))
        if (t := resolutions.triple_of(m)) is not None:
            line = f"- [{day}] (fact) {resolutions.triple_text(t)}"
            if len(line) < len(out[-1][1]):
                out.append((TRIPLE, line))
        return out

    def _render(self, taken: list[_Entry], folded: int, omitted: int) -> str:
        if not taken:
            return ""
        lines, current = [HEADER], -1
        for e in sorted(taken, key=lambda e: e.place):
            z = e.place[0]
            if z != current:
                lines.append(f"## {'archive (forgotten)' if e.zone is None else e.zone.name.lower()}")
                current = z
            lines.append(e.text)
        notes = [f"{n} {what}" for n, what in ((folded, "repeats folded in"),
                                              (omitted, "less relevant left out to fit"
                                                        f" {self.max_tokens} tokens")) if n]
        if notes:
            lines.append(f"({'; '.join(notes)})")
        return "\n".join(lines)

    def select(self, mems: Sequence[Memory], zones: Sequence[Zone | None]) -> list[int]:
        """Which of the ranked memories (most relevant first) the block holds, in rank order."""
        taken: list[_Entry] = []
        folded: dict[int, list[str]] = {}  # taken entry's index -> ids folded into it
        omitted: list[str] = []
        rank = {m.id: i for i, m in enumerate(mems)}
        used = self.counter.count([HEADER])[0] + 8  # a zone heading and the closing note
        used_bytes = FRAME_BYTES
        for i, (m, z) in enumerate(zip(mems, zones, strict=True)):
            text = self._line(m)
            terms = Repeats.terms(m.content)
            into = next((t for t in taken if same_text(m.content, t.memory.content)
                         or Repeats.nested(terms, t.terms)), None)
            if into is not None and terms <= into.terms:  # says nothing more: folded
                folded.setdefault(into.index, []).append(m.id)
                continue
            if into is None:
                # The shortest form that fits (the text when it does): bytes first, so a line
                # that cannot fit is never tokenized and the work is bounded by the budget, not
                # by what the recall found.
                for form, line in self._forms(m, text):
                    size = len(line.encode()) + 32  # the line and, at worst, its zone's heading
                    if used_bytes + size > self.max_bytes:
                        continue
                    e = _Entry(i, m, z, line, terms, self.counter.count([line])[0], form)
                    if used + e.cost + 2 <= self.max_tokens:  # 2: its zone's heading
                        taken.append(e)
                        used += e.cost + 2
                        used_bytes += size
                        break
                else:
                    omitted.append(m.id)
                continue
            size = len(text.encode()) + 32
            old_bytes = len(into.text.encode()) + 32
            if used_bytes + size - old_bytes > self.max_bytes:
                omitted.append(m.id)
                continue
            e = _Entry(i, m, z, text, terms, self.counter.count([text])[0])
            # Says more: its wording (and zone) takes the place of the one taken, which is
            # folded; if it does not fit, it is left out, its extra words unsaid.
            extra = e.cost - into.cost
            if used + extra + 2 <= self.max_tokens:
                folded.setdefault(into.index, []).append(into.memory.id)
                into.memory, into.text, into.terms, into.zone, into.cost, into.form = (
                    e.memory, e.text, e.terms, e.zone, e.cost, FULL)
                used += extra
                used_bytes += size - old_bytes
            else:
                omitted.append(e.memory.id)
        # Counted whole: drop the least relevant until the block fits.
        while True:
            # Only taken entries have folded ones (a dropped entry's go with it).
            text = self._render(taken, sum(map(len, folded.values())), len(omitted))
            tokens = self.counter.count([text])[0] if text else 0
            if tokens <= self.max_tokens:
                break
            last = taken.pop()
            omitted += [last.memory.id, *folded.pop(last.index, [])]
        self.block.text, self.block.tokens = text, tokens
        shown = sorted(taken, key=lambda e: e.place)
        self.block.included = [e.memory.id for e in shown]
        self.block.forms = [e.form for e in shown]
        self.block.folded = [mid for e in taken for mid in folded.get(e.index, [])]
        self.block.omitted = sorted(omitted, key=rank.__getitem__)  # most relevant first
        # The memory whose wording an entry shows is the one the agent was given.
        chosen = {e.memory.id for e in taken}
        return [i for i, m in enumerate(mems) if m.id in chosen]


Select = Callable[[Sequence[Memory], Sequence[Zone | None]], list[int]]
