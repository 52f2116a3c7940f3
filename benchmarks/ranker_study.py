"""What a learned ranker over the recall's candidates could gain on LoCoMo, measured honestly
(leave one conversation out) before building it into the service.

Stores the dev conversations in-process (the protocol of ``celestial eval locomo``: context
turns, session ids, created times), then for each question takes the recall's own candidate pool
(the zones' candidates of a limit-10 recall, not reinforced) with their four exact signals and
payloads, keeps the best ``--rerank`` by the hand-weighted relevance, and computes for each a
feature row from what any tenant's memories hold (no speaker by name; the adjacent turns and a
candidate's stored vector are found by its place in its session, which the service keeps as
session-order relations and stored vectors). The rows are cached (``--cache``), so models can be
tried without storing again.

Then LightGBM's lambdarank is trained on four conversations and scored on the fifth, all five
rotations, and R@5 / R@10 by category is printed beside the hand-weighted order: with every
feature (three seeds), with fewer candidates, without each group of features, and the share of
the gain each feature carries in a model trained on all five.

    .venv/bin/python benchmarks/ranker_study.py ../shared/data/locomo-dev
"""

from __future__ import annotations

import argparse
import os
import pickle
import re
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import numpy.typing as npt
from celestial_client.cli.locomo_eval import CATEGORIES, load
from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from locomo_inprocess import gather, store, turn_ids

Floats = npt.NDArray[np.float64]
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
WORD = re.compile(r"[a-z0-9]+")


@dataclass
class Pool:
    """One question's re-ranked candidates."""

    conversation: int
    category: int
    evidence: set[str]
    labels: list[set[str]]  # per candidate: the dia_ids it stands for (its own and merged repeats)
    features: Floats  # rows: candidates; columns: FEATURES
    relevance: Floats  # the hand-weighted order's score


FEATURES = [
    "dense", "context_dense", "keywords", "context_keywords", "relevance",
    "rank_dense", "rank_context_dense", "rank_keywords", "rank_context_keywords", "rank_relevance",
    "gap_to_best", "sentence_max", "sentence_gain",
    "session_best", "session_count", "neighbour_best", "neighbour_sentence_best",
    "entity_share", "entity_count", "asked_entities",
    "query_words_in_content", "log_chars", "has_context",
    "zone", "importance", "log_recall_count", "age_rank",
    "q_when", "q_who", "q_where", "q_what", "q_how", "q_why", "q_yes_no", "q_words",
    "has_date", "time_words", "names", "is_question", "session_rank",
    "prev_dense", "next_dense", "adjacent_dense_max", "adjacent_words",
    "prf_centroid", "prf_top1", "prf_best_other",
]
QUESTION_WORDS = ("when", "who", "where", "what", "how", "why")
YES_NO = ("did", "does", "do", "is", "are", "was", "were", "would", "could", "can", "will",
          "has", "have")
TIME_WORDS = re.compile(r"\b(yesterday|today|tonight|tomorrow|last|next|ago|week|weekend|month|"
                        r"year|morning|evening|night|monday|tuesday|wednesday|thursday|friday|"
                        r"saturday|sunday|january|february|march|april|may|june|july|august|"
                        r"september|october|november|december|since|until|recently|soon)\b")


def ranks(x: Floats) -> Floats:
    """0 for the best, as a share of the candidates."""
    order = np.argsort(-x, kind="stable")
    r = np.empty(len(x))
    r[order] = np.arange(len(x))
    return r / max(len(x) - 1, 1)


def sentences(text: str) -> list[str]:
    return [s for s in SENTENCE_END.split(text) if s.strip()] or [text]


def collect(paths: list[Path], rerank: int) -> list[Pool]:
    pools: list[Pool] = []
    with tempfile.TemporaryDirectory() as tmp:
        clock = ManualClock(1_600_000_000.0)
        service = build_service(Settings(data_dir=Path(tmp), rebalance_interval_s=0,
                                         recall_expand=0), clock=clock)
        embed = service.embedder.embed
        try:
            for ci, path in enumerate(paths):
                conv = load(path)
                tenant = f"c{ci}"
                store(service, clock, conv, tenant)
                sentence_cache: dict[str, Floats] = {}
                # Each turn's place in its session and its embedding: what the service has as
                # session-order relations and stored vectors, for the adjacent turns' signals.
                turns = [i for _, items in conv.sessions for i in items]
                turn_vecs = np.asarray(embed([t.content for t in turns]), dtype=np.float64)
                place = {t.metadata["dia_id"]: k for k, t in enumerate(turns)}
                adjacent = (turns, turn_vecs, place)
                for text, evidence, category in conv.questions:
                    got = gather(service, tenant, text, rerank)
                    ids, signals, relevance, mems = got.ids, got.signals, got.relevance, \
                        got.memories
                    qv = np.asarray(embed([text])[0], dtype=np.float64)
                    todo = [m.content for m in mems if m.content not in sentence_cache]
                    if todo:
                        parts = [sentences(c) for c in todo]
                        flat = [p for ps in parts for p in ps]
                        vecs = np.asarray(embed(flat), dtype=np.float64)
                        at = 0
                        for c, ps in zip(todo, parts, strict=True):
                            sentence_cache[c] = vecs[at:at + len(ps)]
                            at += len(ps)
                    asked = set(got.asked)
                    rows = features(text, qv, ids, signals, relevance, mems, sentence_cache,
                                    asked, adjacent)
                    pools.append(Pool(ci, category, evidence, [turn_ids(m) for m in mems],
                                      rows, relevance))
                print(f"{conv.name}: pools taken", file=sys.stderr, flush=True)
        finally:
            service.close()
    return pools


def features(text: str, qv: Floats, ids: list[str], signals: Floats, relevance: Floats,
             mems: list[Any], sentence_cache: dict[str, Floats], asked: set[str],
             adjacent: tuple[list[Any], Floats, dict[str, int]]) -> Floats:
    n = len(ids)
    s = np.array(signals, dtype=np.float64)
    s[:, :2] = np.clip(s[:, :2], 0, 1)
    best = s[:, 2:].max(axis=0)
    s[:, 2:] = np.divide(s[:, 2:], best, out=np.zeros_like(s[:, 2:]), where=best > 0)
    sent = np.array([float((sentence_cache[m.content] @ qv).max()) for m in mems])
    gain = np.maximum(sent - s[:, 0], 0)
    index = {mid: i for i, mid in enumerate(ids)}
    by_session: dict[str, list[int]] = defaultdict(list)
    for i, m in enumerate(mems):
        if m.session_id:
            by_session[m.session_id].append(i)
    session_best = np.zeros(n)
    session_count = np.zeros(n)
    neighbour_best = np.zeros(n)
    neighbour_sent = np.zeros(n)
    for i, m in enumerate(mems):
        mates = [j for j in by_session.get(m.session_id, []) if j != i]
        session_count[i] = len(mates)
        session_best[i] = max((relevance[j] for j in mates), default=0.0)
        near = [index[e.other] for e in m.edges if e.other in index and e.other != m.id] \
            if m.edges else []
        neighbour_best[i] = max((relevance[j] for j in near), default=0.0)
        neighbour_sent[i] = max((sent[j] for j in near), default=0.0)
    has = np.array([[e in set(m.entities) for e in asked] for m in mems], dtype=np.float64) \
        if asked else np.zeros((n, 0))
    if asked:
        idf = np.log1p(n / (1.0 + has.sum(axis=0)))
        share = has @ idf / max(idf.sum(), 1e-9)
    else:
        share = np.zeros(n)
    qwords = set(WORD.findall(text.lower())) - STOP
    overlap = np.array([len(qwords & set(WORD.findall(m.content.lower()))) / max(len(qwords), 1)
                        for m in mems])
    created = np.array([m.created_at for m in mems])
    cols = [s[:, 0], s[:, 1], s[:, 2], s[:, 3], relevance,
            ranks(s[:, 0]), ranks(s[:, 1]), ranks(s[:, 2]), ranks(s[:, 3]), ranks(relevance),
            relevance.max() - relevance, sent, gain,
            session_best, session_count, neighbour_best, neighbour_sent,
            share, has.sum(axis=1), np.full(n, len(asked)),
            overlap, np.log1p([len(m.content) for m in mems]),
            np.array([1.0 if m.context else 0.0 for m in mems]),
            np.array([float(m.zone) for m in mems]), np.array([m.importance for m in mems]),
            np.log1p([m.recall_count for m in mems]), ranks(created)]
    words = WORD.findall(text.lower())
    first = words[0] if words else ""
    cols += [np.full(n, float(first == w or (w in words[:3]))) for w in QUESTION_WORDS]
    cols += [np.full(n, float(first in YES_NO)), np.full(n, float(len(words)))]
    cols += [np.array([float(any(e.startswith("date:") for e in m.entities)) for m in mems]),
             np.array([float(len(TIME_WORDS.findall(m.content.lower()))) for m in mems]),
             np.array([float(sum(e.startswith("name:") for e in m.entities)) for m in mems]),
             np.array([float(m.content.rstrip().endswith("?")) for m in mems])]
    # Its place among the candidates of its own session, by relevance.
    session_rank = np.zeros(n)
    for mates in by_session.values():
        order = sorted(mates, key=lambda j: -relevance[j])
        for r, j in enumerate(order):
            session_rank[j] = r
    cols.append(session_rank)
    turns, turn_vecs, place = adjacent
    cos = turn_vecs @ qv
    prev, nxt, words = np.zeros(n), np.zeros(n), np.zeros(n)
    for i, m in enumerate(mems):
        k = place.get(m.metadata.get("dia_id", ""))
        if k is None:
            continue
        for d, out in ((-1, prev), (1, nxt)):
            j = k + d
            if 0 <= j < len(turns) and turns[j].session_id == m.session_id:
                out[i] = cos[j]
                near = set(WORD.findall(turns[j].content.lower()))
                words[i] = max(words[i], len(qwords & near) / max(len(qwords), 1))
    cols += [prev, nxt, np.maximum(prev, nxt), words]
    # Pseudo-relevance feedback: how near each candidate is to the best few by relevance (their
    # stored vectors), a sign of the topic the question is about.
    own = np.array([turn_vecs[place[m.metadata["dia_id"]]] if m.metadata.get("dia_id") in place
                    else np.zeros(turn_vecs.shape[1]) for m in mems])
    top = np.argsort(-relevance, kind="stable")[:5]
    centroid = own[top].mean(axis=0)
    centroid /= max(float(np.linalg.norm(centroid)), 1e-9)
    sims = own @ own[top].T
    for k, t in enumerate(top):
        sims[t, k] = -1.0  # not itself
    cols += [own @ centroid, own @ own[top[0]], sims.max(axis=1)]
    return np.stack(cols, axis=1)


STOP = frozenset((
    "a", "an", "the", "and", "or", "of", "to", "in", "on", "at", "for", "with", "is", "are", "was",
    "were", "be", "been", "do", "does", "did", "what", "when", "where", "who", "whom", "which",
    "how", "why", "that", "this", "these", "those", "it", "its", "as", "by", "from", "has", "have",
    "had", "will", "would", "can", "could", "should", "i", "you", "he", "she", "we", "they", "his",
    "her", "their", "our", "my", "your", "me", "him", "them", "us", "about", "after", "before",
    "than", "then", "there",
))


def recall_at(pool: Pool, order: npt.NDArray[np.int64], k: int) -> float:
    got = set().union(*(pool.labels[i] for i in order[:k]))
    return len(pool.evidence & got) / len(pool.evidence)


def report(label: str, pools: list[Pool], scores: list[Floats]) -> dict[str, float]:
    r5, r10 = [], []
    cat: dict[int, list[float]] = defaultdict(list)
    for p, sc in zip(pools, scores, strict=True):
        order = np.argsort(-sc, kind="stable")
        r5.append(recall_at(p, order, 5))
        r10.append(recall_at(p, order, 10))
        cat[p.category].append(r5[-1])
    cats = " ".join(f"{CATEGORIES[c]} {np.mean(v):.3f}" for c, v in sorted(cat.items()))
    print(f"| {label} | {np.mean(r5):.3f} | {np.mean(r10):.3f} | {cats} |", flush=True)
    return {"r5": float(np.mean(r5)), "r10": float(np.mean(r10))}


def grades(p: Pool) -> npt.NDArray[np.int64]:
    return np.array([1 if p.evidence & lab else 0 for lab in p.labels])


def loo(pools: list[Pool], columns: list[int], params: dict[str, Any], rounds: int) -> list[Floats]:
    import lightgbm as lgb

    out: list[Floats | None] = [None] * len(pools)
    for held in sorted({p.conversation for p in pools}):
        train = [p for p in pools if p.conversation != held]
        x = np.concatenate([p.features[:, columns] for p in train])
        y = np.concatenate([grades(p) for p in train])
        group = [len(p.labels) for p in train]
        model = lgb.train(params, lgb.Dataset(x, y, group=group), num_boost_round=rounds)
        for i, p in enumerate(pools):
            if p.conversation == held:
                out[i] = np.asarray(model.predict(p.features[:, columns]), dtype=np.float64)
    return [o if o is not None else np.zeros(0) for o in out]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--rerank", type=int, default=50)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/ranker_pools.pkl"))
    args = parser.parse_args()
    if args.cache.exists():
        pools = pickle.loads(args.cache.read_bytes())
    else:
        pools = collect(sorted(args.data.glob("*.json")), args.rerank)
        args.cache.write_bytes(pickle.dumps(pools))
    held = np.mean([len(p.evidence & set().union(*p.labels)) / len(p.evidence) for p in pools])
    print(f"{len(pools)} questions; evidence within the re-ranked candidates: {held:.3f}\n")
    print("| order | R@5 | R@10 | R@5 by category |\n|---|---|---|---|")
    report("hand-weighted relevance", pools, [p.relevance for p in pools])
    params = {"objective": "lambdarank", "metric": "ndcg", "ndcg_eval_at": [5, 10],
              "learning_rate": 0.05, "num_leaves": 15, "min_data_in_leaf": 20,
              "feature_fraction": 0.8, "bagging_fraction": 0.8, "bagging_freq": 1,
              "lambdarank_truncation_level": 20, "seed": 7, "deterministic": True,
              "num_threads": 2, "verbose": -1}
    every = list(range(len(FEATURES)))
    for seed in (7, 8, 9):
        report(f"lambdarank, all features, seed {seed}", pools,
               loo(pools, every, {**params, "seed": seed}, 200))
    for size in (30, 50):
        cut = [Pool(p.conversation, p.category, p.evidence, p.labels[:size], p.features[:size],
                    p.relevance[:size]) for p in pools]
        report(f"lambdarank, all features, top {size}", cut, loo(cut, every, params, 200))
    for group in ("rank_", "sentence", "session", "neighbour", "entity", "q_", "time", "adjacent",
                  "prf"):
        cols = [i for i, f in enumerate(FEATURES) if group not in f]
        report(f"lambdarank, without {group}*", pools, loo(pools, cols, params, 200))
    importance(pools, params)


def importance(pools: list[Pool], params: dict[str, Any]) -> None:
    import lightgbm as lgb

    x = np.concatenate([p.features for p in pools])
    y = np.concatenate([grades(p) for p in pools])
    model = lgb.train(params, lgb.Dataset(x, y, group=[len(p.labels) for p in pools]), 200)
    gain = model.feature_importance("gain")
    gain = gain / gain.sum()
    print("\n| feature | share of the gain |\n|---|---|")
    for i in np.argsort(-gain):
        print(f"| {FEATURES[i]} | {gain[i]:.3f} |")


if __name__ == "__main__":
    main()
