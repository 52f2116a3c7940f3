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
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
from celestial_memory.clock import Clock
from celestial_memory.config import Settings
from celestial_memory.errors import InvalidArgument
from celestial_memory.policy.bandit import BanditConfig
from celestial_memory.policy.turn_policy import PolicyConfig, PolicyStateError, TurnPolicy
from celestial_memory.store.repository import MemoryRepository

log = logging.getLogger(__name__)
# Policies held in memory at once (least recently used out, saved first).
MAX_HELD = 1024
# The largest state an Import may carry: a policy's own is tens of KiB.
MAX_STATE_BYTES = 4 * 2**20


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

    def _load(self, tenant: str) -> TurnPolicy:
        kept = self._store.read_policy(tenant)
        if kept is None:
            return self._new()
        state, saved_at = kept
        try:
            p = TurnPolicy.from_dict(json.loads(state), self._rng(), self._clock, self._config)
        except (PolicyStateError, ValueError, KeyError, TypeError, AttributeError) as e:
            log.warning("turn policy of tenant %r not read (%s): it starts again", tenant, e)
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
        """Drop the tenant's policy (held and saved); how many decisions it had taken."""
        with self._lock:
            old = self.of(tenant)
            before = sum(old.counters.decisions.values())
            # Ids go on from the old policy's: a memory it decided never names a new decision.
            self._held[tenant] = self._new().continuing(old)
            self._dirty.discard(tenant)
            self._saved_at.pop(tenant, None)
            self._store.delete_policy(tenant)
            return before

    def exported(self, tenant: str) -> str | None:
        """The tenant's policy as saved JSON, None when it never decided anything."""
        with self._lock:
            held = self._held.get(tenant)
            if held is None and self._store.read_policy(tenant) is None:
                return None
            p = self.of(tenant)
            if not any(p.counters.decisions.values()):
                return None
            return json.dumps(p.to_dict(), separators=(",", ":"))

    def restore(self, tenant: str, state: str) -> None:
        """An imported policy replaces the tenant's, saved at once. INVALID_ARGUMENT when it
        cannot be read."""
        if len(state.encode()) > MAX_STATE_BYTES:
            raise InvalidArgument("turn_policy.state", f"larger than {MAX_STATE_BYTES} bytes")
        try:
            d: Any = json.loads(state)
            p = TurnPolicy.from_dict(d, self._rng(), self._clock, self._config)
        except (PolicyStateError, ValueError, KeyError, TypeError, AttributeError,
                IndexError, RecursionError) as e:
            raise InvalidArgument("turn_policy.state", f"not a turn policy this server reads: "
                                  f"{type(e).__name__}: {str(e)[:200]}") from None
        with self._lock:
            self._held[tenant] = p
            self._held.move_to_end(tenant)
            self._save(tenant)
            self._trim()

    def close(self) -> None:
        """Stop the saver and save what changed."""
        with self._lock:
            self._closed = True
        self._wake.set()
        if self._saver is not None:
            self._saver.join(timeout=10)
        self.flush()
