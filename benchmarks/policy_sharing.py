"""Turn policies that share what they learnt (server/celestial_memory/sharing/), simulated
in-process on the LoCoMo dev split: does a node that gossips with four others decide a
conversation none of them has seen better than one alone, how close does it come to one policy
trained on all their data, and what does one bad node do to it?

    python benchmarks/policy_sharing.py [DATA] [--rounds 6] [--peers 3] [--seed 7] [--no-noise]
        [--clip 2] [--krum-keep 0]

DATA: the LoCoMo JSON folder (policy_replay.py's default). About a minute on 2 cores.

Folds: each of the five conversations is held back once (leave one out). The other four are cut,
in order and at session boundaries, into five streams of about equal turns: five nodes, each a
tenant whose sessions are its own (most streams are one conversation's, some the end of one and
the start of the next; a piece that starts inside a conversation starts its memory count at 0,
as each conversation of policy_replay.py does). Five streams and not four because Krum
tolerates one bad update only among five (n > 2f + 2): a node counts its own update and its four
peers'. Each node replays
the first K turns of its stream through its own policy, rewarded as policy_replay.py rewards
(an evidence turn kept +1, skipped -1; another turn kept -c, skipped +c; ``c`` = COST, the skip
margin MARGIN: fixed here, not tuned, since what is compared is the three ways of learning under
one setting). Then the gossip rounds: each node receives the current update of ``--peers``
random peers, keeps the last update of each peer it has heard from, and merges (clip around the
median, Multi-Krum with f = 1, a step of at most ``max_step`` toward the aggregate); until it
holds four peers' updates it waits (Krum refuses fewer). Every policy is then run frozen (no
exploration, no learning) on the held-back conversation:

- alone: each node's own policy after K turns (no sharing);
- shared: each node's policy after the gossip rounds;
- shared, evidence summed: the same gossip with the other design of the aggregate's counts
  (``SharingConfig(evidence="sum")``: the peers' evidence together, not a typical node's, each
  node sending only what it learnt itself);
- all data: one policy trained on all five nodes' first K turns.

Skip rate and evidence kept are pooled over the five folds (and over the nodes: every node runs
the held-back conversation). With the whole streams, more rows: the shared policies with
their counts then multiplied by five (a diagnostic: a merge carries one node's worth of
evidence, by design; this says how much of the gap to the policy on all the data that is), and
sharing with the optional noise at five levels, with the ε each spends (``--no-noise``:
without). Then one of the five nodes is Byzantine, sending its update ×100, sign-flipped or
replaced by a random vector of the same norm, and the four honest nodes are measured after
merging with Multi-Krum and with a plain average (no clipping, no Krum; merge.py's bounds on
what it writes into a bandit still apply).
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from celestial_memory.policy import cues
from celestial_memory.policy.turn_policy import TurnPolicy
from celestial_memory.sharing import (
    PolicyUpdate,
    SharingConfig,
    TooFew,
    apply,
    merge,
    noised,
    of,
    privacy,
)
from policy_replay import (
    DEFAULT_DATA,
    Conversation,
    Outcome,
    Replayer,
    Utterance,
    frozen,
    load,
    pooled,
    trained,
)

COST = 0.2
MARGIN = 0.0
NODES = 5
K_VALUES = (25, 50, 100, 200, None)  # None: the whole stream
SHARING = SharingConfig(f=1, clip=2.0, rate=0.5, max_step=1.0)
# The optional noise's rows: each σ times the clipping bound of an arm's block (privacy.py); an
# honest arm's block has norm 3.5-4.5 here, so 5 clips none.
NOISE_SIGMAS, NOISE_BOUND = (0.002, 0.01, 0.05, 1.0, 4.0), 5.0

Attack = Callable[[PolicyUpdate, np.random.Generator], PolicyUpdate]


def scaled(u: PolicyUpdate, _: np.random.Generator) -> PolicyUpdate:
    return PolicyUpdate(u.fingerprint, 100.0 * u.vector, tuple(min(1e6, 100 * c) for c in u.counts))


def flipped(u: PolicyUpdate, _: np.random.Generator) -> PolicyUpdate:
    return PolicyUpdate(u.fingerprint, -u.vector, u.counts)


def randomised(u: PolicyUpdate, rng: np.random.Generator) -> PolicyUpdate:
    v = rng.normal(size=u.vector.shape)
    return PolicyUpdate(u.fingerprint, v * (np.linalg.norm(u.vector) / np.linalg.norm(v)),
                        u.counts)


def honest(u: PolicyUpdate, _: np.random.Generator) -> PolicyUpdate:
    return u


ATTACKS: dict[str, Attack] = {"none (all honest)": honest, "×100": scaled, "sign flip": flipped,
                              "random": randomised}


def streams(train: Sequence[Conversation], n: int) -> list[list[Conversation]]:
    """``train``'s sessions in order, cut at session boundaries into ``n`` streams of about
    equal turns; a stream is its pieces, one per conversation it touches."""
    sessions = [(c, s) for c in train for s in c.sessions]
    total = sum(len(s) for _, s in sessions)
    out: list[list[Conversation]] = [[] for _ in range(n)]
    seen = 0
    for c, s in sessions:
        i = min(n - 1, seen * n // total)
        if out[i] and out[i][-1].name == c.name:
            out[i][-1].sessions.append(s)
        else:
            out[i].append(Conversation(c.name, [s], [], c.evidence))
        seen += len(s)
    return out


def first(stream: Sequence[Conversation], k: int | None) -> list[Conversation]:
    """The stream's first ``k`` turns (all when None), cut inside a session where it falls."""
    if k is None:
        return list(stream)
    out, left = [], k
    for c in stream:
        cut: list[list[Utterance]] = []
        for s in c.sessions:
            if left <= 0:
                break
            cut.append(s[:left])
            left -= len(cut[-1])
        if cut:
            out.append(Conversation(c.name, cut, [], c.evidence))
    return out


class Fold:
    """One held-back conversation, the five nodes' streams, and the replays."""

    def __init__(self, rep: Replayer, convs: Sequence[Conversation], held: int, seed: int) -> None:
        self.rep, self.seed = rep, seed
        c = convs[held]
        self.held = Conversation(c.name, c.sessions, [], c.evidence)  # its questions: not needed
        self.streams = streams([x for j, x in enumerate(convs) if j != held], NODES)

    def train(self, k: int | None) -> list[TurnPolicy]:
        return [trained(self.rep, first(s, k), COST, 0.0, False, self.seed + i)
                for i, s in enumerate(self.streams)]

    def pooled_all(self, k: int | None) -> TurnPolicy:
        return trained(self.rep, [p for s in self.streams for p in first(s, k)], COST, 0.0, False,
                       self.seed)

    def run(self, policy: TurnPolicy) -> Outcome:
        return self.rep.run(self.held, frozen(policy.to_dict(), MARGIN, self.seed))


def gossip(policies: Sequence[TurnPolicy], rounds: int, peers: int, config: SharingConfig,
           rng: np.random.Generator, bad: int | None = None, attack: Attack | None = None,
           noise: float = 0.0, each: Callable[[int], None] | None = None) -> int:
    """``rounds`` of gossip among ``policies`` in place; node ``bad`` sends ``attack`` of its
    update and takes nothing. Returns the merges refused for too few updates (waits)."""
    held: list[dict[int, PolicyUpdate]] = [{} for _ in policies]
    waits = 0
    for r in range(rounds):
        # Every node's update as the round starts (its own learning only, with summed evidence).
        sent = [of(p, own=config.own_only) for p in policies]
        if noise > 0.0:
            sent = [noised(u, noise, NOISE_BOUND, rng) for u in sent]
        if bad is not None and attack is not None:
            sent[bad] = attack(sent[bad], rng)
        for i, p in enumerate(policies):
            if i == bad:
                continue
            others = [j for j in range(len(policies)) if j != i]
            for j in rng.choice(others, size=min(peers, len(others)), replace=False):
                held[i][int(j)] = PolicyUpdate.from_bytes(sent[int(j)].to_bytes())
            try:
                merge(p, list(held[i].values()), config)
            except TooFew:
                waits += 1
        if each is not None:
            each(r + 1)
    return waits


def line(name: str, outs: Sequence[Outcome]) -> str:
    o = pooled(name, outs)
    return f"  {name:<34} skip {o.skip:6.1%}  evidence kept {o.kept_evidence:6.1%}"


def spread(outs: Sequence[Outcome]) -> str:
    s = [o.skip for o in outs]
    e = [o.kept_evidence for o in outs]
    return (f"  (per node and fold: skip {min(s):.0%}-{max(s):.0%}, evidence "
            f"{min(e):.1%}-{max(e):.1%})")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--peers", type=int, default=3, help="fresh peers' updates a round")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--no-noise", dest="noise", action="store_false",
                    help="leave out the noise rows (the slowest)")
    ap.add_argument("--clip", type=float, default=SHARING.clip,
                    help="the clipping bound around the median (another design to measure)")
    ap.add_argument("--krum-keep", type=int, default=0,
                    help="updates Multi-Krum averages (0: n - f)")
    ap.add_argument("--summed-rate", type=float, default=None,
                    help="the step's share of the way for summed evidence (default: the rate)")
    ap.add_argument("--summed-max-step", type=float, default=None,
                    help="the step's L2 bound for summed evidence (default: max_step)")
    args = ap.parse_args(argv)
    sharing = replace(SHARING, clip=args.clip, m=args.krum_keep or None)
    summed_cfg = replace(sharing, evidence="sum", rate=args.summed_rate or sharing.rate,
                         max_step=args.summed_max_step or sharing.max_step)
    plain_cfg = replace(sharing, robust=False)
    # A reading is a pure function of the text, and the same turns are read on every pass.
    cues.read = functools.lru_cache(maxsize=None)(cues.read)  # type: ignore[method-assign]
    started = time.perf_counter()
    convs = load(args.data)
    rep = Replayer(None)
    folds = [Fold(rep, convs, h, args.seed) for h in range(len(convs))]
    sizes = [sum(len(s) for p in st for s in p.sessions) for f in folds for st in f.streams]
    print(f"{len(convs)} folds (one conversation held back each), {NODES} nodes a fold, "
          f"{min(sizes)}-{max(sizes)} turns a stream; c {COST}, margin {MARGIN}; {args.rounds} "
          f"rounds, {args.peers} fresh peers a round; {sharing}")

    print("\nafter K turns of local data each (shared: after the rounds), on the held-back "
          "conversation")
    by_round: dict[int, list[Outcome]] = {}
    for k in K_VALUES:
        alone, shared, everything, summed, summing = [], [], [], [], []
        noisy: dict[float, list[Outcome]] = {}
        waits = 0
        for fi, fold in enumerate(folds):
            nodes = fold.train(k)
            alone += [fold.run(p) for p in nodes]
            everything.append(fold.run(fold.pooled_all(k)))
            rng = np.random.default_rng(args.seed + fi)
            if k is None:
                def each(r: int, nodes: list[TurnPolicy] = nodes, fold: Fold = fold) -> None:
                    by_round.setdefault(r, []).extend(fold.run(p) for p in nodes)
            waits += gossip(nodes, args.rounds, args.peers, sharing, rng,
                            each=each if k is None else None)
            shared += [fold.run(p) for p in nodes]
            if k is None:
                for p in nodes:  # a diagnostic, after the shared row is measured
                    u = of(p)
                    apply(p, PolicyUpdate(u.fingerprint, u.vector,
                                          tuple(NODES * c for c in u.counts)))
                    summed.append(fold.run(p))
            nodes = fold.train(k)  # the other design: the aggregate carries the peers' sum
            gossip(nodes, args.rounds, args.peers, summed_cfg, rng)
            summing += [fold.run(p) for p in nodes]
            for sigma in NOISE_SIGMAS if k is None and args.noise else ():
                nodes = fold.train(k)
                gossip(nodes, args.rounds, args.peers, sharing, rng, noise=sigma)
                noisy.setdefault(sigma, []).extend(fold.run(p) for p in nodes)
        label = "all" if k is None else str(k)
        print(f" K = {label}")
        print(line("alone", alone) + spread(alone))
        print(line("shared", shared) + spread(shared) + f"  [{waits} waits]")
        print(line("shared, evidence summed", summing) + spread(summing))
        print(line("one policy on all five streams", everything))
        if summed:
            print(line(f"shared, its counts then ×{NODES}", summed) + spread(summed)
                  + "  (a diagnostic: the evidence of all five, not a setting)")
        for sigma, outs in noisy.items():
            eps = privacy.epsilon(sigma, args.rounds, 1e-6) if privacy.have_accountant() else None
            spent = f", ε {eps:.3g} at δ 1e-6 after {args.rounds} rounds" if eps else ""
            print(line(f"shared, noise σ {sigma:g} (sd {sigma * NOISE_BOUND:g}){spent}", outs)
                  + spread(outs))

    print("\nthe whole streams, by gossip round (round 0: alone)")
    alone_all = [fold.run(p) for fold in folds for p in fold.train(None)]
    print(line("round 0", alone_all))
    for r, outs in sorted(by_round.items()):
        print(line(f"round {r}", outs) + spread(outs))

    print("\none Byzantine node of five (the last stream's), the four honest nodes after the "
          "rounds, whole streams")
    for name, attack in ATTACKS.items():
        for label, cfg in (("Multi-Krum", sharing), ("plain average", plain_cfg)):
            outs = []
            for fi, fold in enumerate(folds):
                nodes = fold.train(None)
                gossip(nodes, args.rounds, args.peers, cfg, np.random.default_rng(args.seed + fi),
                       bad=NODES - 1, attack=attack)
                outs += [fold.run(p) for p in nodes[:NODES - 1]]
            print(line(f"{name}, {label}", outs) + spread(outs))
    print(f"\n{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
