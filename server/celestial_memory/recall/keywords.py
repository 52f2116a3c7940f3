"""Keyword (sparse) vectors for hybrid recall: BM25 term weights, IDF applied by Qdrant.

Term weights come from Qdrant Edge's BM25 model (English stemming, stop words removed), so the
embedded and the remote backend index the same terms. Qdrant applies IDF at query time
(``Modifier.Idf`` on the sparse vector), over the whole collection.

Korean is agglutinative: particles stick to nouns ("수업에" = "수업" + "에"), so a whole-word
index would not match the bare noun a query uses. Every Hangul word of three or more syllables is
therefore also indexed as its syllable bigrams, which carry the stem ("수업에" -> "수업", "업에").
Queries get the same expansion, so a query with a particle still finds the bare noun.
"""

from __future__ import annotations

import re

import qdrant_edge as qe
from celestial_memory.domain.models import Sparse

_HANGUL_WORD = re.compile(r"[\uac00-\ud7a3]{3,}")


def expand_hangul(text: str) -> str:
    """Append the syllable bigrams of long Hangul words (see the module docstring)."""
    grams = [w[i:i + 2] for w in _HANGUL_WORD.findall(text) for i in range(len(w) - 1)]
    return f"{text} {' '.join(grams)}" if grams else text


class KeywordEncoder:
    """BM25 document and query vectors; one model per text kind because the average length
    differs (a memory's content versus content plus its context)."""

    def __init__(self, k1: float, b: float, content_avg_len: float, context_avg_len: float):
        self._content = qe.Bm25(qe.Bm25Config(k=k1, b=b, avg_len=content_avg_len))
        self._contextual = qe.Bm25(qe.Bm25Config(k=k1, b=b, avg_len=context_avg_len))

    def document(self, text: str, contextual: bool = False) -> Sparse:
        model = self._contextual if contextual else self._content
        v = model.embed_document(expand_hangul(text))
        return Sparse(list(v.indices), list(v.values))

    def query(self, text: str) -> Sparse:
        # The query side has no length normalisation: both models give the same weights.
        v = self._content.embed_query(expand_hangul(text))
        return Sparse(list(v.indices), list(v.values))
