"""Each tenant's model budget: the calls and tokens it spent in the last minute, against
``understand_calls_per_minute`` and ``understand_tokens_per_minute``. One budget per tenant for
every model-backed feature (the extraction queue, reflection), so no feature spends another's
share twice; the queue and a reflection spend it from different threads, hence the lock."""

from __future__ import annotations

import math
import threading
from collections import defaultdict, deque
from dataclasses import dataclass, field

WINDOW_S = 60.0  # the budget's window


@dataclass(slots=True)
class Budget:
    """One tenant's calls and tokens in the last minute."""

    spent: deque[tuple[float, int]] = field(default_factory=deque)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _forget(self, now: float) -> None:
        while self.spent and self.spent[0][0] <= now - WINDOW_S:
            self.spent.popleft()

    def allows(self, now: float, calls: float, tokens: int) -> bool:
        with self.lock:
            self._forget(now)
            return len(self.spent) < calls and sum(t for _, t in self.spent) < tokens

    def used(self, now: float) -> int:
        with self.lock:
            self._forget(now)
            return len(self.spent)

    def calls_left(self, now: float, calls: float) -> int:
        return max(0, math.ceil(calls) - self.used(now))

    def spend(self, now: float, tokens: int) -> None:
        with self.lock:
            self.spent.append((now, tokens))

    def free_in(self, now: float) -> float:
        """Seconds until the oldest spending leaves the window (0 when nothing is spent)."""
        with self.lock:
            self._forget(now)
            return max(0.0, self.spent[0][0] + WINDOW_S - now) if self.spent else 0.0


class ModelBudgets:
    """The budgets of every tenant, made on first use."""

    def __init__(self) -> None:
        self._of: defaultdict[str, Budget] = defaultdict(Budget)
        self._lock = threading.Lock()

    def __getitem__(self, tenant: str) -> Budget:
        with self._lock:
            return self._of[tenant]
