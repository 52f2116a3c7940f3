"""Repeats: a new memory that says again what a live memory of its tenant says is merged into it
instead of being stored as a copy (docs/design.md, "Repeats").

Two texts repeat each other when both hold:

1. their content embeddings are close: cosine at least ``merge_similarity`` (0.9 by default);
2. the words of one (lower-cased runs of letters and digits, any script, nothing dropped)
   are all words of the other. Rewording that only adds or drops words merges ("I love pizza",
   "I really love pizza"); a word replaced by another does not, however close the embeddings:
   "the meeting is on Tuesday" and "the meeting is on Thursday" embed at 0.90 but each has a
   word the other lacks, so both are kept. Words are not stemmed and no word is dropped as a
   stop word: "note c" and "note d" differ by a letter that a keyword index would drop. A word
   added that negates ("not", "never", "n't", Korean "안", "못", "않-", "없-") keeps the two
   apart: "I'm not allergic to peanuts" says the opposite of "I'm allergic to peanuts".

The memory that stays (the one stored first) keeps the wording that says more: its own, unless
the repeat's words strictly contain its words, and then it takes the repeat's wording and
vectors, so that recall finds every term either said. Each repeat's wording and provenance (id,
session, agent, time, metadata, context) go into ``Memory.merged`` (the first MAX_KEPT of them),
and the memory's own first wording too when it was replaced; the memory takes the higher
importance, the pin and the union of the tags. A repeat counts as a mention (the recall count goes
up and freshness starts again, as a recall does). The search for repeats is one batched
nearest-neighbour query over the tenant's live memories plus one payload read; the batch's own
items are compared with numpy.

``groups`` finds the repeats among memories stored before (``celestial consolidate``): oldest
first, each memory not yet taken keeps the live memories that repeat it directly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np
from celestial_memory.config import Settings
from celestial_memory.domain.models import MAX_KEPT, Memory, Provenance, Vector, content_hash
from celestial_memory.store.repository import MemoryRepository

_WORD = re.compile(r"\w+")
# Words that negate, as _WORD splits them ("don't" -> "don", "t").
_NEGATIONS = frozenset({
    "not", "no", "never", "nor", "none", "nothing", "nobody", "neither", "cannot", "t",
    "don", "doesn", "didn", "isn", "wasn", "aren", "weren", "won", "wouldn", "shouldn",
    "couldn", "haven", "hasn", "hadn", "mustn", "안", "못",
})
_NEGATING_STEMS = ("않", "없")
NEAREST = 4  # stored memories a new one is compared with
# A memory keeps the wording and provenance of its first MAX_KEPT repeats; later ones count as
# mentions only, so a memory repeated thousands of times stays readable (each entry is its whole
# text). The entries are bounded by bytes too (``max_merged_bytes``): 64 repeats of a long text
# would not fit one answer, and a memory that cannot be sent can be neither read nor exported.


@dataclass(frozen=True, slots=True)
class Repeat:
    """Item ``index`` repeats the stored memory ``into``, or the batch's item ``of`` (an
    earlier one, itself stored or merged)."""

    index: int
    into: str = ""
    of: int = -1


class Repeats:
    def __init__(self, settings: Settings, store: MemoryRepository) -> None:
        self._threshold = settings.merge_similarity
        self._store = store
        self._max_bytes = settings.max_merged_bytes
        self._max_tags = settings.max_tags

    def keep(self, target: Memory, entries: Sequence[Provenance], first: bool = False) -> None:
        """Add ``entries`` to ``target.merged`` (in front when ``first``) while the list stays
        within MAX_KEPT entries and ``max_merged_bytes``; what does not fit is counted as a
        mention only. An entry put in front pushes the last ones out."""
        kept = [*entries, *target.merged] if first else [*target.merged, *entries]
        out: list[Provenance] = []
        size = 0
        for p in kept[:MAX_KEPT]:
            size += p.size()
            if size > self._max_bytes:
                break
            out.append(p)
        target.merged = out

    @staticmethod
    def terms(text: str) -> frozenset[str]:
        return frozenset(_WORD.findall(text.lower()))

    @staticmethod
    def nested(a: frozenset[str], b: frozenset[str]) -> bool:
        """One's words are all words of the other (nothing replaced, only added or dropped),
        and none of the added words negates. Texts without a word (emoji, symbols) are never
        nested: the model reads every emoji as one unknown token, so "👍" and "👎" embed alike,
        and only the same text repeats them (``same_text``)."""
        if not a and not b:
            return False
        if not (a <= b or b <= a):
            return False
        added = a ^ b
        return not (added & _NEGATIONS or any(w.startswith(_NEGATING_STEMS) for w in added))

    def find(self, tenant: str, new: Mapping[int, Memory], candidates: Sequence[int],
             searched: Mapping[int, Sequence[tuple[str, float]]] | None = None) -> list[Repeat]:
        """The new memories (vectors set) at ``candidates`` that repeat an earlier new one or
        a live memory of ``tenant``; an earlier new one wins. In item order. ``searched``: the
        nearest live memories of some of them, already searched (at least NEAREST each)."""
        if not candidates:
            return []
        terms = {i: self.terms(new[i].content) for i in candidates}
        out: list[Repeat] = []
        unit = np.stack([np.asarray(new[i].vector, dtype=np.float32) for i in candidates])
        unit /= np.maximum(np.linalg.norm(unit, axis=1, keepdims=True), 1e-12)
        cos = unit @ unit.T
        for k, i in enumerate(candidates):
            for k0 in np.flatnonzero(cos[k, :k] >= self._threshold):
                j = candidates[int(k0)]
                if same_text(new[i].content, new[j].content) or self.nested(terms[i], terms[j]):
                    out.append(Repeat(i, of=candidates[int(k0)]))
                    break
        in_batch = {r.index for r in out}
        rest = [i for i in candidates if i not in in_batch]
        # A few nearest, not one: texts the model cannot tell apart (emoji) tie at the top.
        hits = dict(searched or {})
        if unsearched := [i for i in rest if i not in hits]:
            hits.update(zip(unsearched, self._store.nearest_live(
                tenant, [cast(Vector, new[i].vector) for i in unsearched], NEAREST), strict=True))
        close = {i: [mid for mid, score in hits[i][:NEAREST] if score >= self._threshold]
                 for i in rest}
        held = self._store.contents(tenant, sorted({m for ms in close.values() for m in ms}))
        # Texts without a word repeat only as the same text, which their hash finds whatever
        # the ties among their vectors.
        wordless = [i for i in rest if not terms[i]]
        same = self._store.live_by_hash(tenant, [content_hash(new[i].content) for i in wordless])
        for i, mids in close.items():
            into = same.get(content_hash(new[i].content)) if not terms[i] else next(
                (mid for mid in mids if mid in held and (
                    same_text(new[i].content, held[mid])
                    or self.nested(terms[i], self.terms(held[mid])))), None)
            if into is not None:
                out.append(Repeat(i, into=into))
        return sorted(out, key=lambda r: r.index)

    def groups(self, tenant: str) -> tuple[list[tuple[Memory, list[Memory]]], int]:
        """The repeats among the tenant's live memories: (the memory that stays, the ones
        that fold into it) oldest first, and how many memories were examined."""
        # Immutable memories neither take repeats nor fold into others (understanding/).
        live = [m for page in self._store.export_pages(tenant, live_only=True) for m in page
                if not m.immutable]
        live.sort(key=lambda m: (m.created_at, m.id))
        by_id = {m.id: m for m in live}
        terms = {m.id: self.terms(m.content) for m in live}
        # Repeats are symmetric, and the index may find a pair from either side.
        near: dict[str, set[str]] = {m.id: set() for m in live}
        for start in range(0, len(live), 256):
            chunk = live[start:start + 256]
            hits = self._store.nearest_live(tenant, [cast(Vector, m.vector) for m in chunk], 8)
            for m, hit in zip(chunk, hits, strict=True):
                for mid, score in hit:
                    if (mid != m.id and mid in by_id and score >= self._threshold
                            and (same_text(m.content, by_id[mid].content)
                                 or self.nested(terms[m.id], terms[mid]))):
                        near[m.id].add(mid)
                        near[mid].add(m.id)
        taken: set[str] = set()
        out: list[tuple[Memory, list[Memory]]] = []
        for m in live:
            if m.id in taken:
                continue
            taken.add(m.id)
            mine = sorted(near[m.id] - taken, key=lambda i: (by_id[i].created_at, i))
            if mine:
                taken.update(mine)
                out.append((m, [by_id[i] for i in mine]))
        return out, len(live)

    def fold(self, target: Memory, repeat: Memory, repeat_id: str = "") -> bool | None:
        """Merge ``repeat`` (vectors set) into ``target`` if it still repeats it as ``target``
        reads now (an earlier fold may have given it a longer wording): its provenance (under
        ``repeat_id``: the id its request_id names, or its own), the higher importance, the
        pin, the union of tags, and its wording when that says strictly more. None when it no
        longer repeats ``target`` (nothing changed); True when ``target`` took its wording (and
        vectors: the point must be written whole)."""
        a, b = self.terms(repeat.content), self.terms(target.content)
        if not (same_text(repeat.content, target.content) or self.nested(a, b)) or _cosine(
                target.vector, repeat.vector) < self._threshold:
            return None
        more = a > b
        if more:
            if not any(p.id == target.id for p in target.merged):
                self.keep(target, [provenance(target, target.id)], first=True)
            target.content, target.content_hash = repeat.content, content_hash(repeat.content)
            target.context = repeat.context
            target.summary, target.triples = repeat.summary, repeat.triples  # of its wording
            target.vector, target.index = repeat.vector, repeat.index
        self.keep(target, [provenance(repeat, repeat_id)])
        target.importance = max(target.importance, repeat.importance)
        target.pinned = target.pinned or repeat.pinned
        # At most max_tags, as a Store allows: a union of every repeat's tags would grow a
        # memory past what one answer can carry.
        target.tags = list(dict.fromkeys([*target.tags, *repeat.tags]))[:self._max_tags]
        return more


def same_text(a: str, b: str) -> bool:
    """The same text but for white space."""
    return a.split() == b.split()


def _cosine(a: Vector | None, b: Vector | None) -> float:
    if a is None or b is None:
        return 0.0
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    norm = float(np.linalg.norm(x) * np.linalg.norm(y))
    return float(x @ y) / max(norm, 1e-12)


def provenance(m: Memory, mid: str) -> Provenance:
    return Provenance(m.content, m.created_at, mid, m.session_id, m.agent_id, dict(m.metadata),
                      m.context)
