"""Per-key request rates: a token bucket per key (``rate`` calls a second on average, bursts of
up to ``burst``). A call over the rate is refused with RESOURCE_EXHAUSTED and RetryInfo saying
when a token will be there."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from celestial_memory.errors import ResourceExhausted

MAX_BUCKETS = 10_000


class RateLimiter:
    def __init__(
        self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._rate, self._burst, self._clock = rate, max(1.0, burst), clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key id -> (tokens, at)
        self._lock = threading.Lock()

    def take(self, key_id: str) -> None:
        with self._lock:
            now = self._clock()
            if len(self._buckets) >= MAX_BUCKETS:
                self._forget_full(now)
            tokens, at = self._buckets.get(key_id, (self._burst, now))
            tokens = min(self._burst, tokens + (now - at) * self._rate)
            if tokens < 1.0:
                self._buckets[key_id] = (tokens, now)
                raise ResourceExhausted(
                    f"this key is over its rate of {self._rate:g} calls/s",
                    retry_after_s=(1.0 - tokens) / self._rate)
            self._buckets[key_id] = (tokens - 1.0, now)

    def _forget_full(self, now: float) -> None:
        """Drop the buckets that have refilled: they hold nothing a new bucket would not.
        Failed attempts get a bucket per address, so without this the table would grow with
        every address that ever knocked."""
        refill = self._burst / self._rate
        self._buckets = {k: v for k, v in self._buckets.items() if now - v[1] < refill}
