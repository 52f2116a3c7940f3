"""Keyword (sparse) vectors for hybrid recall: BM25 term weights, IDF applied by Qdrant.

Term weights come from Qdrant Edge's BM25 model (English stemming, stop words removed), so the
embedded and the remote backend index the same terms. Qdrant applies IDF at query time
(``Modifier.Idf`` on the sparse vector), over the whole collection.

Korean is agglutinative: particles stick to nouns ("수업에" = "수업" + "에"), so a whole-word
index would not match the bare noun a query uses. Every Hangul word of three or more syllables is
therefore also indexed as its syllable bigrams, which carry the stem ("수업에" -> "수업", "업에").
Queries get the same expansion, so a query with a particle still finds the bare noun.

The terms of one text are bounded, whatever it holds: a Hangul run longer than MAX_HANGUL_WORD
syllables is no word (only its first syllables give bigrams), a text gives at most MAX_BIGRAMS
bigrams, and a keyword vector keeps at most MAX_TERMS terms (the heaviest, ties by term). Each
term is a posting in the engine's inverted index, so an unbounded count (one 32,768-syllable
"word" gave 32,762 terms and seconds of indexing) would let one memory cost what thousands do.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import qdrant_edge as qe
from celestial_memory.domain.models import Sparse

MAX_HANGUL_WORD = 24  # syllables: the longest Korean words are far shorter
MAX_BIGRAMS = 2048
MAX_TERMS = 4096  # a 32,768-character English memory has about 2,000 distinct stems
_HANGUL_WORD = re.compile(r"[\uac00-\ud7a3]{3,}")


def expand_hangul(text: str) -> str:
    """Append the syllable bigrams of long Hangul words (see the module docstring)."""
    grams: list[str] = []
    for m in _HANGUL_WORD.finditer(text):
        w = m[0][:MAX_HANGUL_WORD]
        grams += (w[i:i + 2] for i in range(len(w) - 1))
        if len(grams) >= MAX_BIGRAMS:
            del grams[MAX_BIGRAMS:]
            break
    return f"{text} {' '.join(grams)}" if grams else text


def _bounded(indices: list[int], values: list[float]) -> Sparse:
    if len(indices) <= MAX_TERMS:
        return Sparse(indices, values)
    keep = sorted(sorted(range(len(indices)), key=lambda i: (-values[i], indices[i]))[:MAX_TERMS])
    return Sparse([indices[i] for i in keep], [values[i] for i in keep])


class KeywordEncoder:
    """BM25 document and query vectors; one model per text kind because the average length
    differs (a memory's content versus content plus its context)."""

    def __init__(self, k1: float, b: float, content_avg_len: float, context_avg_len: float):
        self._content = qe.Bm25(qe.Bm25Config(k=k1, b=b, avg_len=content_avg_len))
        self._contextual = qe.Bm25(qe.Bm25Config(k=k1, b=b, avg_len=context_avg_len))

    def document(self, text: str, contextual: bool = False) -> Sparse:
        model = self._contextual if contextual else self._content
        v = model.embed_document(expand_hangul(text))
        return _bounded(list(v.indices), list(v.values))

    def best_of(self, texts: Sequence[str], contextual: bool = False,
                scale: float = 1.0) -> Sparse:
        """Each term at ``scale`` times its weight in the text of ``texts`` that weighs it most:
        a long memory's keywords as its passages score them, so its length does not bury a
        term (BM25 weighs a term of a 20,000-character text tens of times down)."""
        best: dict[int, float] = {}
        for t in texts:
            v = self.document(t, contextual)
            for i, w in zip(v.indices, v.values, strict=True):
                if w > best.get(i, 0.0):
                    best[i] = w
        return _bounded(list(best), [w * scale for w in best.values()])

    def query(self, text: str) -> Sparse:
        # The query side has no length normalisation: both models give the same weights.
        v = self._content.embed_query(expand_hangul(text))
        return _bounded(list(v.indices), list(v.values))
