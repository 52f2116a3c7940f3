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
from celestial_memory.domain.candidate_facts import CandidateFacts
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
# Every ASCII character WORD does not match, to a space.
_SPACES = str.maketrans({c: " " for c in map(chr, range(128)) if not WORD.fullmatch(c)})
_AT = {name: i for i, name in enumerate(FEATURES)}
_SIGNALS = [_AT[n] for n in ("dense", "context_dense", "keywords", "context_keywords")]
# The columns ranked among the candidates, and the columns they rank.
_RANKED = [_AT[f"rank_{n}"] for n in ("dense", "context_dense", "keywords", "context_keywords",
                                      "relevance")]
_RANKED_OF = [*_SIGNALS, _AT["relevance"]]


def ranks(x: FloatArray) -> FloatArray:
    """Each value's place from the best (0) to the worst (1), ties in their given order; a
    matrix is ranked column by column."""
    order = np.argsort(-x, axis=0, kind="stable")
    out = np.empty(x.shape)
    np.put_along_axis(out, order, np.arange(len(x)).reshape((-1,) + (1,) * (x.ndim - 1)), axis=0)
    return out / max(len(x) - 1, 1)


def features(query: str, asked: Sequence[str], signals: FloatArray, relevance: FloatArray,
             facts: CandidateFacts) -> FloatArray:
    """Rows: the candidates (``facts``, in the order of ``signals`` and ``relevance``);
    columns: FEATURES, written into one array. The numeric columns are computed over all
    candidates at once; the words and entities of each candidate go through Python's sets and
    strings, which over some 30 short texts cost less than numpy's string arrays (measured)."""
    n = len(facts)
    out = np.zeros((n, len(FEATURES)))
    if n == 0:
        return out
    rel = np.asarray(relevance, dtype=np.float64)
    out[:, _SIGNALS] = scaled(signals)
    out[:, _AT["relevance"]] = rel
    out[:, _RANKED] = ranks(out[:, _RANKED_OF])
    out[:, _AT["gap_to_best"]] = rel.max() - rel
    _sessions(facts.session, rel, out)
    out[:, _AT["related_best"]] = _related_best(facts, rel)
    wanted = list(dict.fromkeys(asked))
    out[:, _AT["entity_share"]], out[:, _AT["entity_count"]] = entity_share(wanted,
                                                                           facts.entities)
    out[:, _AT["asked_entities"]] = len(wanted)
    words = WORD.findall(query.lower())
    _words(facts.content, set(words) - STOP, out)
    out[:, _AT["log_chars"]] = np.log1p(np.fromiter(map(len, facts.content), np.float64, n))
    # Each candidate's entity ids in one string, so that str.count finds the kinds in C.
    held = ["\n" + "\n".join(es) for es in facts.entities]
    out[:, _AT["has_date"]] = ["\ndate:" in h for h in held]
    out[:, _AT["names"]] = [h.count("\nname:") for h in held]
    out[:, _AT["is_question"]] = [c.rstrip().endswith("?") for c in facts.content]
    out[:, _AT["zone"]] = facts.zone
    out[:, _AT["importance"]] = facts.importance
    out[:, _AT["log_recall_count"]] = np.log1p(np.maximum(facts.recall_count, 0))
    out[:, _AT["age_rank"]] = ranks(facts.created_at)
    first = words[0] if words else ""
    for w in QUESTION_WORDS:
        out[:, _AT[f"q_{w}"]] = first == w or w in words[:3]
    out[:, _AT["q_yes_no"]] = first in YES_NO
    out[:, _AT["q_words"]] = len(words)
    return out


def _words(contents: Sequence[str], query_words: set[str], out: FloatArray) -> None:
    """Per content: the share of the query's words it holds (each once), and its time words
    (each time)."""
    tokens = [_tokens(c) for c in contents]
    out[:, _AT["query_words_in_content"]] = [len(query_words.intersection(t)) for t in tokens]
    out[:, _AT["query_words_in_content"]] /= max(len(query_words), 1)
    # Each time word as often as it comes, in one pass (a count per word found took 0.6 ms
    # over a 20,000-character memory's tokens, against 0.1).
    out[:, _AT["time_words"]] = [sum(map(TIME_WORDS.__contains__, t)) for t in tokens]


def _tokens(text: str) -> list[str]:
    """WORD's matches in ``text`` lowercased; for ASCII text (most of it) by one translation and
    a split, which cost about half of the regular expression's scan."""
    low = text.lower()
    return low.translate(_SPACES).split() if low.isascii() else WORD.findall(low)


def _related_best(facts: CandidateFacts, rel: FloatArray) -> FloatArray:
    """Per candidate: the best relevance among the other candidates it is related to."""
    index = {mid: i for i, mid in enumerate(facts.ids)}
    values = rel.tolist()  # Python floats: numpy's scalars cost more one at a time
    return np.array([max((values[j] for o in others if (j := index.get(o, i)) != i),
                         default=0.0) for i, others in enumerate(facts.related)],
                    dtype=np.float64)


def _sessions(sessions: Sequence[str], rel: FloatArray, out: FloatArray) -> None:
    """Per candidate: the best relevance among the other candidates of its session, how many
    they are, and its own place among them by relevance (0 without a session)."""
    by_session: dict[str, list[int]] = defaultdict(list)
    for i, session in enumerate(sessions):
        if session:
            by_session[session].append(i)
    n = len(sessions)
    best, count, place = [0.0] * n, [0] * n, [0] * n
    values = rel.tolist()
    for members in by_session.values():
        if len(members) == 1:
            continue  # alone in its session: zeros, as without one
        ordered = sorted(members, key=lambda j: -values[j])  # stable: ties in given order
        top = values[ordered[0]]
        for k, j in enumerate(ordered):
            place[j], count[j], best[j] = k, len(ordered) - 1, top
        best[ordered[0]] = values[ordered[1]]
    out[:, _AT["session_best"]] = best
    out[:, _AT["session_count"]] = count
    out[:, _AT["session_rank"]] = place
