"""Peak memory of the test process while a block runs (an in-process server's included)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def peak_rss_growth() -> Iterator[list[int]]:
    """Samples this process's resident memory every 10 ms; yields a list that holds the peak
    growth over the start, in bytes, once the block ends."""
    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    start, peak, done = rss(), [0], threading.Event()

    def sample() -> None:
        while not done.wait(0.01):
            peak[0] = max(peak[0], rss() - start)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    out: list[int] = []
    try:
        yield out
    finally:
        done.set()
        t.join()
        out.append(max(peak[0], rss() - start))
