"""Micro-batching of embeddings: concurrent calls share encodes, and each gets its own rows."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest
from celestial_memory.config import Settings
from celestial_memory.encoding.batching import BatchingEmbedder


class SlowModel:
    """A stand-in model: each text's vector is derived from the text; an encode takes 20 ms."""

    name, dimension = "slow", 4

    def __init__(self) -> None:
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls.append(len(texts))
        time.sleep(0.02)
        if "boom" in texts:
            raise RuntimeError("the model failed")
        return np.array([[zlib.crc32(t.encode()) % 97, len(t), 1, 2] for t in texts], np.float32)


def expected(texts: Sequence[str]) -> npt.NDArray[np.float32]:
    return SlowModel().embed(texts) if "boom" not in texts else np.zeros(0, np.float32)


def test_concurrent_calls_share_encodes_and_get_their_own_rows() -> None:
    model = SlowModel()
    batcher = BatchingEmbedder(model, window_s=0.005, max_batch=64)
    results: dict[int, npt.NDArray[np.float32]] = {}

    def call(i: int) -> None:
        results[i] = batcher.embed([f"text {i}", f"more {i} " * i])

    threads = [threading.Thread(target=call, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(16):
        np.testing.assert_array_equal(results[i], expected([f"text {i}", f"more {i} " * i]))
    assert sum(model.calls) == 32
    assert len(model.calls) < 16  # calls that arrived together were encoded together
    assert max(model.calls) <= 64
    batcher.close()


def test_a_batch_never_exceeds_its_maximum() -> None:
    model = SlowModel()
    batcher = BatchingEmbedder(model, window_s=0.05, max_batch=3)
    threads = [threading.Thread(target=batcher.embed, args=([f"t{i}"],)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(model.calls) == 10 and max(model.calls) <= 3
    batcher.close()


def test_a_failed_encode_fails_its_callers_and_the_next_calls_work() -> None:
    batcher = BatchingEmbedder(SlowModel(), window_s=0.0)
    with pytest.raises(RuntimeError, match="the model failed"):
        batcher.embed(["boom"])
    np.testing.assert_array_equal(batcher.embed(["fine"]), expected(["fine"]))
    assert batcher.embed([]).shape == (0, 4)
    batcher.close()


def test_a_lone_call_does_not_wait_for_the_window() -> None:
    model = SlowModel()
    batcher = BatchingEmbedder(model, window_s=5.0)  # a window no call could miss
    t = time.monotonic()
    batcher.embed(["alone"])
    assert time.monotonic() - t < 2.5 and model.calls == [1]
    batcher.close()


def test_a_lone_call_is_encoded_on_its_own_thread_and_concurrent_ones_by_the_encoder() -> None:
    seen: list[str] = []
    release = threading.Event()

    class Recording(SlowModel):
        def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
            seen.append(threading.current_thread().name)
            if texts == ["first"]:
                release.wait(30)  # busy until every other call is inside embed()
            return super().embed(texts)

    model = Recording()
    batcher = BatchingEmbedder(model, window_s=0.005)
    batcher.embed(["alone"])
    assert seen == [threading.current_thread().name]  # no hand-off to the encoder thread
    first = threading.Thread(target=batcher.embed, args=(["first"],), name="first caller")
    first.start()
    while len(seen) < 2:
        time.sleep(0.001)
    others = [threading.Thread(target=batcher.embed, args=([f"t{i}"],)) for i in range(7)]
    for t in others:
        t.start()
    # The seven others found the model busy and queued (the encoder thread may hold one).
    while batcher._calls < 8 or batcher._queue.qsize() < 6:
        time.sleep(0.001)
    release.set()
    for t in [first, *others]:
        t.join()
    assert seen[1] == "first caller" and set(seen[2:]) == {"embedder"}
    assert model.calls == [1, 1, 7]  # the seven, queued while the model was busy, went together
    batcher.close()


def test_the_model_thread_pool_is_a_setting_with_every_core_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Settings().embed_threads == 0  # torch's default: every core
    monkeypatch.setenv("CELESTIAL_EMBED_THREADS", "3")
    assert Settings().embed_threads == 3


def test_the_embedder_sets_torch_threads() -> None:
    # In a child process: the thread pool is process-wide and the suite's own model shares it.
    code = ("from celestial_memory.encoding.embedding import SentenceTransformerEmbedder as E; import torch;"
            "E(threads=1); print(torch.get_num_threads())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=120)
    assert out.stdout.strip().splitlines()[-1] == "1"
