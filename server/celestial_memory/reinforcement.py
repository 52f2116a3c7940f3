"""Writing reinforcement: through (the default), or behind within a bound.

Durability (what is acknowledged when):
- Store, StoreBatch, Update, Delete are written before they are acknowledged.
- ``reinforce_flush_ms = 0`` (the default), write-through: the reinforcement of what a Recall
  returned (recall count, last recall, context score, score, zone, drop times) is written by the
  recalling thread, under the service lock, before the Recall is acknowledged: a crash loses none.
- ``reinforce_flush_ms > 0`` (at most 100), write-behind: a Recall is acknowledged first. Its
  updates wait in this queue and are written in one batch at most that many milliseconds later,
  and on a graceful stop before the store closes. A crash (SIGKILL, power loss) can lose at most
  the reinforcements of that last interval; never a stored memory.

At 100,000 memories on 2 cores neither was consistently faster: the flusher's writes compete with
the next recalls for the two cores, where writing through adds the writes (about 2 ms) to the
recall (through gRPC, interleaved: 18.0 ms through, 19.0 behind; in-process, three runs of
``make bench-recall``: 16.3 / 15.2, 18.7 / 18.0, 11.5 / 14.1). So the default is the one that
loses nothing.
- Within one process, reads see pending reinforcements: recall overlays them and the service
  flushes the queue before a get, update, delete, stats or rebalance.
- Across replicas, two recalls of one memory within the same interval may count once (the later
  write wins).

Either way, capacity after reinforcement is enforced by the service (``on_flushed``), and the
queue's thread calls ``on_tick`` every interval (50 ms when writing through).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from celestial_memory.store.base import MemoryStore

log = logging.getLogger(__name__)
Fields = dict[str, Any]


class ReinforcementQueue:
    def __init__(
        self,
        store: MemoryStore,
        interval_s: float,
        on_flushed: Callable[[str, set[str], bool], None],
        on_tick: Callable[[], None] = lambda: None,
    ) -> None:
        self._store = store
        self._through = interval_s <= 0
        self._interval = interval_s if interval_s > 0 else 0.05
        self._on_flushed = on_flushed  # (tenant, ids, scheduled): after a write
        self._on_tick = on_tick  # after every scheduled flush, written or not
        self._pending: dict[str, dict[str, Fields]] = {}  # tenant -> id -> latest fields
        # Taken from pending and being written: still visible to overlay until written, so a
        # reader never sees neither the pending fields nor the written ones.
        self._inflight: dict[str, dict[str, Fields]] = {}
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="reinforcement", daemon=True)
        self._thread.start()

    def submit(self, tenant: str, updates: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        if self._stopped.is_set():
            raise RuntimeError("reinforcement queue is closed")
        if self._through:
            if updates:
                self._store.set_fields(tenant, updates)
                self._on_flushed(tenant, {pid for pid, _ in updates}, True)
            return
        with self._lock:
            bucket = self._pending.setdefault(tenant, {})
            for pid, fields in updates:
                bucket.setdefault(pid, {}).update(fields)

    def overlay_many(self, tenant: str, pids: Sequence[str]) -> dict[str, Fields]:
        """The fields not yet written for each of ``pids`` that has any (one lock, for a
        recall's candidates)."""
        with self._lock:
            pending, inflight = self._pending.get(tenant, {}), self._inflight.get(tenant, {})
            return {pid: dict(f) for pid in pids if (f := pending.get(pid) or inflight.get(pid))}

    def pending(self) -> int:
        with self._lock:
            return sum(len(b) for b in self._pending.values())

    def flush(self, scheduled: bool = False) -> int:
        """Write everything pending now; returns how many memories were written.

        ``on_flushed`` runs after the flush lock is released: it takes the service lock, and a
        service thread holding that lock may be waiting here to flush.
        """
        written: dict[str, set[str]] = {}
        with self._flush_lock:
            with self._lock:
                batch, self._pending = self._pending, {}
                self._inflight = batch
            for tenant, updates in batch.items():
                try:
                    self._store.set_fields(tenant, list(updates.items()))
                except Exception:
                    # Put them back (newer submissions win) and let the next flush retry.
                    with self._lock:
                        bucket = self._pending.setdefault(tenant, {})
                        for pid, fields in updates.items():
                            bucket[pid] = {**fields, **bucket.get(pid, {})}
                        self._inflight = {}
                    raise
                written[tenant] = set(updates)
            with self._lock:
                self._inflight = {}
        for tenant, ids in written.items():
            self._on_flushed(tenant, ids, scheduled)
        return sum(len(ids) for ids in written.values())

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait(self._interval)
            self._wake.clear()
            try:
                self.flush(scheduled=True)
                self._on_tick()
            except Exception:
                log.exception("reinforcement flush failed; retrying")

    def close(self) -> None:
        """Stop the flusher and write what is pending (a graceful stop loses nothing)."""
        self._stopped.set()
        self._wake.set()
        self._thread.join()
        self.flush()
