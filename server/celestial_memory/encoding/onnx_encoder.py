"""The bundled model run by ONNX Runtime: the model's own tokenizer, then one session call that
returns unit-length mean-pooled vectors (the ONNX file holds the pooling).

ONNX Runtime releases the GIL while it computes, so the gRPC loop and the engine keep running
during an encode, and its kernels take about a third of torch's time for one short query here
(docs/encoder.md has the figures).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
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
                 max_length: int, threads: int, precision: str = "fp32") -> None:
        import onnxruntime as ort

        self.name, self.dimension, self.threads = name, dimension, threads
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
        for start in range(0, len(texts), BATCH):
            rows = order[start:start + BATCH]
            features = self._tokenizer_call([texts[i] for i in rows])
            out[rows] = self._session.run(None, features)[0]
        metrics.EMBED_SECONDS.observe(time.perf_counter() - started)
        metrics.EMBED_BATCH.observe(len(texts))
        return out

    def _tokenizer_call(self, texts: list[str]) -> dict[str, npt.NDArray[np.int64]]:
        features = self.tokenizer(texts, padding=True, truncation="longest_first",
                                  max_length=self.max_length, return_tensors="np")
        return {k: np.asarray(features[k], dtype=np.int64) for k in INPUTS}
