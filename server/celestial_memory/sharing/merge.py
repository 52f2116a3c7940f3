"""Taking what peers learnt into a node's own turn policy: their updates aggregated robustly,
the node's own update moved a bounded step toward the aggregate, and the result written back
into its bandit within the bandit's bounds.

    own = update.of(policy)
    merged = merge(policy, [PolicyUpdate.from_bytes(b) for b in received], SharingConfig())

The aggregate is built in the normalised space updates travel in (update.py): each update is
clipped to ``clip`` around the coordinate-wise median of all of them (the median, not the node's
own update, because that may be empty, a new tenant's, or the odd one out itself; no single bad
update moves a median far), then Multi-Krum keeps the ``n - f`` (or ``m``) most central and
averages them arm by arm; each arm's count is the median of the kept ones'. A node with evidence
counts its own update among the n, so five nodes that each keep the last update of their four
peers can tolerate one bad one (Krum needs n > 2f + 2).

How much evidence a merged arm carries is ``SharingConfig.evidence``. ``typical`` (the default):
a typical node's, never the sum of all of theirs, so gossip that brings a peer's update back
through a third node counts it once, and no peer can make a node surer of anything than one
node's worth of rewards would. ``sum``: each node sends only what it learnt from its own
rewards (``TurnPolicy.own``, which no merge writes), so nothing comes back to count twice, and
an arm's count in the aggregate is the nodes' sum (a typical kept node's times how many sent the
arm): a node then decides with its peers' evidence as well as its own, as one policy trained on
all their data would.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from celestial_memory.policy.turn_policy import ARMS, TurnPolicy, fingerprint
from celestial_memory.sharing import robust, update
from celestial_memory.sharing.update import ARM_SIZE, DIM, PolicyUpdate, UpdateRefused

FloatArray = robust.FloatArray


@dataclass(frozen=True)
class SharingConfig:
    """``f``: bad updates tolerated among those aggregated. ``m``: how many Multi-Krum
    averages (None: n - f). ``clip``: the L2 bound on an update's distance from the median, in
    the normalised units of update.py (on LoCoMo an honest arm's block has norm 3.3-4.5 and two
    honest nodes' whole updates lie 1.1-2.7 apart, so 2 clips the odd honest one a little and a
    bad one to an honest one's reach). ``rate`` and ``max_step``: the step toward the aggregate
    (robust.step). ``robust`` False averages everything unclipped: a baseline, never a
    setting for a node that takes updates from others. ``evidence``: an arm's count in the
    aggregate, a typical node's (the median of the kept ones'), or their sum (that median times
    how many nodes sent the arm, so no one inflated count decides it), and then each node sends
    and steps from its own learning only (``TurnPolicy.own``), and its counts take the sum."""

    f: int = 1
    m: int | None = None
    clip: float = 2.0
    rate: float = 0.5
    max_step: float = 1.0
    robust: bool = True
    evidence: Literal["typical", "sum"] = "typical"

    @property
    def own_only(self) -> bool:
        """Whether a node sends, and steps from, only what it learnt itself (summed evidence)."""
        return self.evidence == "sum"


@dataclass(frozen=True)
class Merged:
    """What a merge did: ``chosen``, the indices of the peers' updates the aggregate kept;
    ``own_kept``: whether the node's own was among them; ``fraction``: how much of the way to
    the aggregate the node went (0 to ``rate``)."""

    chosen: tuple[int, ...]
    own_kept: bool
    fraction: float


def _check(updates: Sequence[PolicyUpdate]) -> None:
    mine = fingerprint()
    for u in updates:
        if u.fingerprint != mine:
            raise UpdateRefused(f"learnt under other rules or features (fingerprint "
                                f"{u.fingerprint[:12]}..., this node's {mine[:12]}...)")


def _blocks(k: int) -> slice:
    return slice(k * ARM_SIZE, (k + 1) * ARM_SIZE)


def aggregate(updates: Sequence[PolicyUpdate], config: SharingConfig) -> tuple[PolicyUpdate,
                                                                                tuple[int, ...]]:
    """The aggregate of ``updates`` and the indices of those it kept. Updates empty on every
    arm are left out (they say nothing). ``robust.TooFew`` when too few remain for ``f``."""
    _check(updates)
    live = [i for i, u in enumerate(updates) if any(c > 0 for c in u.counts)]
    if not live:
        raise robust.TooFew("no update holds any evidence")
    x = np.stack([updates[i].vector for i in live]).astype(np.float64)
    has = np.array([[updates[i].counts[k] > 0 for k in range(len(ARMS))] for i in live])
    counts = np.array([updates[i].counts for i in live])
    if config.robust:
        for k in range(len(ARMS)):
            block = _blocks(k)
            if not has[:, k].any():
                continue
            centre = np.median(x[has[:, k], block], axis=0)
            # An arm sent empty sits at the centre: neither suspect for it nor a pull.
            x[~has[:, k], block] = centre
        centre_all = np.median(x, axis=0)
        x = np.stack([centre_all + robust.clip(v - centre_all, config.clip) for v in x])
        # Krum's own check first (TooFew below 2f + 3); m never above the n - f it allows.
        robust.scores(x, config.f)
        m = min(config.m, len(x) - config.f) if config.m is not None else len(x) - config.f
        kept = robust.select(x, config.f, m)
    else:
        kept = np.arange(len(x))
    out = np.zeros(update.SIZE)
    out_counts = []
    for k in range(len(ARMS)):
        with_arm = [i for i in kept if has[i, k]]
        # An arm that at most f updates hold could be a bad node's alone: where no honest
        # update speaks for it, Krum has nothing to weigh it against.
        if not with_arm or (config.robust and int(has[:, k].sum()) <= config.f):
            out_counts.append(0.0)
            continue
        out[_blocks(k)] = x[with_arm, _blocks(k)].mean(axis=0)
        arm_counts = counts[with_arm, k]
        typical = float(np.median(arm_counts) if config.robust else arm_counts.mean())
        # The sum over every node that sent the arm, the one Krum left out among them: its
        # evidence is real even where its update is not, and the typical one stands in for it.
        senders = int(has[:, k].sum())
        out_counts.append(typical * senders if config.own_only else typical)
    return (PolicyUpdate(fingerprint(), out, tuple(out_counts)),
            tuple(int(live[i]) for i in kept))


def merge(policy: TurnPolicy, peers: Sequence[PolicyUpdate],
          config: SharingConfig | None = None) -> Merged:
    """Aggregate the node's own update with ``peers``', step toward the aggregate and write
    the result into ``policy``'s bandit. Raises ``UpdateRefused`` for another fingerprint and
    ``robust.TooFew`` when the updates are too few for ``config.f`` (nothing changes then)."""
    cfg = config or SharingConfig()
    _check(peers)
    # Under the policy's lock from snapshot to write: a reward learnt in between is not lost.
    with policy.lock:
        target, kept = aggregate([update.of(policy, own=cfg.own_only), *peers], cfg)
        t = move(policy, target, cfg)
    return Merged(tuple(i - 1 for i in kept if i > 0), 0 in kept, t)


def move(policy: TurnPolicy, target: PolicyUpdate, config: SharingConfig) -> float:
    """Step ``policy``'s own update toward ``target`` (an aggregate) and write the result into
    its bandit; the share of the way it went. An arm with nothing of its own takes the
    target's whole (a new tenant starts where its peers are). With summed evidence the step
    starts from what the policy learnt itself (never from an earlier merge, so none compounds)
    and the counts take the aggregate's sum, which holds the policy's own."""
    _check([target])
    summed = config.own_only
    with policy.lock:
        own = update.of(policy, own=summed)
        own_v = own.vector.copy()
        for k in range(len(ARMS)):
            if own.counts[k] == 0.0:
                own_v[_blocks(k)] = target.vector[_blocks(k)]  # nothing of its own to keep
        new_v = robust.step(own_v, target.vector, config.rate, config.max_step)
        # The share of the way step() went, which the counts go too.
        gap = float(np.linalg.norm(target.vector - own_v))
        t = min(config.rate, config.max_step / gap) if gap > 0 else config.rate
        new_counts = tuple(n if a == 0.0 else max(n, a) if summed else n + t * (a - n)
                           for n, a in zip(own.counts, target.counts, strict=True))
        apply(policy, PolicyUpdate(own.fingerprint, new_v, new_counts))
    return t


def apply(policy: TurnPolicy, target: PolicyUpdate) -> None:
    """Set ``policy``'s bandit statistics to those ``target`` describes, arm by arm (an arm
    empty in ``target`` is left as it is), within the bandit's bounds: the count at most
    1 / (1 - γ), the second moment projected onto the positive semi-definite matrices with
    eigenvalues at most d (x is in [0, 1]^d, so E[xxᵀ]'s trace is at most d), the reward mean
    into [-1, 1]. So A's eigenvalues stay in [λ, λ + d / (1 - γ)] as the bandit's own updates
    keep them, and θ is projected onto its ball when next solved."""
    _check([target])
    cfg = policy.config.bandit
    cap = 1.0 / (1.0 - cfg.discount) if cfg.discount < 1.0 else update.MAX_COUNT
    eye = np.eye(DIM)
    with policy.lock:
        bandit = policy.bandit
        a, b = bandit.A.copy(), bandit.b.copy()
        for k in range(len(ARMS)):
            n = min(target.counts[k], cap)
            if n <= 0.0:
                continue
            moment, mean = target.arm(k)
            w, q = np.linalg.eigh(moment)
            moment = (q * np.clip(w, 0.0, float(DIM))) @ q.T
            a[k] = cfg.ridge * eye + n * (moment + moment.T) / 2.0
            b[k] = n * np.clip(mean, -1.0, 1.0)
            b[k, 0] += cfg.ridge * cfg.prior[k]
        bandit.set_statistics(a, b)
