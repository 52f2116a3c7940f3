"""Which extra ranking signals would lift LoCoMo evidence recall, measured before building one.

Stores the conversations in-process (embedded store, the bundled model, the LoCoMo protocol of
``celestial eval locomo``), takes the service's top 50 per question (plain hybrid, nothing
reinforced), then re-ranks those candidates offline with signals the service does not have:
- sentence max-sim: the best cosine between the question and one sentence of the memory (a
  long turn's mean-pooled embedding dilutes its one relevant sentence), added where it beats
  the whole content's cosine;
- neighbour smoothing: a share of the better relevance of the turns just before and after in the
  same session;
- entity match: the share of the question's entities (the rules' extractor) a memory mentions,
  weighed by IDF over the conversation or over the 50 candidates (``ENTITY_ONLY=1`` runs only
  these, without embedding the sentences).
It prints R@5 / R@10 by category for each variant, and how much evidence the 50 hold at all
(the most any re-ranking of them can reach).

    .venv/bin/python benchmarks/locomo_signals.py ../shared/data/locomo-dev

Store takes about 5 minutes on 2 cores, embedding the sentences about 3.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import numpy.typing as npt
from celestial_client.cli.locomo_eval import CATEGORIES, load
from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.domain.requests import RecallQuery
from celestial_memory.graph.entities import RuleExtractor
from celestial_memory.memory.service import MemoryService
from locomo_inprocess import store

Floats = npt.NDArray[np.float64]
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
DIA_ID = re.compile(r"D(\d+):(\d+)")
CANDIDATES = 50


@dataclass
class Question:
    text: str
    evidence: set[str]
    category: int
    ids: list[set[str]]  # per candidate: its dia_id and those of repeats merged into it
    contents: list[str]
    relevance: Floats
    positions: list[tuple[int, int] | None]  # (session, turn)
    full: Floats | None = None  # cosine of question and whole content
    sentence_max: Floats | None = None  # best cosine of question and one sentence
    entities: list[set[str]] = field(default_factory=list)  # per candidate: its entity keys
    asked: set[str] = field(default_factory=set)  # the question's entity keys
    df: dict[str, int] = field(default_factory=dict)  # the tenant's memories per entity key
    memories: int = 1  # the tenant's memories


def collect(service: MemoryService, clock: ManualClock, paths: list[Path]) -> list[Question]:
    out = []
    rules = RuleExtractor()
    for ci, path in enumerate(paths):
        conv = load(path)
        tenant = f"c{ci}"
        df: dict[str, int] = defaultdict(int)
        texts = [i.content for _, items in conv.sessions for i in items]
        for ents in rules.extract_many(texts):
            for e in {e.key for e in ents}:
                df[e] += 1
        store(service, clock, conv, tenant)
        for text, evidence, category in conv.questions:
            res = service.recall(tenant, RecallQuery(
                query=text, limit=CANDIDATES, reinforce=False, ignore_zones=True,
                min_relevance=0.0))
            positions = []
            for r in res:
                m = DIA_ID.fullmatch(r.memory.metadata.get("dia_id", ""))
                positions.append((int(m[1]), int(m[2])) if m else None)
            out.append(Question(
                text, evidence, category,
                [{r.memory.metadata.get("dia_id", ""), *(p.metadata.get("dia_id", "")
                                                         for p in r.memory.merged)} for r in res],
                [r.memory.content for r in res], np.array([r.relevance for r in res]), positions,
                entities=[{e.key for e in rules.extract(r.memory.content)} for r in res],
                asked={e.key for e in rules.extract(text)}, df=dict(df), memories=len(texts)))
    return out


def embed_signals(service: MemoryService, questions: list[Question]) -> None:
    embed = service.embedder.embed
    qv = np.asarray(embed([q.text for q in questions]))
    texts = list(dict.fromkeys(c for q in questions for c in q.contents))
    sentences: dict[str, list[str]] = {}
    for t in texts:
        speaker, _, body = t.partition(": ")
        parts = [s for s in SENTENCE_END.split(body) if s.strip()] or [body]
        sentences[t] = [f"{speaker}: {s}" for s in parts]
    whole = dict(zip(texts, np.asarray(embed(texts)), strict=True))
    unique = list(dict.fromkeys(s for ss in sentences.values() for s in ss))
    print(f"embedding {len(unique)} sentences", file=sys.stderr, flush=True)
    per_sentence = dict(zip(unique, np.asarray(embed(unique)), strict=True))
    for q, v in zip(questions, qv, strict=True):
        q.full = np.array([float(whole[c] @ v) for c in q.contents])
        q.sentence_max = np.array([max(float(per_sentence[s] @ v) for s in sentences[c])
                                   for c in q.contents])


def neighbours(q: Question, score: Floats, share: float) -> Floats:
    at = {p: i for i, p in enumerate(q.positions) if p}
    out = score.copy()
    for i, p in enumerate(q.positions):
        if p:
            near = [score[at[n]] for n in ((p[0], p[1] - 1), (p[0], p[1] + 1)) if n in at]
            if near:
                out[i] += share * max(near)
    return out


def entity_match(q: Question, local: bool = False) -> Floats:
    """The share of the question's entities (weighed by IDF over the tenant, or over the
    candidates when ``local``) that each candidate mentions."""
    if not q.asked:
        return np.zeros(len(q.ids))
    n = len(q.entities) if local else q.memories
    def idf(e: str) -> float:
        d = sum(e in c for c in q.entities) if local else q.df.get(e, 0)
        return float(np.log(1 + n / (1 + d)))
    w = {e: idf(e) for e in q.asked}
    total = sum(w.values()) or 1.0
    return np.array([sum(w[e] for e in q.asked & c) / total for c in q.entities])


def report(label: str, questions: list[Question], rank: Callable[[Question], Floats]) -> None:
    hits: dict[int, list[float]] = defaultdict(list)
    by_cat: dict[int, list[float]] = defaultdict(list)
    for q in questions:
        order = np.argsort(-rank(q), kind="stable")
        for k in (5, 10):
            got = set().union(*(q.ids[i] for i in order[:k]))
            hits[k].append(len(q.evidence & got) / len(q.evidence))
        by_cat[q.category].append(hits[5][-1])
    cats = " ".join(f"{CATEGORIES[c]} {np.mean(v):.3f}" for c, v in sorted(by_cat.items()))
    print(f"| {label} | {np.mean(hits[5]):.3f} | {np.mean(hits[10]):.3f} | {cats} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", type=Path, help="a folder of LoCoMo conversation files")
    args = parser.parse_args()
    paths = sorted(args.data.glob("*.json"))
    with tempfile.TemporaryDirectory() as tmp:
        clock = ManualClock(1_600_000_000.0)
        service = build_service(Settings(data_dir=Path(tmp), rebalance_interval_s=0), clock=clock)
        try:
            questions = collect(service, clock, paths)
            if not os.environ.get("ENTITY_ONLY"):
                embed_signals(service, questions)
        finally:
            service.close()
    held = [len(q.evidence & set().union(*q.ids)) / len(q.evidence) for q in questions]
    print(f"evidence within the top {CANDIDATES}: {np.mean(held):.3f}\n")
    print("| variant | R@5 | R@10 | R@5 by category |\n|---|---|---|---|")

    def gain(q: Question) -> Floats:
        assert q.sentence_max is not None and q.full is not None
        return np.maximum(q.sentence_max - q.full, 0.0)

    report("service order", questions, lambda q: q.relevance)
    asked = sum(bool(q.asked) for q in questions)
    print(f"(questions with entities: {asked} of {len(questions)})")
    for a in (0.05, 0.1, 0.2, 0.3):
        report(f"+ {a} x entity match", questions,
               lambda q, a=a: q.relevance + a * entity_match(q))
        report(f"+ {a} x entity match, local idf", questions,
               lambda q, a=a: q.relevance + a * entity_match(q, local=True))
    if os.environ.get("ENTITY_ONLY"):
        return
    for a in (0.3, 0.5, 0.75):
        report(f"+ {a} x sentence gain", questions, lambda q, a=a: q.relevance + a * gain(q))
    for share in (0.05, 0.1):
        report(f"+ {share} x neighbour", questions,
               lambda q, s=share: neighbours(q, q.relevance, s))
        report(f"+ 0.5 x sentence gain, {share} x neighbour", questions,
               lambda q, s=share: neighbours(q, q.relevance + 0.5 * gain(q), s))


if __name__ == "__main__":
    main()
