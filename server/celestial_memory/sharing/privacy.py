"""Optional noise on an update before it leaves the node (the Gaussian mechanism), and the
privacy it spends.

Under noise every arm travels, each arm's block clipped to an L2 ``bound`` and given
independent N(0, (σ·bound)²) noise on every entry, σ the noise multiplier, and every arm's
count is ``NOISED_COUNT``, a public constant: a count, or an arm sent empty, would tell a peer
how much the node learnt, outside what the noise covers.

The accounting (``epsilon``) treats everything a node learnt, all its tenants' turns together,
as the one thing to protect: between a node and the same node with nothing learnt, each block
moves by at most ``bound``, the whole update by √arms·bound, so each release is a Gaussian
mechanism of noise multiplier σ/√arms. A node releases one update a round (the same one to
every peer it dials or that calls it), and the releases compose; Google's ``dp-accounting``
(its RDP accountant) turns N of them into (ε, δ). A peer's updates merged into the node's policy
before a release are the peer's data, not the node's, and change nothing of this.

``dp-accounting`` is an optional extra (``celestial-memory[privacy]``): a node with noise on
and without it refuses to start, rather than share with a guarantee it cannot state.
"""

from __future__ import annotations

import math

import numpy as np
from celestial_memory.errors import FailedPrecondition
from celestial_memory.sharing.robust import clip
from celestial_memory.sharing.update import ARM_SIZE, PolicyUpdate

# The count every arm travels with under noise: a tenth of what a discounted count reaches
# (1 / (1 - γ) = 1,000 by default), so a receiver takes a noised update as modest evidence.
NOISED_COUNT = 100.0


def noised(update: PolicyUpdate, sigma: float, bound: float,
           rng: np.random.Generator) -> PolicyUpdate:
    """``update`` with every arm's block clipped to ``bound`` and Gaussian noise of standard
    deviation ``sigma * bound`` added to its entries, every count ``NOISED_COUNT``. ``sigma``
    0 only clips (and sends the counts as they are: nothing is claimed then)."""
    if not sigma >= 0.0:
        raise ValueError(f"a noise multiplier cannot be {sigma}")
    v = update.vector.copy()
    for k in range(len(update.counts)):
        block = slice(k * ARM_SIZE, (k + 1) * ARM_SIZE)
        v[block] = clip(v[block], bound)
        if sigma > 0.0:
            v[block] += rng.normal(0.0, sigma * bound, ARM_SIZE)
    counts = (tuple(NOISED_COUNT for _ in update.counts) if sigma > 0.0 else update.counts)
    return PolicyUpdate(update.fingerprint, v, counts)


def have_accountant() -> bool:
    """Whether ``dp-accounting`` is installed."""
    try:
        import dp_accounting  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        return False
    return True


def require_accountant() -> None:
    if not have_accountant():
        raise FailedPrecondition(
            "noise on shared updates needs the privacy accountant: pip install "
            "'celestial-memory[privacy]' (dp-accounting), or set CELESTIAL_POLICY_SHARE_NOISE=0")


def epsilon(sigma: float, releases: int, delta: float, arms: int = 2) -> float:
    """The ε, at ``delta``, that ``releases`` updates noised with multiplier ``sigma`` spend
    (RDP accountant); 0 for no release, infinite for releases without noise."""
    if releases <= 0:
        return 0.0
    if sigma <= 0.0:
        return math.inf
    from dp_accounting import dp_event, rdp

    accountant = rdp.RdpAccountant()
    accountant.compose(dp_event.GaussianDpEvent(sigma / math.sqrt(arms)), count=releases)
    return float(accountant.get_epsilon(delta))
