"""Phase 2 of the turn policy: a contextual bandit per tenant, LinUCB over the state vector
(policy/state.py), in numpy.

Each action has a ridge regression of its reward on the state; it is chosen by its bound
``θ·x + c·α·sqrt(xᵀA⁻¹x)``, and with probability ε by a uniform draw instead, so that every
action keeps a known chance and the log can evaluate another policy. The chance the chosen
action had is its propensity, returned with it. ``c`` is +1 (optimistic, the upper bound) for
SAVE and -1 (the lower bound) for SKIP: losing a turn costs more than keeping one, so what has
not been learnt is kept, and SKIP is tried on the unknown only by the ε draws.

Bounds, so that no stream of rewards drives it anywhere:

- a reward is clipped to [-1, 1] before it is learnt;
- the statistics are discounted (``A ← γA + (1-γ)λI + xxᵀ``, ``b ← γb + (1-γ)λθ₀ + r·x``): the
  prior ``θ₀`` and the ridge ``λI`` stay, old evidence fades, and A's eigenvalues stay within
  [λ, λ + max‖x‖²/(1-γ)];
- θ is projected onto the ball ‖θ‖ ≤ ``max_norm``, so an action's estimate is within
  ±max_norm·‖x‖ whatever it was told.

Why not a library: mabwiser's LinUCB and vowpalwabbit's contextual bandits are on the package
index, but neither bounds θ's norm nor discounts, and they bring pandas and scikit-learn (mabwiser)
or a native engine (vowpalwabbit) for what is two small matrix solves per decision here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class BanditConfig:
    """``alpha``: the confidence bound's width. ``epsilon``: the share of decisions drawn
    uniformly. ``ridge``: λ. ``discount``: γ. ``max_norm``: the bound on ‖θ‖. ``prior``: θ₀'s
    bias term for each action (the first feature is the bias), which is what a new tenant's
    policy does before any reward: keep rather than lose. ``offsets``: added to each action's
    bound when choosing (a margin an action must win by). ``optimism``: each action's sign
    on the confidence width (+1 upper bound, -1 lower bound)."""

    alpha: float = 0.3
    epsilon: float = 0.05
    ridge: float = 1.0
    discount: float = 0.999
    max_norm: float = 3.0
    prior: tuple[float, ...] = (0.2, 0.0)
    offsets: tuple[float, ...] = (0.0, 0.0)
    optimism: tuple[float, ...] = (1.0, -1.0)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BanditConfig:
        return cls(float(d["alpha"]), float(d["epsilon"]), float(d["ridge"]),
                   float(d["discount"]), float(d["max_norm"]),
                   tuple(float(v) for v in d["prior"]), tuple(float(v) for v in d["offsets"]),
                   tuple(float(v) for v in d["optimism"]))


@dataclass(frozen=True)
class Choice:
    index: int
    probability: float
    scores: FloatArray
    explored: bool


class LinUCB:
    """Disjoint LinUCB over ``len(actions)`` actions and ``dim`` features."""

    def __init__(self, actions: Sequence[str], dim: int, config: BanditConfig | None = None,
                 rng: np.random.Generator | None = None) -> None:
        self.actions = tuple(actions)
        self.dim = dim
        self.config = config or BanditConfig()
        k = len(self.actions)
        if any(len(v) != k for v in (self.config.prior, self.config.offsets,
                                     self.config.optimism)):
            raise ValueError(f"prior, offsets and optimism need one value for each of {k} "
                             "actions")
        self._rng = rng if rng is not None else np.random.default_rng()
        lam = self.config.ridge
        self._theta0 = np.zeros((k, dim))
        self._theta0[:, 0] = self.config.prior
        self.A = np.repeat(np.eye(dim)[None] * lam, k, axis=0)
        self.b = lam * self._theta0.copy()
        self.updates = np.zeros(k, dtype=np.int64)
        # A⁻¹ and θ, computed once per update rather than once per decision.
        self._solved: tuple[FloatArray, FloatArray] | None = None

    def _solve(self) -> tuple[FloatArray, FloatArray]:
        if self._solved is None:
            inv: FloatArray = np.linalg.inv(self.A).astype(np.float64)
            raw: FloatArray = np.einsum("kij,kj->ki", inv, self.b)
            norms = np.linalg.norm(raw, axis=1, keepdims=True)
            theta: FloatArray = raw * np.minimum(1.0, self.config.max_norm
                                                 / np.maximum(norms, 1e-12))
            self._solved = (inv, theta)
        return self._solved

    def theta(self) -> FloatArray:
        """Each action's estimate (rows), projected onto the ball of radius ``max_norm``."""
        return self._solve()[1].copy()

    def scores(self, x: FloatArray) -> FloatArray:
        """Each action's confidence bound at ``x`` (upper or lower, by its ``optimism``)."""
        inv, theta = self._solve()
        width = np.sqrt(np.maximum(np.einsum("i,kij,j->k", x, inv, x), 0.0))
        out: FloatArray = theta @ x + (
            self.config.alpha * np.asarray(self.config.optimism) * width)
        return out

    def choose(self, x: FloatArray, greedy: bool = False) -> Choice:
        """The action at ``x``: the best bound, or with probability ε a uniform draw (never
        when ``greedy``, which draws nothing: a dry run leaves the generator as it was)."""
        s = self.scores(x)
        best = int(np.argmax(s + np.asarray(self.config.offsets)))
        k = len(self.actions)
        eps = 0.0 if greedy else self.config.epsilon
        probs = np.full(k, eps / k)
        probs[best] += 1.0 - eps
        if eps > 0.0 and self._rng.random() < eps:
            pick = int(self._rng.integers(k))
            return Choice(pick, float(probs[pick]), s, pick != best)
        return Choice(best, float(probs[best]), s, False)

    def update(self, index: int, x: FloatArray, reward: float) -> float:
        """Learn ``reward`` (clipped to [-1, 1]) for action ``index`` at ``x``; the reward
        learnt is returned."""
        r = float(np.clip(reward, -1.0, 1.0)) if np.isfinite(reward) else 0.0
        g, lam = self.config.discount, self.config.ridge
        self.A[index] = g * self.A[index] + (1 - g) * lam * np.eye(self.dim) + np.outer(x, x)
        self.b[index] = g * self.b[index] + (1 - g) * lam * self._theta0[index] + r * x
        self.updates[index] += 1
        self._solved = None
        return r

    def set_statistics(self, a: FloatArray, b: FloatArray) -> None:
        """Replace A and b (a merge of peers' statistics, which keeps the bounds itself)."""
        self.A, self.b = a, b
        self._solved = None  # A⁻¹ and θ are cached between updates

    def bound(self, x_norm: float = 1.0) -> float:
        """The largest |θ·x| any action can reach for a state of norm ``x_norm``."""
        return self.config.max_norm * x_norm

    def to_dict(self) -> dict[str, Any]:
        return {"actions": list(self.actions), "dim": self.dim, "config": self.config.to_dict(),
                "A": self.A.tolist(), "b": self.b.tolist(), "updates": self.updates.tolist()}

    @classmethod
    def from_dict(cls, d: dict[str, Any], rng: np.random.Generator | None = None,
                  config: BanditConfig | None = None) -> LinUCB:
        """A bandit from ``to_dict``; ``config``, when given, replaces the saved one (a
        policy's own settings win over the copy its bandit carries)."""
        out = cls(d["actions"], int(d["dim"]), config or BanditConfig.from_dict(d["config"]), rng)
        a = np.asarray(d["A"], dtype=np.float64)
        b = np.asarray(d["b"], dtype=np.float64)
        if a.shape != out.A.shape or b.shape != out.b.shape or not (
                np.isfinite(a).all() and np.isfinite(b).all()):
            raise ValueError("bandit state does not fit its actions and features")
        out.A, out.b = a, b
        out.updates = np.asarray(d["updates"], dtype=np.int64)
        return out
