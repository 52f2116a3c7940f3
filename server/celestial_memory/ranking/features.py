"""What a learned ranker knows of one recall's candidates: a row of numbers per candidate, from
what the recall already has (the four signals, the relevance, the zones, the query's entities)
and the candidates' payloads (session, relations, entities, length, importance, recall count,
creation time). Nothing here is particular to a data set: no speaker or dialogue ids, only what
any tenant's memories hold. Training (``make train-ranker``) and serving call the same function,
so the model sees at serving time exactly the features it was trained on.

The words the question and time features look for are English; a memory in another language
gets zeros there, and the signals carry its ranking as before.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from celestial_memory.domain.models import Memory
from celestial_memory.domain.signals import entity_share, scaled

FloatArray = npt.NDArray[np.float64]

FEATURES = (
    "dense", "context_dense", "keywords", "context_keywords", "relevance",
    "rank_dense", "rank_context_dense", "rank_keywords", "rank_context_keywords",
    "rank_relevance", "gap_to_best",
    "session_best", "session_count", "related_best", "session_rank",
    "entity_share", "entity_count", "asked_entities",
    "query_words_in_content", "log_chars", "time_words", "has_date", "names", "is_question",
    "zone", "importance", "log_recall_count", "age_rank",
    "q_when", "q_who", "q_where", "q_what", "q_how", "q_why", "q_yes_no", "q_words",
)
QUESTION_WORDS = ("when", "who", "where", "what", "how", "why")
YES_NO = frozenset(("did", "does", "do", "is", "are", "was", "were", "would", "could", "can",
                    "will", "has", "have"))
WORD = re.compile(r"[a-z0-9]+")
TIME_WORDS = frozenset((
    "yesterday", "today", "tonight", "tomorrow", "last", "next", "ago", "week", "weekend",
    "month", "year", "morning", "evening", "night", "monday", "tuesday", "wednesday", "thursday",
    "friday", "saturday", "sunday", "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december", "since", "until",
    "recently", "soon",
))
STOP = frozenset((
    "a", "an", "the", "and", "or", "of", "to", "in", "on", "at", "for", "with", "is", "are",
    "was", "were", "be", "been", "do", "does", "did", "what", "when", "where", "who", "whom",
    "which", "how", "why", "that", "this", "these", "those", "it", "its", "as", "by", "from",
    "has", "have", "had", "will", "would", "can", "could", "should", "i", "you", "he", "she",
    "we", "they", "his", "her", "their", "our", "my", "your", "me", "him", "them", "us",
    "about", "after", "before", "than", "then", "there",
))


def ranks(x: FloatArray) -> FloatArray:
    """Each value's place from the best (0) to the worst (1), ties in their given order."""
    order = np.argsort(-x, kind="stable")
    out = np.empty(len(x))
    out[order] = np.arange(len(x))
    return out / max(len(x) - 1, 1)


def features(query: str, asked: Sequence[str], signals: FloatArray, relevance: FloatArray,
             memories: Sequence[Memory]) -> FloatArray:
    """Rows: the candidates (``memories``, in the order of ``signals`` and ``relevance``);
    columns: FEATURES."""
    n = len(memories)
    if n == 0:
        return np.zeros((0, len(FEATURES)))
    s = scaled(signals)
    rel = np.asarray(relevance, dtype=np.float64)
    index = {m.id: i for i, m in enumerate(memories)}
    session_best, session_count, session_rank = _sessions(memories, rel)
    related_best = np.array([max((rel[index[e.other]] for e in m.edges
                                  if e.other in index and e.other != m.id), default=0.0)
                             for m in memories])
    wanted = list(dict.fromkeys(asked))
    share, mentioned = entity_share(wanted, [m.entities for m in memories])
    words = WORD.findall(query.lower())
    content_words = set(words) - STOP
    tokens = [WORD.findall(m.content.lower()) for m in memories]  # one pass over each content
    overlap = np.array([len(content_words.intersection(t)) for t in tokens]) / max(
        len(content_words), 1)
    first = words[0] if words else ""
    asks = [float(first == w or w in words[:3]) for w in QUESTION_WORDS]
    columns = [
        s[:, 0], s[:, 1], s[:, 2], s[:, 3], rel,
        ranks(s[:, 0]), ranks(s[:, 1]), ranks(s[:, 2]), ranks(s[:, 3]), ranks(rel),
        rel.max() - rel,
        session_best, session_count, related_best, session_rank,
        share, mentioned, np.full(n, float(len(wanted))),
        overlap, np.log1p([len(m.content) for m in memories]),
        np.array([float(sum(w in TIME_WORDS for w in t)) for t in tokens]),
        np.array([float(any(e.startswith("date:") for e in m.entities)) for m in memories]),
        np.array([float(sum(e.startswith("name:") for e in m.entities)) for m in memories]),
        np.array([float(m.content.rstrip().endswith("?")) for m in memories]),
        np.array([float(m.zone) for m in memories]),
        np.array([m.importance for m in memories]),
        np.log1p([max(m.recall_count, 0) for m in memories]),
        ranks(np.array([m.created_at for m in memories])),
        *(np.full(n, a) for a in asks),
        np.full(n, float(first in YES_NO)), np.full(n, float(len(words))),
    ]
    return np.stack(columns, axis=1)


def _sessions(memories: Sequence[Memory], rel: FloatArray) -> tuple[FloatArray, FloatArray,
                                                                      FloatArray]:
    """Per candidate: the best relevance among the other candidates of its session, how many
    they are, and its own place among them by relevance (0 without a session)."""
    n = len(memories)
    best, count, place = np.zeros(n), np.zeros(n), np.zeros(n)
    by_session: dict[str, list[int]] = defaultdict(list)
    for i, m in enumerate(memories):
        if m.session_id:
            by_session[m.session_id].append(i)
    for members in by_session.values():
        ordered = sorted(members, key=lambda j: -rel[j])
        first = ordered[0]
        second = rel[ordered[1]] if len(ordered) > 1 else 0.0
        for k, j in enumerate(ordered):
            place[j] = k
            count[j] = len(ordered) - 1
            best[j] = second if j == first else rel[first]
    return best, count, place

