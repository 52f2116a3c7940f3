"""A progress bar on stderr for long commands (export, import, eval); no dependencies."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, label: str, total: int | None, out: TextIO = sys.stderr) -> None:
        self.label, self.total, self.out = label, total, out
        self.done = 0
        self._started = time.perf_counter()
        self._shown = 0.0

    def update(self, n: int = 1) -> None:
        self.done += n
        now = time.perf_counter()
        if now - self._shown >= 0.2:
            self._shown = now
            self._draw(now)

    def close(self) -> float:
        """Draw the final state; returns the rate (items per second)."""
        now = time.perf_counter()
        self._draw(now)
        self.out.write("\n")
        return self.done / max(now - self._started, 1e-9)

    def _draw(self, now: float) -> None:
        rate = self.done / max(now - self._started, 1e-9)
        if self.total:
            filled = int(30 * min(self.done, self.total) / self.total)
            bar = f"[{'#' * filled}{'.' * (30 - filled)}] {self.done:,}/{self.total:,}"
        else:
            bar = f"{self.done:,}"
        self.out.write(f"\r{self.label} {bar}  {rate:,.0f}/s")
        self.out.flush()
