"""The one owner of concurrency: per-tenant locks, the reinforcement queue and its flusher,
capacity deferred after reinforcements, and when the rebalancer runs.

Locks are per tenant and held only around read-modify-write sequences (a recall's reinforcement,
an update, a write and the capacity it may overflow, a rebalance); reads run beside them and
tenants never wait for each other. Lock order: a thread holding a tenant's lock never flushes
the queue and never takes another tenant's lock, and the flusher holds no tenant lock while it
writes, so no two threads wait on each other.

Ids: memory ids are unique across tenants, so creating one (a Store or Import naming it) checks
and writes under a lock of the id's stripe (``ids_locked``), whatever the tenant: two concurrent
creates of one id are decided one after the other. Stripe locks are taken in order and never
while waiting for a tenant's lock in another order.

Capacity after reinforcement: under a steady recall load a full zone would be re-ranked after
every recall (about 22 ms for a full outer zone at 100,000 memories), so a recall only marks its
tenant; the flusher enforces a marked tenant at most every ``capacity_interval_ms``, off the
recall's path. ``flush(tenant)`` (before a read or write of that tenant that must see everything)
enforces at once.

Yielding: the flusher writes in short pieces and waits before each for a moment with no call in
progress (zones/activity.py), at most ``background_yield_ms`` a round; a caller that flushes
(a read that must see everything) ends the waiting, so it never waits on a gap its own call
keeps from coming.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
import zlib
from collections.abc import Callable, Collection, Iterator, Sequence

from celestial_memory.config import Settings
from celestial_memory.domain.models import Memory, RebalanceReport
from celestial_memory.observability import metrics
from celestial_memory.store.repository import MemoryRepository
from celestial_memory.zones.activity import Activity
from celestial_memory.zones.rebalancer import Rebalancer
from celestial_memory.zones.reinforcement import ReinforcementQueue, Written
from celestial_memory.zones.reinforcement_journal import ReinforcementJournal

log = logging.getLogger(__name__)
ID_STRIPES = 256


class Placement:
    def __init__(self, repo: MemoryRepository, rebalancer: Rebalancer, settings: Settings,
                 activity: Activity | None = None) -> None:
        self._repo = repo
        self._activity = activity
        self._yield_s = settings.background_yield_ms / 1000
        self._callers_flushing = 0  # callers waiting on a flush: the flusher stops yielding
        self._callers_lock = threading.Lock()
        self.rebalancer = rebalancer
        self._capacity_interval = settings.capacity_interval_ms / 1000
        interval = settings.reinforce_flush_s()
        journal_dir = settings.data_dir / f"{settings.collection_name(repo.dimension)}_journal"
        journal = (ReinforcementJournal(journal_dir)
                   if interval > 0 and settings.reinforce_journal else None)
        self.queue = ReinforcementQueue(repo, write_through=interval <= 0, journal=journal)
        # Before any recall: what a process that died had journaled but not written.
        recovered = self.queue.recover(journal_dir)
        self._locks: dict[str, threading.RLock] = {}
        self._locks_guard = threading.Lock()
        self._id_locks = [threading.Lock() for _ in range(ID_STRIPES)]
        # Tenants whose capacity is due after reinforcements, with the ids to keep, and when
        # each was last enforced (monotonic seconds).
        self._deferred: dict[str, set[str]] = {}
        self._enforced_at: dict[str, float] = {}
        self._deferred_lock = threading.Lock()
        # Held while the queue is written and what it wrote is deferred, so a flush never returns
        # between the flusher's write and its deferral.
        self._writing = threading.Lock()
        self._interval = interval if interval > 0 else 0.05
        self._defer(recovered)
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

    @contextlib.contextmanager
    def ids_locked(self, ids: Collection[str]) -> Iterator[None]:
        """Hold the stripes of ``ids`` (taken before any tenant lock, in stripe order) while a
        create checks that they are free and writes them."""
        stripes = sorted({zlib.crc32(i.encode()) % ID_STRIPES for i in ids if i})
        with contextlib.ExitStack() as stack:
            for s in stripes:
                stack.enter_context(self._id_locks[s])
            yield

    # -- writes and capacity -----------------------------------------------------------------

    def write(
        self, tenant: str, memories: Sequence[Memory], replacing: Sequence[Memory] = ()
    ) -> None:
        """Write new memories (an id that exists meanwhile is left as it is) and ``replacing``
        ones (each replaces only a memory of ``tenant``), then enforce capacity; each shows the
        zone capacity left it in."""
        with self.locked(tenant):
            if memories:
                self._repo.upsert(memories, insert_only=True)
            if replacing:
                self._repo.upsert(replacing, tenant=tenant)
            self.enforce(tenant, [*memories, *replacing])

    def enforce(
        self, tenant: str, written: Sequence[Memory] = (), keep_ids: Collection[str] = ()
    ) -> None:
        """Push overflow outward, under the tenant's lock, and show the memories just written
        where capacity left them. With memories written, only the zones they are in (and those
        an eviction fills) are counted: no other zone grew."""
        entered = {m.zone for m in written} if written else None
        with self.locked(tenant):
            events = self.rebalancer.enforce_capacity(tenant, keep_ids=keep_ids, entered=entered)
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

    def flush(self, tenant: str | None = None) -> None:
        """Write pending reinforcements and enforce the deferred capacity of ``tenant`` (of every
        tenant when None): what a read or write that must see everything needs. The caller holds
        no tenant lock."""
        with self._caller_flushing():
            self._write_pending()
            for t in [tenant] if tenant is not None else self._deferred_tenants():
                self._enforce_deferred(t, force=True)

    @contextlib.contextmanager
    def _caller_flushing(self) -> Iterator[None]:
        with self._callers_lock:
            self._callers_flushing += 1
        if self._activity is not None:
            self._activity.nudge()  # a flusher waiting for a gap writes on at once
        try:
            yield
        finally:
            with self._callers_lock:
                self._callers_flushing -= 1

    def _gap(self, until: float) -> None:
        """The flusher's wait, before a piece of its work, for a moment with no call."""
        if self._activity is not None and self._yield_s > 0:
            self._activity.gap(until, lambda: bool(self._callers_flushing)
                               or self._stopped.is_set())

    def _write_pending(self, pause: Callable[[], object] = lambda: None) -> None:
        with self._writing:
            self._defer(self.queue.flush(pause))

    def _defer(self, written: Written) -> None:
        with self._deferred_lock:
            for tenant, ids in written.items():
                if ids:
                    self._deferred.setdefault(tenant, set()).update(ids)

    def _deferred_tenants(self) -> list[str]:
        with self._deferred_lock:
            return list(self._deferred)

    def _enforce_deferred(self, tenant: str, force: bool) -> None:
        """Enforce ``tenant``'s deferred capacity, unless it was enforced less than the interval
        ago and ``force`` is off. The deferral is taken under the tenant's lock, so a flush that
        comes while the flusher enforces waits for it, and other tenants never wait."""
        if not force and (time.monotonic() - self._enforced_at.get(tenant, -1e9)
                          < self._capacity_interval):
            return  # the flusher's tick, every 50 ms: leave the tenant's lock to its recalls
        with self.locked(tenant):
            with self._deferred_lock:
                now = time.monotonic()
                recent = now - self._enforced_at.get(tenant, -1e9) < self._capacity_interval
                if tenant not in self._deferred or (recent and not force):
                    return
                keep = self._deferred.pop(tenant)
                self._enforced_at[tenant] = now
            try:
                self.enforce(tenant, keep_ids=keep)
            except Exception:
                self._defer({tenant: keep})  # the next flush tries again
                raise

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait(self._interval)
            self._wake.clear()
            until = time.monotonic() + self._yield_s
            try:
                self._write_pending(functools.partial(self._gap, until))
                for tenant in self._deferred_tenants():
                    self._gap(until)
                    self._enforce_deferred(tenant, force=False)
            except Exception:
                log.exception("reinforcement flush failed; retrying")

    # -- rebalance ---------------------------------------------------------------------------

    def rebalance(
        self, tenant: str, dry_run: bool = False, full: bool = False, forget: bool = True
    ) -> RebalanceReport:
        self.flush(tenant)
        with self.locked(tenant):
            rep = self.rebalancer.rebalance(tenant, dry_run, full, forget)
        metrics.rebalanced(rep.duration_ms / 1000, rep.dry_run, sum(rep.moved.values()),
                           rep.evicted, rep.forgotten, rep.purged)
        return rep

    def close(self) -> None:
        """Stop the flusher and write what is pending (a graceful stop loses nothing)."""
        self._stopped.set()
        self._wake.set()
        self._thread.join()
        with self._writing:
            self._defer(self.queue.close())
        self.flush()
