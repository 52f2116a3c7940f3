"""When a call's work must stop: its deadline passed, its caller cancelled it, or the server is
stopping and its grace period ran out.

Service calls run in worker threads, which asyncio cannot interrupt: when a call is cancelled
its coroutine stops waiting but the thread goes on. So the work checks a ``Cancellation`` at the
points where stopping is safe (before each chunk of embedding, before any write, before a recall
reinforces), and never starts a write after the deadline or the cancellation. ``InFlight`` keeps
the cancellations of running work, so a stopping server can cancel what is left and wait for the
threads before it closes the store under them.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from celestial_memory.errors import Cancelled, DeadlineExceeded


class Cancellation:
    """``deadline``: ``time.monotonic()`` seconds, None for none."""

    def __init__(self, deadline: float | None = None) -> None:
        self.deadline = deadline
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        self._cancelled.set()

    def check(self, what: str = "the call") -> None:
        """Raise if the work should stop here."""
        if self._cancelled.is_set():
            raise Cancelled(f"cancelled; {what} stopped before writing anything more")
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise DeadlineExceeded(f"deadline passed; {what} stopped before writing anything more")


NEVER = Cancellation()  # for work no caller waits on (tests, the CLI, the periodic rebalance)


class InFlight:
    """The cancellations of the work running in worker threads."""

    def __init__(self) -> None:
        self._running: dict[int, Cancellation] = {}
        self._idle = threading.Condition()

    @contextlib.contextmanager
    def track(self, cancel: Cancellation) -> Iterator[None]:
        with self._idle:
            self._running[id(cancel)] = cancel
        try:
            yield
        finally:
            with self._idle:
                del self._running[id(cancel)]
                self._idle.notify_all()

    def __len__(self) -> int:
        with self._idle:
            return len(self._running)

    def cancel_all(self) -> None:
        with self._idle:
            for c in self._running.values():
                c.cancel()

    def wait_idle(self, timeout: float) -> bool:
        """Whether every tracked piece of work finished within ``timeout`` seconds."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._running, timeout)
