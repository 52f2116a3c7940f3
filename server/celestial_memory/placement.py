"""The one owner of concurrency: per-tenant locks, the reinforcement queue and its flusher,
capacity deferred after reinforcements, and when the rebalancer runs.

Locks are per tenant and held only around read-modify-write sequences (a recall's reinforcement,
an update, a write and the capacity it may overflow, a rebalance); reads run beside them and
tenants never wait for each other. Lock order: a thread holding a tenant's lock never flushes
the queue and never takes another tenant's lock, and the flusher holds no tenant lock while it
writes, so no two threads wait on each other.

Capacity after reinforcement: under a steady recall load a full zone would be re-ranked after
every recall (about 22 ms for a full outer zone at 100,000 memories), so a recall only marks its
tenant; the flusher enforces a marked tenant at most every ``capacity_interval_ms``, off the
recall's path. ``flush`` (before any read or write that must see everything) enforces at once.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Collection, Iterator, Sequence

from celestial_memory.config import Settings
from celestial_memory.domain.models import Memory, RebalanceReport
from celestial_memory.rebalancer import Rebalancer
from celestial_memory.reinforcement import ReinforcementQueue, Written
from celestial_memory.store.repository import MemoryRepository

log = logging.getLogger(__name__)


class Placement:
    def __init__(self, repo: MemoryRepository, rebalancer: Rebalancer, settings: Settings) -> None:
        self._repo = repo
        self.rebalancer = rebalancer
        self._capacity_interval = settings.capacity_interval_ms / 1000
        self.queue = ReinforcementQueue(repo, write_through=settings.reinforce_flush_ms <= 0)
        self._locks: dict[str, threading.RLock] = {}
        self._locks_guard = threading.Lock()
        # Tenants whose capacity is due after reinforcements, with the ids to keep, and when
        # each was last enforced (monotonic seconds).
        self._deferred: dict[str, set[str]] = {}
        self._enforced_at: dict[str, float] = {}
        self._deferred_lock = threading.Lock()
        # Held from taking deferred tenants until they are enforced, so a flush never returns
        # while the flusher thread is still enforcing what it took.
        self._enforcing = threading.Lock()
        interval = settings.reinforce_flush_ms / 1000
        self._interval = interval if interval > 0 else 0.05
        self._stopped = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="reinforcement", daemon=True)
        self._thread.start()

    @contextlib.contextmanager
    def locked(self, tenant: str) -> Iterator[None]:
        """Hold the tenant's lock (re-entrant) for a read-modify-write sequence."""
        with self._locks_guard:
            lock = self._locks.setdefault(tenant, threading.RLock())
        with lock:
            yield

    # -- writes and capacity -----------------------------------------------------------------

    def write(self, tenant: str, memories: Sequence[Memory]) -> None:
        """Upsert memories and enforce capacity; each shows the zone capacity left it in."""
        with self.locked(tenant):
            self._repo.upsert(memories)
            self.enforce(tenant, memories)

    def enforce(
        self, tenant: str, written: Sequence[Memory] = (), keep_ids: Collection[str] = ()
    ) -> None:
        """Push overflow outward, under the tenant's lock, and show the memories just written
        where capacity left them."""
        with self.locked(tenant):
            events = self.rebalancer.enforce_capacity(tenant, keep_ids=keep_ids)
        moved = {e.memory_id: e.to_zone for e in events if e.to_zone is not None}
        for m in written:
            m.zone = moved.get(m.id, m.zone)

    # -- reinforcement -----------------------------------------------------------------------

    def reinforce(self, tenant: str, memories: Sequence[Memory]) -> None:
        """Write (or queue) the reinforced state of recalled memories."""
        self._defer({tenant: self.queue.submit(tenant, memories)})

    def pending(self, tenant: str, ids: Sequence[str]) -> dict[str, Memory]:
        """Reinforced state not written yet, by id."""
        return self.queue.overlay(tenant, ids)

    def flush(self) -> None:
        """Write pending reinforcements and enforce every deferred capacity: what any read or
        write that must see everything needs. The caller holds no tenant lock."""
        self._defer(self.queue.flush())
        self._enforce_deferred(force=True)

    def _defer(self, written: Written) -> None:
        with self._deferred_lock:
            for tenant, ids in written.items():
                if ids:
                    self._deferred.setdefault(tenant, set()).update(ids)

    def _enforce_deferred(self, force: bool) -> None:
        if not self._deferred:  # the flusher's tick, every interval: usually nothing to do
            return
        with self._enforcing:
            now = time.monotonic()
            with self._deferred_lock:
                due = {t: self._deferred.pop(t) for t in list(self._deferred)
                       if force or now - self._enforced_at.get(t, -1e9) >= self._capacity_interval}
                self._enforced_at.update(dict.fromkeys(due, now))
            for tenant, keep in due.items():
                self.enforce(tenant, keep_ids=keep)

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait(self._interval)
            self._wake.clear()
            try:
                self._defer(self.queue.flush())
                self._enforce_deferred(force=False)
            except Exception:
                log.exception("reinforcement flush failed; retrying")

    # -- rebalance ---------------------------------------------------------------------------

    def rebalance(
        self, tenant: str, dry_run: bool = False, full: bool = False, forget: bool = True
    ) -> RebalanceReport:
        self.flush()
        with self.locked(tenant):
            return self.rebalancer.rebalance(tenant, dry_run, full, forget)

    def close(self) -> None:
        """Stop the flusher and write what is pending (a graceful stop loses nothing)."""
        self._stopped.set()
        self._wake.set()
        self._thread.join()
        self._defer(self.queue.close())
        self._enforce_deferred(force=True)
