"""Optional noise on an update before it leaves the node: the Gaussian mechanism's form.

Each arm's block is clipped to an L2 bound and then gets independent N(0, (σ·bound)²) noise on
every entry, σ the noise multiplier. Clipping first is what makes the noise mean something: it
bounds how far any one tenant's turns can move the block, and the noise is scaled to that bound.
The counts travel without noise here: they say how much evidence is behind the block, and a
receiver bounds what it takes from them (merge.py).

What this does not do is the accounting: which (ε, δ) a node spends per round and over many
rounds (a Rényi or moments accountant over the rounds, with the sensitivity of the block to one
tenant's turns, which depends on how many rewards it averages). Until a node does that,
``sigma`` is a knob that makes reading a conversation off an update harder, not a stated
guarantee; and what it costs is measured (benchmarks/policy_sharing.py): even a small noise
moves what a policy keeps.
"""

from __future__ import annotations

import numpy as np
from celestial_memory.sharing.robust import clip
from celestial_memory.sharing.update import ARM_SIZE, PolicyUpdate


def noised(update: PolicyUpdate, sigma: float, bound: float,
           rng: np.random.Generator) -> PolicyUpdate:
    """``update`` with each non-empty arm's block clipped to ``bound`` and Gaussian noise of
    standard deviation ``sigma * bound`` added to its entries. ``sigma`` 0 only clips."""
    if not sigma >= 0.0:
        raise ValueError(f"a noise multiplier cannot be {sigma}")
    v = update.vector.copy()
    for k, n in enumerate(update.counts):
        if n == 0.0:
            continue  # an empty arm says nothing, and noise would make it say something
        block = slice(k * ARM_SIZE, (k + 1) * ARM_SIZE)
        v[block] = clip(v[block], bound) + rng.normal(0.0, sigma * bound, ARM_SIZE)
    return PolicyUpdate(update.fingerprint, v, update.counts)
