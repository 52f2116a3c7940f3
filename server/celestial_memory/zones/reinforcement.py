"""Writing reinforcement: through, or behind within a bound, journaled or not.

The queue holds the reinforced state of recalled memories (models.REINFORCED) and writes it; it
calls nobody back: ``submit`` and ``flush`` return what they wrote, and the placement
(zones/placement.py), which runs the flusher, decides what follows (capacity). Durability is described
in docs/design.md, "Durability"; in short, writing through loses nothing, writing behind with a
journal (zones/reinforcement_journal.py; the embedded store's default) loses nothing when the process
dies, and writing behind without one can lose the last interval's reinforcements, never a memory.

Readers see pending reinforcements: ``overlay`` returns them, including a batch being written
(in flight), so a reader never sees neither the pending state nor the written one.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from celestial_memory.domain.models import REINFORCED, Memory
from celestial_memory.store.payload import payload_fields
from celestial_memory.store.repository import MemoryRepository
from celestial_memory.zones.reinforcement_journal import ReinforcementJournal

log = logging.getLogger(__name__)
Written = dict[str, set[str]]  # tenant -> ids
# Memories per engine write of a flush: one recall's worth and a half. The engine holds the
# interpreter for a whole write, so a smaller piece leaves a call that arrives less to wait for.
WRITE_CHUNK = 16


class ReinforcementQueue:
    def __init__(
        self, repo: MemoryRepository, write_through: bool,
        journal: ReinforcementJournal | None = None,
    ) -> None:
        self._repo = repo
        self.write_through = write_through
        self._journal = None if write_through else journal
        self._pending: dict[str, dict[str, Memory]] = {}  # tenant -> id -> latest state
        self._inflight: dict[str, dict[str, Memory]] = {}
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._closed = False

    def submit(self, tenant: str, memories: Sequence[Memory]) -> set[str]:
        """Reinforced state to write; returns the ids written now (write-through) or none."""
        if self.write_through:
            if self._closed:
                raise RuntimeError("reinforcement queue is closed")
            self._repo.save(tenant, memories, REINFORCED)
            return {m.id for m in memories}
        with self._lock:  # appended and queued together: a rotation splits neither
            if self._closed:  # checked under the lock: close's last flush sees all it let in
                raise RuntimeError("reinforcement queue is closed")
            if self._journal is not None:
                self._journal.append(tenant, [(m.id, payload_fields(m, REINFORCED))
                                              for m in memories])
            bucket = self._pending.setdefault(tenant, {})
            for m in memories:
                bucket[m.id] = copy.copy(m)  # the caller goes on using its own
        return set()

    def overlay(self, tenant: str, ids: Sequence[str]) -> dict[str, Memory]:
        """The state not yet written of each of ``ids`` that has any (one lock)."""
        with self._lock:
            pending, inflight = self._pending.get(tenant, {}), self._inflight.get(tenant, {})
            return {i: m for i in ids if (m := pending.get(i) or inflight.get(i)) is not None}

    def pending(self) -> int:
        """How many memories wait to be written."""
        with self._lock:
            return sum(len(b) for b in self._pending.values())

    def flush(self, pause: Callable[[], object] = lambda: None) -> Written:
        """Write everything pending now; returns what was written. On a failure the batch goes
        back (newer submissions win) for the next flush, and the error propagates. ``pause``
        runs before each piece of ``WRITE_CHUNK`` memories (the flusher waits there for a gap
        between calls, zones/activity.py)."""
        written: Written = {}
        with self._flush_lock:
            with self._lock:
                # Rotated first: if that fails, nothing has moved and the batch stays pending.
                segments = self._journal.rotate() if self._journal and self._pending else []
                batch, self._pending = self._pending, {}
                self._inflight = batch
            try:
                for tenant, states in batch.items():
                    items = list(states.values())
                    for start in range(0, len(items), WRITE_CHUNK):
                        pause()
                        self._repo.save(tenant, items[start:start + WRITE_CHUNK], REINFORCED)
                    written[tenant] = set(states)
            except Exception:
                with self._lock:
                    for tenant, states in batch.items():
                        if tenant not in written:
                            self._pending[tenant] = {**states, **self._pending.get(tenant, {})}
                    if self._journal is not None:
                        self._journal.keep(segments)  # what they hold is pending again
                raise
            finally:
                with self._lock:
                    self._inflight = {}
            ReinforcementJournal.release(segments)
        return written

    def close(self) -> Written:
        """Refuse new submissions and write what is pending; the journal goes once written."""
        with self._lock:
            self._closed = True
        written = self.flush()
        if self._journal is not None:
            self._journal.close()
            self._journal = None  # a later flush has nothing to rotate
        return written

    def recover(self, directory: Path) -> Written:
        """Write what the journals of processes that died left in ``directory`` (before the
        first recall of this one), and remove them."""
        found, files = ReinforcementJournal.recover(directory)
        written: Written = {}
        for tenant, updates in found.items():
            self._repo.write_fields(tenant, list(updates.items()))
            written[tenant] = set(updates)
        ReinforcementJournal.release(files)
        if found:
            log.info("replayed %d reinforcements a stopped process had journaled",
                     sum(len(u) for u in found.values()))
        return written
