"""A circuit breaker in front of the remote store.

While Qdrant is down every call would wait out its retries or its timeout (seconds each) before
failing, and pile up behind the others. After ``failures`` calls in a row end in
``StoreUnavailable`` the breaker opens: calls fail at once, saying when to try again, for
``cooldown_s``. Then it is half-open: one call (or the health probe) goes through; success closes
the breaker, failure opens it for another cooldown. The gRPC health service reports NOT_SERVING
while it is open, and the server's health loop probes the store, so it closes again by itself when
Qdrant is back even with no traffic.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from celestial_memory.errors import StoreUnavailable
from celestial_memory.store.proxy import MethodProxy

log = logging.getLogger(__name__)
T = TypeVar("T")


class CircuitBreaker:
    def __init__(
        self, failures: int = 1, cooldown_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._threshold, self._cooldown, self._clock = max(1, failures), cooldown_s, clock
        self._lock = threading.Lock()
        self._failed = 0  # calls in a row that found the store down
        self._opened_at: float | None = None
        self._probing = False  # half-open: one call is finding out

    @property
    def is_open(self) -> bool:
        with self._lock:
            return self._opened_at is not None

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        self._admit()
        try:
            result = fn(*args, **kwargs)
        except StoreUnavailable:
            self._record(ok=False)
            raise
        except BaseException:
            self._release()
            raise
        self._record(ok=True)
        return result

    def _admit(self) -> None:
        with self._lock:
            if self._opened_at is None:
                return
            left = self._opened_at + self._cooldown - self._clock()
            if left > 0 or self._probing:
                raise StoreUnavailable(
                    "Qdrant is unavailable (circuit open after repeated failures)",
                    retry_after_s=max(left, 0.1))
            self._probing = True

    def _release(self) -> None:
        with self._lock:
            self._probing = False

    def _record(self, ok: bool) -> None:
        with self._lock:
            self._probing = False
            if ok:
                if self._opened_at is not None:
                    log.warning("Qdrant answers again: circuit closed")
                self._failed, self._opened_at = 0, None
                return
            self._failed += 1
            if self._failed >= self._threshold:
                if self._opened_at is None:
                    log.warning("Qdrant unavailable: circuit open, calls fail fast for %.1f s",
                                self._cooldown)
                self._opened_at = self._clock()


class Guarded(MethodProxy):
    """Wraps a client so that every method call goes through the breaker."""

    def __init__(self, client: Any, breaker: CircuitBreaker) -> None:
        super().__init__(client)
        self._breaker = breaker

    def _call(self, name: str, target: Callable[..., Any], args: tuple[Any, ...],
              kwargs: dict[str, Any]) -> Any:
        return self._breaker.call(target, *args, **kwargs)
