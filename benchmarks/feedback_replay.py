"""Learning from use, replayed on the LoCoMo dev split (ranking/tuning.py).

    python benchmarks/feedback_replay.py ../shared/data/locomo-dev --cache /tmp/train_cache.pkl

For each conversation, a learned ranker is trained on the other four (as train_ranker.py's
leave-one-out does), the conversation is stored in-process, and its questions are asked in
order; after each answer a vote follows for each of the first five results: helpful when it
holds an evidence turn, not helpful otherwise. Three arms, each on a fresh store:

- ``no votes``: the learned ranker alone;
- ``votes``: the votes move importance (Feedback), the ranker's layer off;
- ``votes + layer``: the same votes also tune the tenant's layer (CELESTIAL_RANKER_FEEDBACK).

R@5 and R@10 are reported over the later half of each conversation's questions (those asked
after votes taught something) and over all. Nothing is reinforced by the recalls, so the votes
are the only thing that changes between questions.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import numpy.typing as npt
from celestial_client.cli.locomo_eval import load
from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.domain.requests import RecallQuery
from celestial_memory.encoding.choice import open_encoder
from celestial_memory.ranking.learned import LearnedRanker
from locomo_inprocess import store, turn_ids
from train_ranker import CANDIDATES, ROUNDS, gathered, train

ARMS = ("no votes", "votes", "votes + layer")


class Remembered:
    """The encoder, each text embedded once across the arms (they store the same turns)."""

    def __init__(self, settings: Settings) -> None:
        self._inner = open_encoder(settings)
        self.name, self.dimension = self._inner.name, self._inner.dimension
        self._seen: dict[str, npt.NDArray[np.float32]] = {}

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        todo = list(dict.fromkeys(t for t in texts if t not in self._seen))
        if todo:
            self._seen.update(zip(todo, self._inner.embed(todo), strict=True))
        return np.stack([self._seen[t] for t in texts]) if texts else np.zeros(
            (0, self.dimension), dtype=np.float32)


def replay(path: Path, ranker: LearnedRanker, arm: str, embedder: Remembered,
           rate: float, bound: float) -> list[tuple[float, float]]:
    """R@5 and R@10 per question of the conversation at ``path``, in the order asked."""
    conv = load(path)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        clock = ManualClock(1_600_000_000.0)
        settings = Settings(data_dir=Path(tmp), rebalance_interval_s=0, recall_expand=0,
                            ranker="weights", ranker_feedback=arm == "votes + layer",
                            ranker_feedback_rate=rate, ranker_feedback_bound=bound)
        service = build_service(settings, embedder=embedder, clock=clock)
        service._candidates.ranker = ranker  # the model that never saw this conversation
        try:
            store(service, clock, conv, "t")
            for text, evidence, _ in conv.questions:
                got = service.recall("t", RecallQuery(query=text, limit=10, reinforce=False))
                held = [turn_ids(r.memory) for r in got]
                out.append(tuple(len(evidence & set().union(*held[:k])) / len(evidence)
                                 for k in (5, 10)))
                if arm != "no votes":
                    for r, turns in zip(got[:5], held[:5], strict=False):
                        service.feedback.give("t", r.memory.id, bool(evidence & turns))
        finally:
            service.close()
    return out  # type: ignore[return-value]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", type=Path, help="the LoCoMo dev split's folder")
    parser.add_argument("--cache", type=Path, help="train_ranker.py's gathered candidates")
    parser.add_argument("--rate", type=float, default=Settings().ranker_feedback_rate)
    parser.add_argument("--bound", type=float, default=Settings().ranker_feedback_bound)
    parser.add_argument("--conversations", nargs="*", default=(),
                        help="replay only these (file stems): tune on some, report on others")
    args = parser.parse_args()
    paths = sorted(args.data.glob("*.json"))
    questions = gathered(paths, CANDIDATES, args.cache)
    embedder = Remembered(Settings())
    late: dict[str, list[tuple[float, float]]] = defaultdict(list)
    every: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for held, path in enumerate(paths):
        if args.conversations and path.stem not in args.conversations:
            continue
        model = train([q for q in questions if q.conversation != held], ROUNDS)
        ranker = LearnedRanker(model, CANDIDATES, f"without {path.stem}")
        for arm in ARMS:
            got = replay(path, ranker, arm, embedder, args.rate, args.bound)
            every[arm] += got
            late[arm] += got[len(got) // 2:]
            print(f"{path.stem} {arm}: later half R@5 "
                  f"{np.mean([r[0] for r in got[len(got) // 2:]]):.3f}", file=sys.stderr,
                  flush=True)
    print(f"rate {args.rate}, bound {args.bound}, conversations "
          f"{' '.join(args.conversations) or 'all'}")
    print("| arm | later half R@5 | later half R@10 | all R@5 | all R@10 |")
    print("|---|---|---|---|---|")
    for arm in ARMS:
        a, b = np.array(late[arm]), np.array(every[arm])
        print(f"| {arm} | {a[:, 0].mean():.3f} | {a[:, 1].mean():.3f} | {b[:, 0].mean():.3f} | "
              f"{b[:, 1].mean():.3f} |")


if __name__ == "__main__":
    main()
