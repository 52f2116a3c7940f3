"""Aggregating updates of which some may be bad: L2 clipping, Krum and Multi-Krum (Blanchard et
al., "Machine learning with adversaries: Byzantine tolerant gradient descent", NeurIPS 2017),
and the bounded step a node takes toward what it aggregated.

Each function works on flat float vectors (one row an update) and knows nothing of policies, so
each can be checked on constructed cases.

Krum scores each of n updates by the sum of its squared distances to its n - f - 2 nearest
others and picks the lowest: an honest update has n - f - 2 honest neighbours close by, a bad
one has to be close to honest ones to score well, and then it does little harm. The guarantee
(the pick's distance to the honest mean is bounded by the honest updates' spread) holds only for
n > 2f + 2. With fewer, the functions here refuse (``TooFew``) rather than answer with a pick
that one bad update among them could choose: a caller either waits for more updates (a gossip
node keeps the last one of each peer) or asks for a smaller f knowing what it gives up.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class TooFew(ValueError):
    """Too few updates for Krum to tolerate the f bad ones asked."""


def clip(v: FloatArray, bound: float) -> FloatArray:
    """``v`` scaled down to an L2 norm of ``bound`` when it is longer (unchanged otherwise)."""
    if not bound > 0:
        raise ValueError(f"a clipping bound must be positive, not {bound}")
    norm = float(np.linalg.norm(v))
    out: FloatArray = v * (bound / norm) if norm > bound else v.copy()
    return out


def rows(updates: Sequence[FloatArray] | FloatArray) -> FloatArray:
    """The updates as one finite (n, size) array."""
    x = np.asarray(updates, dtype=np.float64)
    if x.ndim != 2 or len(x) == 0:
        raise ValueError(f"updates must be a non-empty list of equal-length vectors, not shape "
                         f"{x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("an update holds NaN or infinity")
    return x


def squared_distances(x: FloatArray) -> FloatArray:
    """Every pair's squared L2 distance, from one Gram matrix (n×n)."""
    sq = np.einsum("ij,ij->i", x, x)
    d: FloatArray = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (x @ x.T), 0.0)
    np.fill_diagonal(d, 0.0)
    return d


def scores(updates: Sequence[FloatArray] | FloatArray, f: int) -> FloatArray:
    """Each update's Krum score: the sum of its squared distances to its n - f - 2 nearest
    others. ``TooFew`` unless n > 2f + 2."""
    x = rows(updates)
    n = len(x)
    if f < 0:
        raise ValueError(f"f counts bad updates and cannot be {f}")
    if n <= 2 * f + 2:
        raise TooFew(f"Krum tolerates {f} bad update(s) only among more than {2 * f + 2}; it "
                     f"has {n}")
    d = squared_distances(x)
    np.fill_diagonal(d, np.inf)  # an update is not its own neighbour
    nearest = np.partition(d, n - f - 3, axis=1)[:, :n - f - 2]
    out: FloatArray = nearest.sum(axis=1)
    return out


def krum(updates: Sequence[FloatArray] | FloatArray, f: int) -> int:
    """The index of the update Krum picks among ``updates`` with up to ``f`` of them bad."""
    return int(np.argmin(scores(updates, f)))


def select(updates: Sequence[FloatArray] | FloatArray, f: int, m: int) -> IntArray:
    """The indices of the ``m`` updates with the best Krum scores (1 <= m <= n - f), best
    first (ties to the lower index)."""
    s = scores(updates, f)
    if not 1 <= m <= len(s) - f:
        raise ValueError(f"Multi-Krum averages between 1 and n - f = {len(s) - f} updates, "
                         f"not {m}")
    out: IntArray = np.argsort(s, kind="stable")[:m].astype(np.int64)
    return out


def multi_krum(updates: Sequence[FloatArray] | FloatArray, f: int, m: int) -> FloatArray:
    """The mean of the ``m`` updates Multi-Krum chooses (m = 1 is Krum's pick itself)."""
    x = rows(updates)
    out: FloatArray = x[select(x, f, m)].mean(axis=0)
    return out


def step(own: FloatArray, aggregate: FloatArray, rate: float, max_step: float) -> FloatArray:
    """``own`` moved toward ``aggregate`` by ``rate`` of the way, and by no more than
    ``max_step`` (L2): however far a bad aggregate lies, one round moves a node that far at
    most, and it keeps ``1 - rate`` of its own at least."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"a step's rate is in [0, 1], not {rate}")
    if not max_step >= 0.0:
        raise ValueError(f"a step's bound cannot be {max_step}")
    move = rate * (np.asarray(aggregate, dtype=np.float64) - own)
    norm = float(np.linalg.norm(move))
    if norm > max_step:
        move *= max_step / norm
    out: FloatArray = own + move
    return out
