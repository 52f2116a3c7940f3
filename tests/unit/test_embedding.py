"""The bundled model's direct encode gives the vectors sentence-transformers' ``encode`` gives."""

from __future__ import annotations

import numpy as np
from celestial_memory.encoding.embedding import MeanPooledEncoder, SentenceTransformerEmbedder

TEXTS = [
    "When did Caroline go to the LGBTQ support group?",
    "ok",
    "",
    "요가 수업에 다녀왔어요. 다음 주 화요일에 또 가요.",
    "The boiler was serviced on 3 March; the engineer said the pump needs replacing soon. " * 20,
    "Café naïve résumé — déjà vu 🙂",
    *[f"note {i}: {'word ' * (i % 17)}" for i in range(150)],  # more than one batch of 64
]


def test_the_direct_path_is_taken_for_the_bundled_model_and_matches_encode(
    embedder: SentenceTransformerEmbedder,
) -> None:
    assert isinstance(embedder._direct, MeanPooledEncoder)
    reference = embedder._model.encode(TEXTS, batch_size=64, normalize_embeddings=True,
                                       convert_to_numpy=True, show_progress_bar=False)
    direct = embedder.embed(TEXTS)
    assert direct.shape == reference.shape and direct.dtype == np.float32
    assert np.abs(direct - reference).max() < 1e-5
    # One text alone, as a recall's query, is the same as within a batch.
    assert np.abs(embedder.embed([TEXTS[0]])[0] - reference[0]).max() < 1e-5
    assert np.allclose(np.linalg.norm(direct, axis=1), 1.0, atol=1e-5)


def test_another_structure_falls_back_to_encode(embedder: SentenceTransformerEmbedder) -> None:
    model = embedder._model
    assert MeanPooledEncoder.of(list(model)[:2], embedder.dimension) is None  # no Normalize
