"""The automatic reflection's trigger: each tenant's new memories since its last automatic
reflection, kept in the store (store/operations_store.py) as they are counted, so a restart,
even a kill -9, finds them where they were. A tenant with ``reflect_after`` or more is due;
the server's loop starts an automatic reflection for it (reflection/operations.py), and the
count it answered is taken off only when that reflection ends, so one a restart interrupted is
due again at once."""

from __future__ import annotations

import threading

from celestial_memory.config import Settings
from celestial_memory.store.operations_store import OperationsStore


class ReflectionTrigger:
    def __init__(self, settings: Settings, records: OperationsStore, enabled: bool) -> None:
        self._s, self._records = settings, records
        self._on = enabled and settings.reflect_after > 0
        self._counts: dict[str, int] | None = None  # read from the store on first use
        self._lock = threading.Lock()

    def _loaded(self) -> dict[str, int]:
        if self._counts is None:
            self._counts = self._records.trigger_counts()
        return self._counts

    def noted(self, tenant: str, created: int) -> None:
        """``created`` new memories of ``tenant`` were stored. Written through (under the lock,
        so the last write is the highest count): one small write per Store that created."""
        if not (self._on and created):
            return
        with self._lock:
            counts = self._loaded()
            counts[tenant] = counts.get(tenant, 0) + created
            self._records.write_trigger_count(tenant, counts[tenant])

    def due(self) -> dict[str, int]:
        """The tenants with ``reflect_after`` new memories or more, and their counts."""
        if not self._on:
            return {}
        with self._lock:
            return {t: n for t, n in sorted(self._loaded().items())
                    if n >= self._s.reflect_after}

    def settle(self, tenant: str, answered: int) -> None:
        """An automatic reflection that answered ``answered`` new memories ended."""
        if not (self._on and answered):
            return
        with self._lock:
            counts = self._loaded()
            left = max(0, counts.get(tenant, 0) - answered)
            if left:
                counts[tenant] = left
            else:
                counts.pop(tenant, None)
            self._records.write_trigger_count(tenant, left)
