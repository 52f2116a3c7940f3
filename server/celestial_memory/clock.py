"""Injectable clocks: the service never reads the wall clock directly.

Tests and replays of historical data drive a ManualClock; production uses SystemClock.
Times are POSIX seconds (float), the unit the memory function works in.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.time()


class ManualClock:
    """A clock that moves only when told to (thread-safe)."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def set(self, t: float) -> None:
        with self._lock:
            self._now = t

    def advance(self, seconds: float) -> float:
        with self._lock:
            self._now += seconds
            return self._now
