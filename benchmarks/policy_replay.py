"""LoCoMo conversations replayed through the turn policy in-process (no server): which turns it
would SKIP, how many of the turns a later question asks about (evidence) it keeps, and whether
it RETRIEVEs for the questions sent as turns; then what the importance rules' floor for
informative statements changes against their cues alone.

    python benchmarks/policy_replay.py [DATA] [--novelty] [--implicit] [--epsilon E]

DATA: a folder of LoCoMo JSON files (default: LoCoMo's development split beside the checkout,
as grpc_latency.py finds it). Each turn is sent as the LoCoMo protocol stores it ("<text>" plus
" [shares <caption>]"; the speaker is the role), the tenant holding the turns kept so far; the
questions (categories 1-4) are sent after, as dry runs. ``--novelty``: 1 - the best cosine of a
turn to the turns kept before it, with the bundled model (about a minute to embed on 2 cores);
otherwise the state says it is unmeasured. ``--implicit``: the implicit rewards of the next turn
while replaying (off: only the questions' rewards teach). About 1.5 minutes on 2 cores without
novelty.

Figures, per conversation and pooled:

- rules: phases 0 and 1 alone, everything they leave kept;
- policy, cold: a new tenant's policy (rules, then the bandit with its prior);
- policy, leave-one-out: the bandit trained on the other conversations with rewards replayed
  from their questions (an evidence turn kept +1, skipped -1; a turn no question asks about
  kept -c, skipped +c), ``c`` and the bandit's skip margin chosen on those conversations alone
  (the most skips that keep >= 97% of their evidence, by leave-one-out among them), then run
  on the held-out one, learning nothing more (its questions come after).

Then the curve of skip rate against evidence kept on each held-out conversation as the skip
margin moves, beside the rules alone.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from celestial_memory.clock import ManualClock
from celestial_memory.domain.importance import RuleBasedEvaluator
from celestial_memory.domain.importance_cues import KINDS
from celestial_memory.policy import cues, rules
from celestial_memory.policy.bandit import BanditConfig
from celestial_memory.policy.decision import Action, Decision
from celestial_memory.policy.turn_policy import PolicyConfig, Turn, TurnPolicy

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev"
TARGET_SKIP = 0.30
TARGET_EVIDENCE = 0.97
TARGET_RETRIEVE = 0.95
COSTS = (0.05, 0.1, 0.2, 0.3, 0.5)
MARGINS = (-0.2, -0.1, -0.05, 0.0, 0.05, 0.1, 0.2)
CURVE = (-0.4, -0.3, -0.2, -0.1, 0.0, 0.1, 0.2, 0.4)
FLOOR = RuleBasedEvaluator.INFORMATIVE_FLOOR


@dataclass(frozen=True)
class Utterance:
    dia_id: str
    speaker: str
    text: str
    session: str


@dataclass
class Conversation:
    name: str
    sessions: list[list[Utterance]]
    questions: list[str]
    evidence: set[str]

    def turns(self) -> list[Utterance]:
        return [u for s in self.sessions for u in s]


def load(folder: Path) -> list[Conversation]:
    out = []
    for path in sorted(folder.glob("*.json")):
        d = json.loads(path.read_text())
        keys = sorted((k for k in d if re.fullmatch(r"session_\d+", k)),
                      key=lambda k: int(k.split("_")[1]))
        sessions = [[Utterance(t["dia_id"], t["speaker"], t["text"] + (
            f" [shares {t['blip_caption']}]" if t.get("blip_caption") else ""), k)
            for t in d[k]] for k in keys]
        qa = [q for q in d["qa"] if q.get("category") in (1, 2, 3, 4)]
        out.append(Conversation(path.stem, sessions, [str(q["question"]) for q in qa],
                                {str(e) for q in qa for e in q["evidence"]}))
    return out


Novelty = dict[str, npt.NDArray[np.float32]]


def embeddings(convs: Sequence[Conversation]) -> Novelty:
    """Each turn's unit vector by dia_id (per conversation), with the bundled model."""
    import tempfile

    from celestial_memory.config import Settings
    from celestial_memory.encoding import open_encoder

    with tempfile.TemporaryDirectory() as tmp:
        enc = open_encoder(Settings(data_dir=Path(tmp)))
        out: Novelty = {}
        for c in convs:
            turns = c.turns()
            vecs = np.asarray(enc.embed([u.text for u in turns]), dtype=np.float32)
            out.update({f"{c.name}/{u.dia_id}": v for u, v in zip(turns, vecs, strict=True)})
            print(f"{c.name}: embedded {len(turns)} turns", file=sys.stderr, flush=True)
    return out


@dataclass
class Outcome:
    name: str
    turns: int = 0
    kept: int = 0
    evidence: int = 0
    evidence_kept: int = 0
    questions: int = 0
    retrieved: int = 0
    lost_by: Counter[str] = field(default_factory=Counter)
    lost: list[str] = field(default_factory=list)

    def add(self, other: Outcome) -> None:
        for f in ("turns", "kept", "evidence", "evidence_kept", "questions", "retrieved"):
            setattr(self, f, getattr(self, f) + getattr(other, f))
        self.lost_by.update(other.lost_by)
        self.lost.extend(other.lost)

    @property
    def skip(self) -> float:
        return 1 - self.kept / max(1, self.turns)

    @property
    def kept_evidence(self) -> float:
        return self.evidence_kept / max(1, self.evidence)

    @property
    def retrieve(self) -> float:
        return self.retrieved / max(1, self.questions)

    def line(self) -> str:
        ok = "ok" if (self.skip >= TARGET_SKIP and self.kept_evidence >= TARGET_EVIDENCE) else "--"
        return (f"{self.name:>8}  turns {self.turns:5d}  skip {self.skip:6.1%}  evidence kept "
                f"{self.kept_evidence:6.1%} ({self.evidence - self.evidence_kept:3d} lost of "
                f"{self.evidence:3d})  RETRIEVE on questions {self.retrieve:6.1%}  [{ok}]")


def rules_only(u: Utterance, memory_count: int) -> tuple[bool, Action, str]:
    """Phases 0 and 1; what they leave is kept."""
    r = cues.read(u.text)
    score, parts = rules.importance(r)
    v0 = rules.phase0(r, memory_count)
    v1 = rules.phase1(r, score, parts)
    keep = v1 is None or v1.action is Action.SAVE
    action = Action.RETRIEVE if v0 else (Action.SAVE if keep else Action.SKIP)
    return keep, action, (f"phase 1: {v1.rule}" if v1 else "phase 2: left to the bandit")


class Replayer:
    """One conversation through a decider, with optional rewards from its questions."""

    def __init__(self, vectors: Novelty | None) -> None:
        self.vectors = vectors

    def run(self, conv: Conversation, policy: TurnPolicy | None,
            cost: float | None = None) -> Outcome:
        """``policy`` None: the rules alone. ``cost``: rewards from the questions, given at each
        session's end (None: none)."""
        out = Outcome(conv.name)
        # The kept turns' vectors, filled in place: novelty is one product per turn.
        held = np.zeros((len(conv.turns()), 0 if self.vectors is None
                         else len(next(iter(self.vectors.values())))), dtype=np.float32)
        for session in conv.sessions:
            decided: list[tuple[Utterance, Decision]] = []
            for pos, u in enumerate(session):
                nov = self._novelty(conv, u, held[:out.kept])
                if policy is None:
                    keep, _, why = rules_only(u, out.kept)
                else:
                    d = policy.decide(Turn(u.text, u.speaker, u.session,
                                           [v.text for v in session[:pos]]),
                                      out.kept, nov)
                    keep = d.keep
                    why = (f"phase {int(d.trace.phase)}: "
                           f"{d.trace.keep_by or d.trace.rule or 'bandit'}")
                    decided.append((u, d))
                out.turns += 1
                if keep and self.vectors is not None:
                    held[out.kept] = self.vectors[f"{conv.name}/{u.dia_id}"]
                out.kept += int(keep)
                if u.dia_id in conv.evidence:
                    out.evidence += 1
                    out.evidence_kept += int(keep)
                    if not keep:
                        out.lost_by[why] += 1
                        out.lost.append(u.text)
            if policy is not None and cost is not None:
                for u, d in decided:
                    asked = u.dia_id in conv.evidence
                    policy.learn(d.id, (1.0 if asked else -cost) if d.keep
                                 else (-1.0 if asked else cost), keep=True)
        for q in conv.questions:
            if policy is None:
                r = cues.read(q)
                hit = rules.phase0(r, out.kept) is not None
            else:
                hit = policy.decide(Turn(q, "user", "questions"), out.kept, None,
                                    dry_run=True).action is Action.RETRIEVE
            out.questions += 1
            out.retrieved += int(hit)
        return out

    def _novelty(self, conv: Conversation, u: Utterance,
                 held: npt.NDArray[np.float32]) -> float | None:
        if self.vectors is None:
            return None
        if not len(held):
            return 1.0
        return float(1.0 - np.max(held @ self.vectors[f"{conv.name}/{u.dia_id}"]))


EPSILON = [BanditConfig().epsilon]  # --epsilon sets it for every policy of the run


def policy_for(margin: float, implicit: bool, seed: int) -> TurnPolicy:
    cfg = PolicyConfig(BanditConfig(epsilon=EPSILON[0], offsets=(0.0, margin)),
                       implicit=implicit)
    return TurnPolicy(cfg, np.random.default_rng(seed), ManualClock())


def frozen(saved: dict[str, Any], margin: float, seed: int) -> TurnPolicy:
    """A trained policy that only decides: greedy (no exploration), no implicit rewards, and
    no rewards given while it runs."""
    saved["config"]["bandit"]["offsets"] = [0.0, margin]
    saved["config"]["bandit"]["epsilon"] = 0.0
    saved["config"]["implicit"] = False
    return TurnPolicy.from_dict(saved, np.random.default_rng(seed), ManualClock())


def trained(rep: Replayer, train: Sequence[Conversation], cost: float, margin: float,
            implicit: bool, seed: int) -> TurnPolicy:
    p = policy_for(margin, implicit, seed)
    for c in train:
        rep.run(c, p, cost)
    return p


def pooled(name: str, outs: Sequence[Outcome]) -> Outcome:
    total = Outcome(name)
    for o in outs:
        total.add(o)
    return total


def choose(rep: Replayer, train: Sequence[Conversation], implicit: bool,
           seed: int) -> tuple[float, float, Outcome]:
    """The cost and margin with the most skips that keep >= 97% of the evidence (or, when none
    does, the most evidence), by leave-one-out within ``train``: for each of its conversations,
    the bandit trained on the others and run frozen on it, pooled."""
    results: dict[tuple[float, float], list[Outcome]] = {}
    for i, inner in enumerate(train):
        rest = [c for j, c in enumerate(train) if j != i]
        for cost in COSTS:
            saved = trained(rep, rest, cost, 0.0, implicit, seed).to_dict()
            for margin in MARGINS:
                results.setdefault((cost, margin), []).append(
                    rep.run(inner, frozen(saved, margin, seed)))
    best: tuple[tuple[bool, float], float, float, Outcome] | None = None
    for (cost, margin), outs in results.items():
        o = pooled("train", outs)
        meets = o.kept_evidence >= TARGET_EVIDENCE
        key = (meets, o.skip if meets else o.kept_evidence)
        if best is None or key > best[0]:
            best = (key, cost, margin, o)
    assert best is not None
    return best[1], best[2], best[3]


def timing(convs: Sequence[Conversation], seed: int) -> None:
    """What a decision and a reward cost in-process, every turn once, the text read afresh."""
    cached = cues.read
    cues.read = getattr(cached, "__wrapped__", cached)  # type: ignore[method-assign]
    p = policy_for(0.0, True, seed)
    by_phase: dict[int, list[float]] = {0: [], 1: [], 2: []}
    learn: list[float] = []
    n = 0
    for c in convs:
        for s in c.sessions:
            for pos, u in enumerate(s):
                t0 = time.perf_counter()
                d = p.decide(Turn(u.text, u.speaker, u.session, [v.text for v in s[:pos]]), n,
                             0.5)
                t1 = time.perf_counter()
                p.learn(d.id, 0.1, keep=True)
                learn.append((time.perf_counter() - t1) * 1e3)
                by_phase[int(d.trace.phase)].append((t1 - t0) * 1e3)
                n += 1
    cues.read = cached  # type: ignore[method-assign]
    print("\ncost in-process (ms): decide by the phase that decided, and learn")
    for phase, ms in by_phase.items():
        if ms:
            print(f"  phase {phase}: {len(ms):5d} decisions  p50 {np.percentile(ms, 50):.3f}  "
                  f"p99 {np.percentile(ms, 99):.3f}")
    print(f"  learn: p50 {np.percentile(learn, 50):.3f}  p99 {np.percentile(learn, 99):.3f}")


def importance_floor(convs: Sequence[Conversation]) -> None:
    """The importance rules with and without a floor of ``FLOOR`` for informative statements
    (domain/importance.py): the labelled sentences both ways, and LoCoMo's turns."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.unit.importance_cases import CASES, FRESH, HELD_OUT, agreement, misses, zone_agreement

    floored = RuleBasedEvaluator().evaluate  # the rules as they are: the floor in them

    def plain(text: str) -> float:  # the cues alone, as the rules were before the floor
        ws = sorted((k.weight for k in KINDS if k.matches(text)), reverse=True)
        return min(1.0, ws[0] + RuleBasedEvaluator.BONUS * (len(ws) - 1)) if ws else 0.0

    print(f"\nimportance floor: the cues alone against the rules with their floor "
          f"({FLOOR}) for an informative statement, band / first-zone agreement")
    for name, cases in (("table", CASES), ("held out", HELD_OUT), ("fresh", FRESH)):
        print(f"  {name:>8} ({len(cases):2d})  cues alone {agreement(plain, cases):6.1%} / "
              f"{zone_agreement(plain, cases):6.1%}   with floor {agreement(floored, cases):6.1%}"
              f" / {zone_agreement(floored, cases):6.1%}")
        for text, want, got in misses(floored, cases):
            if (text, want, got) not in [(t, w, g) for t, w, g in misses(plain, cases)]:
                print(f"      new miss: {got:.2f} (want {want})  {text}")
    for text in ("The Lisbon conference hotel is on Avenida da Liberdade",
                 "Flight delays at Lisbon airport are common in summer",
                 "What a nice day it is today", "This pizza is great"):
        print(f"      {plain(text):.2f} -> {floored(text):.2f}  {text}")
    turns = [(u, u.dia_id in c.evidence) for c in convs for u in c.turns()]
    for label, fn in (("cues alone", plain), ("with floor", floored)):
        a = np.array([fn(u.text) for u, _ in turns])
        ev = np.array([e for _, e in turns])
        print(f"  LoCoMo {label:>10}: A = 0 on {np.mean(a == 0):6.1%} of turns; belt (A < 0.4) "
              f"for {np.mean(a[ev] < FLOOR):6.1%} of evidence turns and "
              f"{np.mean(a[~ev] < FLOOR):6.1%} of the others")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--novelty", action="store_true")
    ap.add_argument("--implicit", action="store_true")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--epsilon", type=float, default=EPSILON[0],
                    help="the bandit's exploration (its default unless given)")
    ap.add_argument("--lost", type=int, default=12, help="lost evidence turns shown")
    args = ap.parse_args(argv)
    # A reading is a pure function of the text: cached here, where the same turns are read
    # again on every pass.
    cues.read = functools.lru_cache(maxsize=None)(cues.read)  # type: ignore[method-assign]
    EPSILON[0] = args.epsilon
    convs = load(args.data)
    rep = Replayer(embeddings(convs) if args.novelty else None)
    print(f"{len(convs)} conversations, {sum(len(c.turns()) for c in convs)} turns, "
          f"{sum(len(c.evidence & {u.dia_id for u in c.turns()}) for c in convs)} evidence turns, "
          f"{sum(len(c.questions) for c in convs)} questions; novelty "
          f"{'measured' if args.novelty else 'unmeasured'}; epsilon {args.epsilon}; implicit rewards "
          f"{'on' if args.implicit else 'off'}; targets: skip >= {TARGET_SKIP:.0%}, evidence "
          f"kept >= {TARGET_EVIDENCE:.0%}, RETRIEVE on questions >= {TARGET_RETRIEVE:.0%}")

    print("\nrules alone (phases 0 and 1; the rest kept)")
    outs = [rep.run(c, None) for c in convs]
    for o in outs:
        print(o.line())
    rules_total = pooled("all", outs)
    print(rules_total.line())
    print("  evidence lost by:", dict(rules_total.lost_by.most_common()))
    for text in rules_total.lost[:args.lost]:
        print(f"    lost: {text[:120]}")

    print("\npolicy, cold (a new tenant each conversation)")
    outs = [rep.run(c, policy_for(0.0, args.implicit, args.seed)) for c in convs]
    for o in outs:
        print(o.line())
    print(pooled("all", outs).line())

    print("\npolicy, leave one conversation out (cost and margin chosen on the other four)")
    held_out, greedy, chosen = [], [], []
    for i, c in enumerate(convs):
        train = [t for j, t in enumerate(convs) if j != i]
        cost, margin, on_train = choose(rep, train, args.implicit, args.seed)
        p = trained(rep, train, cost, margin, args.implicit, args.seed)
        greedy.append(rep.run(c, frozen(p.to_dict(), margin, args.seed)))
        o = rep.run(c, p)
        held_out.append(o)
        chosen.append((cost, margin))
        print(o.line() + f"  (c {cost}, margin {margin}; within the four: skip "
              f"{on_train.skip:.1%}, evidence {on_train.kept_evidence:.1%})")
    total = pooled("all", held_out)
    print(total.line())
    print("  evidence lost by:", dict(total.lost_by.most_common()))
    g = pooled("greedy", greedy)
    print(g.line() + "  (the same policies without exploration)")
    print("  evidence lost by:", dict(g.lost_by.most_common()))
    for text in total.lost[:args.lost]:
        print(f"    lost: {text[:120]}")

    print("\nheld-out curve: skip rate / evidence kept as the skip margin moves (frozen, "
          "trained on the other four with their chosen cost), against the rules alone")
    for i, c in enumerate(convs):
        train = [t for j, t in enumerate(convs) if j != i]
        p = trained(rep, train, chosen[i][0], 0.0, args.implicit, args.seed)
        saved = p.to_dict()
        points = []
        for margin in CURVE:
            o = rep.run(c, frozen(saved, margin, args.seed))
            points.append(f"{margin:+.1f}: {o.skip:.0%}/{o.kept_evidence:.1%}")
        r = rep.run(c, None)
        print(f"  {c.name}: rules {r.skip:.0%}/{r.kept_evidence:.1%};  " + ",  ".join(points))

    timing(convs, args.seed)
    importance_floor(convs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
