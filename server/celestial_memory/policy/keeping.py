"""Each tenant's turn policy, kept in the store beside its memories (docs/design.md, "The turn
policy"): read when the tenant's first turn comes, and saved behind the decisions, every
``save_s`` at most (0: before each decision is answered), and on close. A killed process loses
what its policies learnt since their last save, never a memory: a turn is written before its
answer whatever the policy's state.

A saved state that cannot be read (another version, damaged) is logged and the tenant starts
a new policy: a policy is advice about what to keep, and no turn waits on it.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
from celestial_memory.clock import Clock
from celestial_memory.config import Settings
from celestial_memory.errors import InvalidArgument
from celestial_memory.policy.bandit import BanditConfig
from celestial_memory.policy.decision import Action, Phase
from celestial_memory.policy.state import FEATURES
from celestial_memory.policy.turn_policy import (
    MAX_PENDING,
    PolicyConfig,
    PolicyStateError,
    TurnPolicy,
)
from celestial_memory.store.repository import MemoryRepository

log = logging.getLogger(__name__)
# Policies held in memory at once (least recently used out, saved first).
MAX_HELD = 1024
# The largest state an Import may carry: a policy's own is tens of KiB.
MAX_STATE_BYTES = 4 * 2**20
# The "phase:rule" keys a policy's rewards may be counted under (the rules are a handful).
MAX_RULES = 64


class PolicyKeeper:
    def __init__(self, store: MemoryRepository, clock: Clock, save_s: float,
                 config: PolicyConfig | None = None,
                 rng: Callable[[], np.random.Generator] = np.random.default_rng) -> None:
        self._store, self._clock, self._save_s = store, clock, save_s
        self._config = config or PolicyConfig()
        self._rng = rng
        self._held: OrderedDict[str, TurnPolicy] = OrderedDict()
        self._dirty: set[str] = set()
        self._saved_at: dict[str, float] = {}
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._closed = False
        self._saver: threading.Thread | None = None

    @classmethod
    def from_settings(cls, store: MemoryRepository, clock: Clock,
                      settings: Settings) -> PolicyKeeper:
        bandit = BanditConfig(epsilon=settings.policy_exploration)
        return cls(store, clock, settings.policy_save_s, PolicyConfig(bandit=bandit))

    def of(self, tenant: str) -> TurnPolicy:
        """The tenant's policy: held, or read from the store, or new."""
        with self._lock:
            p = self._held.get(tenant)
            if p is None:
                p = self._load(tenant)
                self._held[tenant] = p
                self._trim()
            self._held.move_to_end(tenant)
            return p

    def held(self) -> list[str]:
        """The tenants whose policies are held now (those that decided or were read lately)."""
        with self._lock:
            return list(self._held)

    def _load(self, tenant: str) -> TurnPolicy:
        kept = self._store.read_policy(tenant)
        if kept is None:
            return self._new()
        state, saved_at = kept
        try:  # held to the same checks as an import: a damaged store breaks no decision
            p = self.read(state)
        except InvalidArgument as e:
            log.warning("turn policy of tenant %r not read (%s): it starts again", tenant,
                        e.problem)
            return self._new()
        self._saved_at[tenant] = saved_at
        return p

    def _new(self) -> TurnPolicy:
        return TurnPolicy(self._config, self._rng(), self._clock)

    def _trim(self) -> None:
        while len(self._held) > MAX_HELD:
            tenant, _ = next(iter(self._held.items()))
            if tenant in self._dirty:
                self._save(tenant)
            self._held.popitem(last=False)
            self._saved_at.pop(tenant, None)

    def changed(self, tenant: str) -> None:
        """The tenant's policy decided or learnt: saved now, or by the saver within save_s."""
        with self._lock:
            if self._save_s <= 0:
                self._save(tenant)
                return
            self._dirty.add(tenant)
            if self._saver is None and not self._closed:
                self._saver = threading.Thread(target=self._run, name="policy-saver",
                                               daemon=True)
                self._saver.start()

    def _run(self) -> None:
        while not self._wake.wait(self._save_s):
            try:
                self.flush()
            except Exception:  # the store down: the next round tries again
                log.exception("turn policies not saved")

    def flush(self) -> None:
        """Save every policy changed since its last save."""
        with self._lock:
            for tenant in sorted(self._dirty):
                self._save(tenant)

    def _save(self, tenant: str) -> None:
        p = self._held.get(tenant)
        if p is None:
            self._dirty.discard(tenant)
            return
        now = self._clock.now()
        self._store.write_policy(tenant, json.dumps(p.to_dict(), separators=(",", ":")), now)
        self._saved_at[tenant] = now
        self._dirty.discard(tenant)

    def saved_at(self, tenant: str) -> float | None:
        with self._lock:
            return self._saved_at.get(tenant)

    def reset(self, tenant: str) -> int:
        """Start the tenant's policy again (held and saved); how many decisions the old one
        had taken."""
        with self._lock:
            old = self.of(tenant)
            before = sum(old.counters.decisions.values())
            # Ids go on from the old policy's, saved at once so a restart keeps them: a memory
            # the old one decided never names a new decision.
            self._held[tenant] = self._new().continuing(old)
            self._save(tenant)
            return before

    def exported(self, tenant: str) -> str | None:
        """The tenant's policy as saved JSON, None when it never decided anything."""
        with self._lock:
            p = self.of(tenant)  # one read of the store, when not held
            if not any(p.counters.decisions.values()):
                return None
            return json.dumps(p.to_dict(), separators=(",", ":"))

    def read(self, state: str) -> TurnPolicy:
        """An imported state as a policy under this server's settings. INVALID_ARGUMENT when it
        cannot be read, or holds what no policy of this server can (``_check``): an Import
        checks it on its first message, before it writes anything."""
        if len(state.encode()) > MAX_STATE_BYTES:
            raise InvalidArgument("turn_policy.state", f"larger than {MAX_STATE_BYTES} bytes")
        try:
            d: Any = json.loads(state)
            p = TurnPolicy.from_dict(d, self._rng(), self._clock, self._config)
            _check(d, p)
        except (PolicyStateError, ValueError, KeyError, TypeError, AttributeError,
                IndexError, RecursionError) as e:
            raise InvalidArgument("turn_policy.state", f"not a turn policy this server reads: "
                                  f"{type(e).__name__}: {str(e)[:200]}") from None
        return p

    def restore(self, tenant: str, state: str, replace: bool = False) -> bool:
        """An imported policy, saved at once: it replaces the tenant's when ``replace`` (an
        Import that replaces) or when the tenant's own never decided anything; a policy of the
        tenant's own is otherwise kept, as its memories are. Whether it was taken.
        INVALID_ARGUMENT when it cannot be read (``read``)."""
        p = self.read(state)
        with self._lock:
            own = self.of(tenant)
            if not replace and any(own.counters.decisions.values()):
                return False
            p.continuing(own)  # ids never go back
            self._held[tenant] = p
            self._held.move_to_end(tenant)
            self._save(tenant)
            self._trim()
            return True

    def close(self, save: bool = True) -> None:
        """Stop the saver and save what changed (``save=False``: drop it, as a kill would)."""
        with self._lock:
            self._closed = True
        self._wake.set()
        if self._saver is not None:
            self._saver.join(timeout=10)
        if save:
            self.flush()


def _check(d: Any, p: TurnPolicy) -> None:
    """Refuse (PolicyStateError) a state that reads but that no policy of this server could
    have come to, and that would break or unbound the tenant's decisions once taken: a bandit
    outside its bounds under the server's settings (policy/bandit.py: A's eigenvalues within
    [λ, λ + dim/(1-γ)], ‖b‖ within λ‖θ₀‖ + √dim/(1-γ)), counts without an action or phase, a
    scored decision whose features are not the schema's, in [0, 1], or ids that go back."""
    c = d["counters"]
    if set(c["decisions"]) != {a.value for a in Action} or set(c["phases"]) != {
            str(int(x)) for x in Phase}:
        raise PolicyStateError("counters: one count for each action and each phase")
    if any(int(v) < 0 for v in (*c["decisions"].values(), *c["phases"].values())):
        raise PolicyStateError("counters: a count below 0")
    if len(c["by_rule"]) > MAX_RULES:
        raise PolicyStateError(f"counters: rewards by more than {MAX_RULES} rules")
    bandit, cfg = p.bandit, p.config.bandit
    lam, room = cfg.ridge, 1.0 / (1.0 - cfg.discount) if cfg.discount < 1 else math.inf
    if not np.allclose(bandit.A, bandit.A.transpose(0, 2, 1), rtol=1e-9, atol=1e-9):
        raise PolicyStateError("bandit: A is not symmetric")
    eig = np.linalg.eigvalsh(bandit.A)
    top = lam + bandit.dim * room
    if eig.min() < lam - 1e-9 * max(1.0, top) or eig.max() > top * (1 + 1e-9):
        raise PolicyStateError(f"bandit: A's eigenvalues outside [{lam}, {top}]")
    reach = lam * np.abs(np.asarray(cfg.prior)) + math.sqrt(bandit.dim) * room
    with np.errstate(over="ignore"):  # a norm past the float range is inf: refused
        norms = np.linalg.norm(bandit.b, axis=1)
    if (norms > reach * (1 + 1e-9)).any():
        raise PolicyStateError("bandit: b beyond its bound")
    if bandit.updates.shape != (len(bandit.actions),) or (bandit.updates < 0).any():
        raise PolicyStateError("bandit: one count of updates for each action")
    logged = p.last(MAX_PENDING)
    for dec in logged:
        t = dec.trace
        if t.scores and not (all(0.0 <= t.features.get(n, -1.0) <= 1.0 for n in FEATURES)
                             and all(math.isfinite(v) for v in t.scores.values())):
            raise PolicyStateError(f"decision {dec.id}: its features are not the schema's")
    last = max([dec.id for dec in logged] + [int(s[1]) for s in d["sessions"]], default=0)
    if int(d["next_id"]) <= last:
        raise PolicyStateError(f"next_id {d['next_id']} is not past decision {last}")
