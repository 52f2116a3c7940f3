"""Micro-batching: concurrent calls' texts embedded together.

One encode of many sentences costs far less than as many encodes of one (on 2 cores, about 160
sentences/s batched against 50/s one by one), so under concurrent load the texts of calls that
arrive together are encoded in one batch. One encoder thread owns the model: a call queues its
texts and waits for its rows. The thread takes whatever has queued by the time it is free (the
natural batch that piles up during the previous encode), waiting at most ``window_s`` for more
when it would otherwise encode less than ``max_batch`` and another call is already waiting. A
lone call is encoded at once, on its own thread when the model is free: a recall's query waits
for nothing, not even the hand-off to the encoder thread and back, which on busy cores took
longer than the encode itself (docs/design.md, "The encoder"). Whoever encodes holds the model's
lock, so the model (and its tokenizer, which refuses a second thread) has one user at a time.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future

import numpy as np
import numpy.typing as npt
from celestial_memory.encoding.embedding import Embedder

Rows = npt.NDArray[np.float32]


class BatchingEmbedder:
    def __init__(self, inner: Embedder, window_s: float = 0.001, max_batch: int = 64) -> None:
        self.name, self.dimension = inner.name, inner.dimension
        # Chunks one encode runs at once (encoding/onnx_encoder.py); a caller with many texts
        # hands over this many chunks in one call so that they can.
        self.lanes: int = getattr(inner, "lanes", 1)
        self._inner, self._window, self._max = inner, window_s, max_batch
        self.inner = inner  # what it batches for (its tokenizer, for one)
        self._queue: queue.Queue[tuple[list[str], Future[Rows]] | None] = queue.Queue()
        self.batches: deque[int] = deque(maxlen=1000)  # texts per encode, the most recent
        self._calls = 0  # calls inside embed(), queued or being encoded
        self._calls_lock = threading.Lock()
        self._model_lock = threading.Lock()  # held by whichever thread encodes
        self._thread = threading.Thread(target=self._run, name="embedder", daemon=True)
        self._thread.start()

    def embed(self, texts: Sequence[str]) -> Rows:
        if not texts:
            return np.zeros((0, self.dimension), np.float32)
        done: Future[Rows] = Future()
        with self._calls_lock:
            self._calls += 1
            alone = self._calls == 1
        try:
            if alone and self._model_lock.acquire(blocking=False):
                try:
                    rows = self._inner.embed(list(texts))
                finally:
                    self._model_lock.release()
                self.batches.append(len(texts))
                return rows
            self._queue.put((list(texts), done))
            return done.result()
        finally:
            with self._calls_lock:
                self._calls -= 1

    def _take(self, first: tuple[list[str], Future[Rows]]) -> list[tuple[list[str], Future[Rows]]]:
        """``first`` and what queued behind it, up to ``max_batch`` texts."""
        taken, size = [first], len(first[0])
        deadline = time.monotonic() + self._window
        while size < self._max:
            with self._calls_lock:
                alone = self._calls <= len(taken)
            if alone and self._queue.empty():  # no other call to wait for
                break
            try:
                item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if item is None:  # closing: encode what was taken, then stop
                self._queue.put(None)
                break
            taken.append(item)
            size += len(item[0])
        return taken

    def _run(self) -> None:
        while (first := self._queue.get()) is not None:
            # The batch is gathered once the model is free, so the calls that queued while a
            # caller encoded on its own thread go together.
            with self._model_lock:
                taken = self._take(first)
                texts = [t for ts, _ in taken for t in ts]
                try:
                    rows = self._inner.embed(texts)
                except BaseException as exc:
                    for _, done in taken:
                        done.set_exception(exc)
                    continue
            self.batches.append(len(texts))
            start = 0
            for ts, done in taken:
                done.set_result(rows[start:start + len(ts)])
                start += len(ts)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()
