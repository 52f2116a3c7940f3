"""The bundled model run by ONNX Runtime: the model's own tokenizer, then one session call that
returns unit-length mean-pooled vectors (the ONNX file holds the pooling).

ONNX Runtime releases the GIL while it computes, so the gRPC loop and the engine keep running
during an encode, and its kernels take about a third of torch's time for one short query here
(docs/encoder.md has the figures).

Lanes: a large encode (a StoreBatch's texts) is cut into chunks of ``BATCH`` that run ``lanes``
at a time, each on a thread of its own with a copy of the tokenizer no other thread uses at
the same time (a fast tokenizer refuses a second thread), over the one session, whose ``run``
is thread-safe. One session thread per lane keeps one query's encode as it was and uses every
core for a batch.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from queue import SimpleQueue
from typing import Any

import numpy as np
import numpy.typing as npt
from celestial_memory.encoding.onnx_file import INPUTS
from celestial_memory.observability import metrics

BATCH = 64  # texts per session call, as the torch encoder's forward pass


def session_options(threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Idle pool threads would otherwise spin waiting for work, on cores that gRPC and the
    # engine need.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3  # warnings about unused initializers are noise here
    return options


class OnnxEmbedder:
    backend = "onnx"

    def __init__(self, name: str, onnx_path: Path, tokenizer: Any, dimension: int,
                 max_length: int, threads: int, precision: str = "fp32", lanes: int = 1) -> None:
        import onnxruntime as ort

        self.name, self.dimension, self.threads = name, dimension, threads
        self.lanes = max(1, lanes)
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        # The lanes' tokenizers, one per lane, copied once on the thread that first needs them
        # (no two threads read the original while it is copied); a chunk takes one, gives it back.
        self._tokenizers: SimpleQueue[Any] = SimpleQueue()
        self.precision, self.max_length = precision, max_length
        self.tokenizer = tokenizer  # Context counts a prompt's tokens with it
        self._session = ort.InferenceSession(str(onnx_path), session_options(threads),
                                             providers=["CPUExecutionProvider"])
        names = [i.name for i in self._session.get_inputs()]
        if sorted(names) != sorted(INPUTS):
            raise ValueError(f"the ONNX file takes {names}, not {list(INPUTS)}")

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        started = time.perf_counter()
        texts = list(texts)
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        # Similar lengths batched together pad less (as the torch encoder does).
        order = np.argsort([-len(t) for t in texts], kind="stable")
        chunks = [order[start:start + BATCH] for start in range(0, len(texts), BATCH)]
        if self.lanes > 1 and len(chunks) > 1:
            encoded = self._lanes().map(self._on_lane, [[texts[i] for i in c] for c in chunks])
        else:
            encoded = (self._encode(self.tokenizer, [texts[i] for i in c]) for c in chunks)
        for rows, vectors in zip(chunks, encoded, strict=True):
            out[rows] = vectors
        metrics.EMBED_SECONDS.observe(time.perf_counter() - started)
        metrics.EMBED_BATCH.observe(len(texts))
        return out

    def _encode(self, tokenizer: Any, texts: list[str]) -> npt.NDArray[np.float32]:
        features = tokenizer(texts, padding=True, truncation="longest_first",
                             max_length=self.max_length, return_tensors="np")
        inputs = {k: np.asarray(features[k], dtype=np.int64) for k in INPUTS}
        return np.asarray(self._session.run(None, inputs)[0], dtype=np.float32)

    def _on_lane(self, texts: list[str]) -> npt.NDArray[np.float32]:
        tokenizer = self._tokenizers.get()  # as many as lanes: one is free for each chunk
        try:
            return self._encode(tokenizer, texts)
        finally:
            self._tokenizers.put(tokenizer)

    def _lanes(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                for _ in range(self.lanes):
                    self._tokenizers.put(copy.deepcopy(self.tokenizer))
                self._pool = ThreadPoolExecutor(self.lanes, thread_name_prefix="encode-lane")
            return self._pool
