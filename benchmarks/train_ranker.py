"""Trains the learned ranker (server/celestial_memory/ranking/) on the LoCoMo dev split.

    make train-ranker            (or: python benchmarks/train_ranker.py ../shared/data/locomo-dev)

Each conversation is stored in-process (locomo_inprocess.py), and for each question the best
``CANDIDATES`` candidates by relevance are gathered with their payloads and turned into feature
rows by the very function the server calls (ranking/features.py); a candidate is relevant when
it holds an evidence turn. First the honest figures: leave one conversation out (train on four,
score the fifth, all five rotations), R@5 and R@10 by category beside the hand-weighted order.
Then the model is trained on all five and written with its card (the data, the features, the
command, the parameters, the figures, its SHA-256) into ranking/model/. Fixed seeds and one
thread: the same data gives the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
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
from celestial_memory.domain.candidate_facts import CandidateFacts
from celestial_memory.ranking.features import FEATURES, features
from celestial_memory.ranking.learned import MODEL_DIR
from locomo_inprocess import Gathered, gather, store, turn_ids

Floats = npt.NDArray[np.float64]
CANDIDATES = 30  # re-ranked per recall: as good as 50 or 100 on the dev split, fewer payloads to read
ROUNDS = 100
PARAMS: dict[str, Any] = {
    "objective": "lambdarank", "learning_rate": 0.05, "num_leaves": 15, "min_data_in_leaf": 20,
    "feature_fraction": 0.8, "bagging_fraction": 0.8, "bagging_freq": 1,
    "lambdarank_truncation_level": 20, "seed": 7, "deterministic": True, "num_threads": 1,
    "verbose": -1,
}


@dataclass
class Question:
    conversation: int
    category: int
    evidence: set[str]
    labels: list[set[str]]  # per candidate, best first by relevance: the turns it stands for
    rows: Floats  # FEATURES per candidate

    def grades(self) -> npt.NDArray[np.int64]:
        return np.array([1 if self.evidence & lab else 0 for lab in self.labels])


def collect(paths: list[Path], candidates: int) -> list[tuple[int, int, set[str], Gathered]]:
    """Per question: its conversation, category, evidence and best candidates."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        clock = ManualClock(1_600_000_000.0)
        service = build_service(Settings(data_dir=Path(tmp), rebalance_interval_s=0,
                                         recall_expand=0, ranker="weights"), clock=clock)
        try:
            for ci, path in enumerate(paths):
                conv = load(path)
                store(service, clock, conv, f"c{ci}")
                out += [(ci, category, evidence, gather(service, f"c{ci}", text, candidates))
                        for text, evidence, category in conv.questions]
        finally:
            service.close()
    return out


def questions_of(gathered: list[tuple[int, int, set[str], Gathered]], texts: list[str],
                 candidates: int) -> list[Question]:
    """Feature rows over each question's best ``candidates`` (the ranks are over those)."""
    out = []
    for (ci, category, evidence, g), text in zip(gathered, texts, strict=True):
        k = min(candidates, len(g.ids))
        out.append(Question(ci, category, evidence, [turn_ids(m) for m in g.memories[:k]],
                            features(text, g.asked, g.signals[:k], g.relevance[:k],
                                     CandidateFacts.of(g.memories[:k]))))
    return out


def gathered(paths: list[Path], candidates: int, cache: Path | None) -> list[Question]:
    """Every question of the conversations at ``paths`` with its feature rows; the gathered
    candidates are kept in ``cache`` between runs (storing the conversations takes minutes)."""
    texts = [text for p in paths for text, _, _ in load(p).questions]
    if cache and cache.exists():
        found = pickle.loads(cache.read_bytes())
    else:
        found = collect(paths, max(candidates, CANDIDATES))
        if cache:
            cache.write_bytes(pickle.dumps(found))
    return questions_of(found, texts, candidates)


def train(questions: list[Question], rounds: int) -> Any:
    import lightgbm as lgb

    data = lgb.Dataset(np.concatenate([q.rows for q in questions]),
                       np.concatenate([q.grades() for q in questions]),
                       group=[len(q.labels) for q in questions],
                       feature_name=list(FEATURES), free_raw_data=True)
    return lgb.train(PARAMS, data, num_boost_round=rounds)


def recall_at(q: Question, score: Floats, k: int) -> float:
    order = np.argsort(-score, kind="stable")[:k]
    return len(q.evidence & set().union(*(q.labels[i] for i in order))) / len(q.evidence)


def figures(questions: list[Question], scores: list[Floats]) -> dict[str, float]:
    out: dict[str, list[float]] = defaultdict(list)
    for q, s in zip(questions, scores, strict=True):
        for k in (5, 10):
            r = recall_at(q, s, k)
            out[f"R@{k}"].append(r)
            out[f"{CATEGORIES[q.category]} R@{k}"].append(r)
    return {name: round(float(np.mean(v)), 3) for name, v in sorted(out.items())}


def leave_one_out(questions: list[Question], rounds: int) -> dict[str, dict[str, float]]:
    scores: list[Floats | None] = [None] * len(questions)
    for held in sorted({q.conversation for q in questions}):
        model = train([q for q in questions if q.conversation != held], rounds)
        for i, q in enumerate(questions):
            if q.conversation == held:
                scores[i] = np.asarray(model.predict(q.rows, num_threads=1), dtype=np.float64)
        print(f"conversation {held} scored", file=sys.stderr, flush=True)
    relevance = FEATURES.index("relevance")
    return {"weights": figures(questions, [q.rows[:, relevance] for q in questions]),
            "learned": figures(questions, [s if s is not None else np.zeros(0) for s in scores])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", type=Path, help="the LoCoMo dev split's folder")
    parser.add_argument("--out", type=Path, default=MODEL_DIR)
    parser.add_argument("--candidates", type=int, default=CANDIDATES)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--cache", type=Path, help="keep the gathered candidates here between runs")
    parser.add_argument("--study", action="store_true",
                        help="print the leave-one-out figures only; write no model")
    args = parser.parse_args()
    paths = sorted(args.data.glob("*.json"))
    questions = gathered(paths, args.candidates, args.cache)
    honest = leave_one_out(questions, args.rounds)
    print("| order | " + " | ".join(honest["weights"]) + " |")
    for name, row in honest.items():
        print(f"| {name} | " + " | ".join(f"{v:.3f}" for v in row.values()) + " |")
    if args.study:
        return
    model = train(questions, args.rounds)
    text = model.model_to_string(num_iteration=-1)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ranker.txt").write_text(text)
    card = {
        "name": "locomo-dev-lambdamart",
        "data": f"LoCoMo dev split, {len(paths)} conversations ({', '.join(p.stem for p in paths)}), "
                f"{len(questions)} questions of categories 1-4; a candidate is relevant when it "
                "holds an evidence turn",
        "features": list(FEATURES),
        "candidates": args.candidates,
        "command": "make train-ranker",
        "model": f"LightGBM {__import__('lightgbm').__version__} lambdarank, {args.rounds} rounds",
        "parameters": PARAMS,
        "figures": {"leave one conversation out": honest,
                    "note": "the shipped model is trained on all five conversations; the "
                            "leave-one-out figures are the ones to quote"},
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
    }
    (args.out / "card.json").write_text(json.dumps(card, indent=2) + "\n")
    print(f"wrote {args.out / 'ranker.txt'} ({len(text):,} bytes) and its card")


if __name__ == "__main__":
    main()
