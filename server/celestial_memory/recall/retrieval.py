"""Hybrid recall: what a memory is indexed by, how its relevance is computed, and the zone order.

A memory is indexed four ways (store/payload.py SIGNALS): its content embedded (dense), its
context plus content embedded, its content's keywords and its context plus content's keywords
(BM25 weights; Qdrant applies IDF). Context is text stored with a memory but not part of it, e.g.
the previous turns of a conversation; without it the contextual vectors equal the content ones.
A long memory is also indexed by its passages (recall/passages.py), which count toward its
content signal and weigh its keywords.

Recall runs in two batched round trips:
1. candidates: per zone, one query whose prefetches (content vector, both keyword vectors) are
   fused by RRF inside the engine; the five zone queries go as one batch;
2. rescoring: the candidates' exact scores by all four signals, one batch of four queries over
   their ids. Candidates missing from one prefetch would otherwise count as 0 there, which cost
   0.02-0.03 of R@10 on LoCoMo (docs/design.md, "Recall").

Relevance is a weighted sum of the cosines (clipped at 0) and of the keyword scores divided by
the best keyword score among the candidates (BM25 has no fixed scale), over the sum of weights:
it lies in [0, 1] and is comparable across zones, which per-zone fusion scores are not.

Entities: a query's entities (graph/entities.py, the rules a Store uses) that a candidate
mentions add ``entity_weight`` times the share of them it mentions, each weighed by its IDF among
the candidates (a name every candidate mentions, a conversation's speaker say, counts little).
On LoCoMo this lifted R@5 by 0.007 and multi-hop by 0.009 at 0.1, no category lower
(docs/design.md, "Recall that uses connections").

Zone order: among the memories that pass the gate (``min_relevance``), those within ``zone_margin``
of the best relevance come first in Core-to-Cloud order; everything else follows by relevance.
So an inner zone goes first only on a near tie, and zone order never buries a clearly better
match from an outer zone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from celestial_memory.config import Settings
from celestial_memory.domain.models import HybridQuery, IndexVectors, Vector
from celestial_memory.domain.signals import entity_share, scaled
from celestial_memory.encoding.embedding import Embedder
from celestial_memory.graph.entities import RuleExtractor
from celestial_memory.graph.entity_index import ref
from celestial_memory.recall.keywords import KeywordEncoder
from celestial_memory.recall.passages import KEYWORD_SCALE, passages

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Ranked:
    index: int  # into the candidate list
    relevance: float


class Retrieval:
    def __init__(self, settings: Settings, embedder: Embedder, keeps_passages: bool = True) -> None:
        self.settings = settings
        self.embedder = embedder
        # False over a store made before passages, which could not keep them (store/engine.py).
        self.keeps_passages = keeps_passages
        self.keywords = KeywordEncoder(
            settings.keyword_k1, settings.keyword_b,
            settings.keyword_avg_len, settings.context_keyword_avg_len,
        )
        self.weights = np.asarray(settings.relevance_weights, dtype=np.float64)
        self._entities = RuleExtractor()

    def index_vectors(
        self, contents: Sequence[str], contexts: Sequence[str], dense: Sequence[Vector],
        embedded_here: Sequence[bool], given_context_dense: Sequence[Vector | None] = (),
        passages_here: Sequence[bool] | None = None, between: Callable[[], None] = lambda: None,
    ) -> list[IndexVectors]:
        """The non-content vectors of new memories. The contextual text is embedded only where
        there is context and the server embedded the content (a caller's own vectors may come
        from another model); ``given_context_dense`` (an import's) is used where not None.
        A long content's passages are embedded where ``passages_here`` (by default where the
        server embedded the content): an import or a rewrite embeds them from the text, as
        it rebuilds the keywords. Passages are embedded a chunk at a time, ``between`` called
        before each (a caller's cancellation check), so that one write's passages neither
        hold the encoder for long at once nor outlive the caller's deadline."""
        joined = [f"{c}\n{t}" if c else t for c, t in zip(contexts, contents, strict=True)]
        todo = [i for i, c in enumerate(contexts) if c and embedded_here[i]]
        ctx_dense: dict[int, Vector] = {
            i: v for i, v in enumerate(given_context_dense) if v is not None
        }
        if todo:
            ctx_dense.update(zip(todo, self.embedder.embed([joined[i] for i in todo]), strict=True))
        wanted = embedded_here if passages_here is None else passages_here
        over = self.settings.passages_over_chars if self.keeps_passages else 0
        cut = {i: passages(t, self.settings.passage_chars) for i, t in enumerate(contents)
               if wanted[i] and over and len(t) > over}
        embedded = self._embedded(cut, between)
        return [
            IndexVectors(
                context_dense=np.asarray(ctx_dense.get(i, dense[i]), dtype=np.float32),
                keywords=self.keywords.document(contents[i]),
                context_keywords=self.keywords.document(joined[i], contextual=True),
            ) if i not in cut else IndexVectors(
                context_dense=np.asarray(ctx_dense.get(i, dense[i]), dtype=np.float32),
                keywords=self.keywords.best_of(cut[i], scale=KEYWORD_SCALE),
                context_keywords=self.keywords.best_of(
                    [f"{contexts[i]}\n{p}" if contexts[i] else p for p in cut[i]],
                    contextual=True, scale=KEYWORD_SCALE),
                passages=embedded[i],
            )
            for i in range(len(contents))
        ]

    def _embedded(self, cut: dict[int, list[str]],
                  between: Callable[[], None]) -> dict[int, Vector]:
        """Each long content's passages embedded, in chunks of what the encoder runs at once."""
        if not cut:
            return {}
        texts = [p for parts in cut.values() for p in parts]
        step = max(1, self.settings.embed_max_batch) * getattr(self.embedder, "lanes", 1)
        chunks = []
        for start in range(0, len(texts), step):
            between()
            chunks.append(self.embedder.embed(texts[start:start + step]))
        rows = np.concatenate(chunks)
        out: dict[int, Vector] = {}
        at = 0
        for i, parts in cut.items():
            out[i] = np.asarray(rows[at:at + len(parts)], dtype=np.float32)
            at += len(parts)
        return out

    def query(self, text: str, dense: Vector) -> HybridQuery:
        # Candidates are rescored exactly, so the ANN beam can be narrow: at 100,000 memories
        # (float vectors) ef 48 kept 99.4-99.9% of the exact top 30 per zone, and the five zone
        # queries took 5.7 ms against 8.9 with the engine's default.
        ef = self.settings.recall_hnsw_ef
        return HybridQuery(dense, self.keywords.query(text), ef or None)

    def entities(self, text: str) -> list[str]:
        """The entity ids a query mentions (none when the entity signal is off)."""
        if not text or self.settings.entity_weight <= 0:
            return []
        return list(dict.fromkeys(ref(e) for e in self._entities.extract(text)))

    def with_entities(self, relevance: FloatArray, asked: Sequence[str],
                      mentions: Sequence[Sequence[str]] | None) -> FloatArray:
        """``relevance`` plus the entity signal (module docstring), still in [0, 1]."""
        if not asked or mentions is None or len(relevance) == 0:
            return relevance
        share, _ = entity_share(asked, mentions)
        return np.asarray(np.clip(relevance + self.settings.entity_weight * share, 0.0, 1.0),
                          dtype=np.float64)

    def candidates_per_zone(self, limit: int) -> int:
        return max(self.settings.recall_candidates, 3 * limit)

    def relevance(self, scores: FloatArray, keywords: bool = True) -> FloatArray:
        """Rows: candidates; columns: SIGNALS (dense, context dense, keywords, context keywords).
        A query without keywords (a caller's vector alone) is weighed on the dense signals."""
        if len(scores) == 0:
            return np.zeros(0)
        s = scaled(scores)
        w = self.weights if keywords else np.where(np.arange(4) < 2, self.weights, 0.0)
        if w.sum() <= 0:  # weights that count only keywords, and no keywords in the query
            w = np.array([1.0, 0.0, 0.0, 0.0])
        return np.asarray(np.clip(s @ w / w.sum(), 0.0, 1.0), dtype=np.float64)


def zone_order(
    ids: Sequence[str], zones: Sequence[int], relevance: FloatArray, gate: float, margin: float,
    by_zone: bool, key: FloatArray | None = None,
) -> list[Ranked]:
    """Indices of the candidates to return, best first (see the module docstring). ``key``,
    when given (the learned ranker's, ranking/order.py), orders within each tier instead of
    the relevance; the gate and the near ties are still the relevance's. Exact ties go by
    memory id: the engines list equal candidates in their own orders, and both must answer
    alike."""
    if len(relevance) == 0:
        return []
    best = float(relevance.max())
    z = np.asarray(zones, dtype=np.int64)
    passing = relevance >= gate
    ahead = passing & (relevance >= margin * best) if by_zone else np.zeros_like(passing)
    # lexsort: last key is primary. Ahead first; among those by zone; then by the key; then id.
    tier = np.where(ahead, 0, 1)
    zone_key = np.where(ahead, z, 0)
    order = np.lexsort((np.asarray(ids, dtype=str), -(relevance if key is None else key),
                        zone_key, tier))
    return [Ranked(int(i), float(relevance[i])) for i in order if passing[i]]
