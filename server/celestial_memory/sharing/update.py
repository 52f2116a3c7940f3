"""What one node's turn policy tells another: ``PolicyUpdate``, and its bytes.

What travels, for each arm of the bandit (SAVE, SKIP, in ``ARMS`` order), is its sufficient
statistics less the prior, divided by the evidence behind them:

    M = (A - λI) / n        the features' discounted second moment (upper triangle, row-major)
    m = (b - λθ₀) / n       the reward-weighted features' discounted mean
    n = (A - λI)[0, 0]      the discounted count of rewards (the first feature is the bias, 1)

Why these and not θ: LinUCB's statistics are sums (``A - λI = Σ γᵏ xxᵀ``, ``b - λθ₀ =
Σ γᵏ r·x``: the discount update leaves the prior's part where it is), so what peers learnt
combines the way the data would have; θ alone would drop A, which says how sure each direction
is and is half of what a decision reads. Why divided by n: then every entry lies in [0, 1] (M)
or [-1, 1] (m) whatever the volume, so two honest nodes that saw different amounts of the same
kind of conversation are close, which is what Krum's distances need; n travels beside them, so
a receiver knows how much evidence an update speaks for (and bounds it: merge.py).

Nothing else travels: no turn, text, keyword, tenant, key or decision id. A turn's features
reach M only summed with every other rewarded turn of its arm, and an arm with fewer than
``min_count`` rewards is sent empty, so that one turn's feature vector is never readable off
it (privacy.py adds noise on top where asked).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from celestial_memory.errors import InvalidArgument
from celestial_memory.policy.state import FEATURES
from celestial_memory.policy.turn_policy import ARMS, TurnPolicy, fingerprint

FloatArray = npt.NDArray[np.float64]

DIM = len(FEATURES)
# The upper triangle (with the diagonal) of a symmetric d×d matrix, row-major.
UPPER = np.triu_indices(DIM)
ARM_SIZE = len(UPPER[0]) + DIM
SIZE = len(ARMS) * ARM_SIZE
FORMAT = "celestial-policy-update"
VERSION = 1
# Fewer discounted rewards than this on an arm, and it is sent empty (count 0).
MIN_COUNT = 5.0
# A count no policy reaches: the discount caps the count at 1 / (1 - γ), 1,000 by default.
MAX_COUNT = 1e6
# An update's JSON is about 9 KiB; anything much larger is not one.
MAX_BYTES = 64 * 1024

# n is read off the bias entry of A - λI; a schema without the bias first would need it sent.
assert FEATURES[0] == "bias"


class UpdateRefused(InvalidArgument):
    """An update this node does not take: another policy's, damaged, or out of bounds."""

    def __init__(self, problem: str) -> None:
        super().__init__("update", problem)


@dataclass(frozen=True, eq=False)
class PolicyUpdate:
    """``vector``: each arm's M (upper triangle) then m, arms in ``ARMS`` order, ``SIZE``
    floats (read-only). ``counts``: each arm's n; 0 for an arm sent empty."""

    fingerprint: str
    vector: FloatArray
    counts: tuple[float, ...]

    def __post_init__(self) -> None:
        v = np.array(self.vector, dtype=np.float64)
        if v.shape != (SIZE,):
            raise UpdateRefused(f"a vector of {v.size} values; a policy update has {SIZE}")
        if not np.isfinite(v).all():
            raise UpdateRefused("the vector holds NaN or infinity")
        if len(self.counts) != len(ARMS):
            raise UpdateRefused(f"{len(self.counts)} counts; there are {len(ARMS)} arms")
        if not all(math.isfinite(c) and 0.0 <= c <= MAX_COUNT for c in self.counts):
            raise UpdateRefused(f"a count outside [0, {MAX_COUNT:g}] or not finite")
        v.flags.writeable = False
        object.__setattr__(self, "vector", v)
        object.__setattr__(self, "counts", tuple(float(c) for c in self.counts))

    def arm(self, k: int) -> tuple[FloatArray, FloatArray]:
        """Arm ``k``'s M (the full symmetric matrix) and m."""
        block = self.vector[k * ARM_SIZE:(k + 1) * ARM_SIZE]
        moment = np.zeros((DIM, DIM))
        moment[UPPER] = block[:len(UPPER[0])]
        moment = moment + np.triu(moment, 1).T
        return moment, block[len(UPPER[0]):].copy()

    def to_bytes(self) -> bytes:
        """The update as UTF-8 JSON, every float as Python writes it (exact round trip)."""
        return json.dumps({"format": FORMAT, "version": VERSION, "fingerprint": self.fingerprint,
                           "counts": list(self.counts), "vector": self.vector.tolist()},
                          allow_nan=False, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, data: bytes, expect: str | None = None) -> PolicyUpdate:
        """An update from ``to_bytes``, refused (``UpdateRefused``) when it is larger than
        ``MAX_BYTES``, not this format, learnt under another fingerprint than ``expect`` (this
        node's by default), or holds a NaN, an infinity, a wrong length or a count out of range.
        Values a policy could not have learnt (|entry| > 1) are not refused here: noise puts an
        honest update there too; aggregation and merge.py bound them."""
        if len(data) > MAX_BYTES:
            raise UpdateRefused(f"{len(data)} bytes; an update is at most {MAX_BYTES}")
        try:
            d = json.loads(data.decode(), parse_constant=_refuse_constant)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise UpdateRefused(f"not JSON: {e}") from None
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise UpdateRefused(f"not a {FORMAT}")
        if d.get("version") != VERSION:
            raise UpdateRefused(f"version {d.get('version')!r}; this node reads {VERSION}")
        want = expect if expect is not None else fingerprint()
        got = d.get("fingerprint")
        if got != want:
            raise UpdateRefused(f"learnt under other rules or features (fingerprint "
                                f"{str(got)[:12]}..., this node's {want[:12]}...)")
        return cls(want, np.array(_floats(d.get("vector"), "vector")),
                   tuple(_floats(d.get("counts"), "counts")))


def _refuse_constant(name: str) -> Any:
    raise UpdateRefused(f"{name} in the update")


def _floats(value: object, name: str) -> list[float]:
    if not isinstance(value, list) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in value):
        raise UpdateRefused(f"{name} is not a list of numbers")
    return [float(v) for v in value]


def of(policy: TurnPolicy, min_count: float = MIN_COUNT, own: bool = False) -> PolicyUpdate:
    """What ``policy`` has learnt, as an update (a snapshot taken under the policy's lock):
    everything its bandit holds, or with ``own`` what it learnt from its own rewards alone
    (nothing a merge brought)."""
    # The facade's lock is the one its decisions and rewards take: A and b are read as one.
    with policy.lock:
        source = policy.own if own else policy.bandit
        a = source.A.copy()
        b = source.b.copy()
    cfg = policy.config.bandit
    return from_statistics(a, b, cfg.ridge, cfg.prior, min_count)


def from_statistics(a: FloatArray, b: FloatArray, ridge: float, prior: Sequence[float],
                    min_count: float = MIN_COUNT) -> PolicyUpdate:
    """The update of a bandit's statistics (one A and b per arm) under ridge λ and prior θ₀'s
    bias terms."""
    vector = np.zeros(SIZE)
    counts = []
    eye = np.eye(DIM)
    for k in range(len(ARMS)):
        moment = a[k] - ridge * eye
        n = float(moment[0, 0])
        if not n >= min_count:
            counts.append(0.0)
            continue
        reward = b[k].copy()
        reward[0] -= ridge * prior[k]
        vector[k * ARM_SIZE:(k + 1) * ARM_SIZE] = np.concatenate([moment[UPPER], reward]) / n
        counts.append(n)
    return PolicyUpdate(fingerprint(), vector, tuple(counts))
