"""Whether the turn's meaning tells what a later question will need: a logistic model over each
LoCoMo turn's sentence embedding (the bundled model), trained to tell the questions' evidence
turns from the rest, left one conversation out, as the turn policy's SKIP rule.

The turn policy's features (docs/design.md, "The turn policy") cannot skip 30% of the turns while
keeping 97% of the evidence; this asks whether a judgment of content could. For each held-out
conversation: the model is fitted on the other four; its threshold is the score below which 3%
of the evidence falls, chosen by leaving each of those four out in turn (median of the four);
then the held-out turns below it are skipped, as well as the rules' own skips, and never a turn
the rules RETRIEVE. Variants: the turn's embedding alone, with its length, with the previous
turn's embedding; two strengths of the L2 penalty.

    python benchmarks/policy_content.py [DATA]

About 1.5 minutes on 2 cores (most of it embedding the 2,760 turns).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))

import policy_replay as replay
from celestial_memory.policy.decision import Action

FloatArray = npt.NDArray[np.float64]
LOST = 0.03  # the share of the evidence the threshold may lose


@dataclass(frozen=True)
class Held:
    name: str
    embedded: FloatArray  # one row per turn
    previous: FloatArray  # the turn before's row (zeros for the first)
    length: FloatArray  # log(1 + characters), one column
    evidence: npt.NDArray[np.bool_]
    action: list[Action]  # the rules' own (phases 0 and 1)


VARIANTS: dict[str, Callable[[Held], FloatArray]] = {
    "embedding": lambda h: h.embedded,
    "embedding + length": lambda h: np.hstack([h.embedded, h.length]),
    "embedding + previous turn": lambda h: np.hstack([h.embedded, h.previous]),
}


def fit(x: FloatArray, y: FloatArray, penalty: float) -> FloatArray:
    """L2-penalised logistic regression by Newton's method (the intercept not penalised)."""
    xb = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(xb.shape[1])
    eye = np.diag(np.r_[np.ones(x.shape[1]), 0.0]) * penalty
    for _ in range(100):
        p = 1 / (1 + np.exp(-xb @ w))
        step = np.linalg.solve((xb * (p * (1 - p))[:, None]).T @ xb + eye,
                               xb.T @ (p - y) + eye @ w)
        w -= step
        if np.abs(step).max() < 1e-6:
            break
    return w


def scores(w: FloatArray, x: FloatArray) -> FloatArray:
    return np.asarray(np.hstack([x, np.ones((len(x), 1))]) @ w, dtype=np.float64)


def trained(held: Sequence[Held], variant: str, penalty: float) -> FloatArray:
    f = VARIANTS[variant]
    return fit(np.vstack([f(h) for h in held]),
               np.concatenate([h.evidence for h in held]).astype(np.float64), penalty)


def threshold(train: Sequence[Held], variant: str, penalty: float) -> float:
    """Leaving each training conversation out: the score below which LOST of its evidence
    falls; their median."""
    cuts = []
    for j, out in enumerate(train):
        w = trained([h for i, h in enumerate(train) if i != j], variant, penalty)
        ev = np.sort(scores(w, VARIANTS[variant](out))[out.evidence])
        cuts.append(float(ev[int(LOST * len(ev))]))
    return float(np.median(cuts))


def held(convs: Sequence[replay.Conversation]) -> list[Held]:
    vecs = replay.embeddings(convs)
    out = []
    for c in convs:
        turns = c.turns()
        x = np.stack([vecs[f"{c.name}/{u.dia_id}"] for u in turns]).astype(np.float64)
        out.append(Held(
            c.name, x, np.vstack([np.zeros((1, x.shape[1])), x[:-1]]),
            np.log1p(np.array([[len(u.text)] for u in turns], dtype=np.float64)),
            np.array([u.dia_id in c.evidence for u in turns]),
            # the tenant holds memories: phase 0 may RETRIEVE, as in a replay past its start
            [replay.rules_only(u, 10)[1] for u in turns]))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", nargs="?", type=Path, default=replay.DEFAULT_DATA)
    args = ap.parse_args(argv)
    convs = held(replay.load(args.data))
    print(f"targets: skip >= {replay.TARGET_SKIP:.0%}, evidence kept >= "
          f"{replay.TARGET_EVIDENCE:.0%}; each conversation held out in turn")
    for variant in VARIANTS:
        for penalty in (1.0, 10.0):
            turns = skipped = evidence = lost = 0
            per = []
            for k, out in enumerate(convs):
                train = [h for i, h in enumerate(convs) if i != k]
                cut = threshold(train, variant, penalty)
                s = scores(trained(train, variant, penalty), VARIANTS[variant](out))
                rules = np.array(out.action)
                skip = ((s < cut) & (rules != Action.RETRIEVE)) | (rules == Action.SKIP)
                turns, skipped = turns + len(s), skipped + int(skip.sum())
                evidence += int(out.evidence.sum())
                lost += int((skip & out.evidence).sum())
                per.append(f"{out.name} {skip.mean():.1%}/"
                           f"{1 - (skip & out.evidence).sum() / out.evidence.sum():.1%}")
            print(f"{variant:27s} L2 {penalty:4.1f}: skip {skipped / turns:6.1%}  evidence kept "
                  f"{1 - lost / evidence:6.1%}   ({', '.join(per)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
