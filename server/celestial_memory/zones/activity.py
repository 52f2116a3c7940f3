"""The calls the server is answering, so that background work runs in the gaps between them.

The interpreter runs one thread at a time and the embedded engine holds it for the whole of each
of its calls, so a reinforcement flush or a capacity check that starts while a recall is being
answered delays that recall by as long as it runs. Background work therefore waits for a moment
with no call in progress before each short piece of it, but never longer than its bound: under
a steady load there are no gaps, and the work must still get done (docs/design.md, "Background
work").
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator


class Activity:
    def __init__(self) -> None:
        self._calls = 0
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """Around one call being answered."""
        with self._changed:
            self._calls += 1
        try:
            yield
        finally:
            with self._changed:
                self._calls -= 1
                if not self._calls:
                    self._changed.notify_all()

    @property
    def calls(self) -> int:
        return self._calls

    def nudge(self) -> None:
        """Wake the waiters to look again at what they wait for (``gap``'s ``unless``)."""
        with self._changed:
            self._changed.notify_all()

    def gap(self, until: float, unless: Callable[[], bool] = lambda: False) -> bool:
        """Wait until no call is being answered, or until ``until`` (time.monotonic), or until
        ``unless()`` holds; whether it is quiet. A caller that sets what ``unless`` reads calls
        ``nudge`` after."""
        with self._changed:
            return self._changed.wait_for(
                lambda: not self._calls or unless(), max(0.0, until - time.monotonic())
            ) and not self._calls
