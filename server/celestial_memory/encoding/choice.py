"""Which encoder runs: ONNX Runtime for a mean-pooled model on the CPU (the bundled one), torch
otherwise or when the ONNX file cannot be made, said in one start-up log line.

``CELESTIAL_EMBED_BACKEND``: ``auto`` (ONNX Runtime where it can run, else torch, with the reason
logged), ``onnx`` (ONNX Runtime or the server does not start) or ``torch``.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from celestial_memory.config import Settings
from celestial_memory.encoding.embedding import Embedder, SentenceTransformerEmbedder, resolve_model
from celestial_memory.encoding.onnx_encoder import OnnxEmbedder
from celestial_memory.encoding.onnx_file import (
    OnnxFile,
    OnnxFileError,
    cached_paths,
    discard,
    export,
    model_fingerprint,
    quantize,
    read_cached,
)

log = logging.getLogger("celestial_memory.encoder")

# ONNX Runtime's thread pool when ``embed_threads`` is 0. One thread: on 2 shared cores a
# second intra-op thread made one query's encode slower, not faster, whenever anything else ran
# (docs/encoder.md, "Threads").
ONNX_DEFAULT_THREADS = 1
MAX_DEFAULT_LANES = 8
MIN_COSINE = 0.99999  # the ONNX vectors against torch's, checked on every export
# The int8 copy against the fp32 file, on the probes: measured 0.97 at worst over LoCoMo's
# texts, so below this the quantization went wrong rather than lost precision.
MIN_COSINE_INT8 = 0.9
PROBES = ["When did Caroline go to the LGBTQ support group?", "ok", "",
          "요가 수업에 다녀왔어요.", "The boiler was serviced on 3 March. " * 40]


def onnx_cache_dir(settings: Settings) -> Path:
    return settings.embed_onnx_dir or settings.data_dir / "encoders"


def open_encoder(settings: Settings) -> Embedder:
    """The encoder ``settings`` ask for, after one log line saying which and why."""
    if settings.embed_backend == "torch":
        return _torch(settings, "CELESTIAL_EMBED_BACKEND=torch")
    torch_model: list[SentenceTransformerEmbedder] = []  # loaded at most once, if needed
    try:
        encoder, why = _onnx(settings, torch_model)
    except Exception as exc:
        if settings.embed_backend == "onnx":
            raise RuntimeError(f"CELESTIAL_EMBED_BACKEND=onnx, but {exc}") from exc
        reason = f"ONNX Runtime cannot run it: {exc}"
        if torch_model:
            _say_torch(torch_model[0], settings, reason, logging.WARNING)
            return torch_model[0]
        return _torch(settings, reason, logging.WARNING)
    log.info("embedding encoder: ONNX Runtime (%s) for %s, %d thread(s), %d lane(s); %s",
             encoder.precision, encoder.name, encoder.threads, encoder.lanes, why)
    return encoder


def default_lanes(threads: int) -> int:
    """The cores this process may run on (its CPU affinity, which a container's cpuset sets),
    over the threads of one encode, at most ``MAX_DEFAULT_LANES``: each lane holds a tokenizer
    and the buffers of one encode."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(MAX_DEFAULT_LANES, (cores or 1) // max(1, threads)))


def _torch(settings: Settings, reason: str, level: int = logging.INFO) -> Embedder:
    embedder = SentenceTransformerEmbedder(settings.model, settings.device, settings.embed_threads)
    _say_torch(embedder, settings, reason, level)
    return embedder


def _say_torch(embedder: SentenceTransformerEmbedder, settings: Settings, reason: str,
               level: int) -> None:
    import torch

    log.log(level, "embedding encoder: torch for %s on %s, %d thread(s); %s", embedder.name,
            settings.device, torch.get_num_threads(), reason)


def _onnx(settings: Settings, torch_model: list[SentenceTransformerEmbedder]
          ) -> tuple[OnnxEmbedder, str]:
    if settings.device != "cpu":
        raise OnnxFileError(f"the ONNX encoder runs on the CPU, and the device is {settings.device}")
    model_dir = Path(resolve_model(settings.model))
    if not model_dir.is_dir():
        raise OnnxFileError(f"{settings.model} is not a model directory on this machine")
    name = settings.model if not Path(settings.model).is_dir() else model_dir.name
    threads = settings.embed_threads or ONNX_DEFAULT_THREADS
    onnx_path, meta_path = cached_paths(onnx_cache_dir(settings), name, model_fingerprint(model_dir))
    cached = read_cached(onnx_path, meta_path)
    encoder: OnnxEmbedder | None = None
    if cached is not None:
        from transformers import AutoTokenizer

        try:
            encoder = _session(name, cached, AutoTokenizer.from_pretrained(str(model_dir)), threads)
            why = f"the ONNX file {cached.path} made from its weights, reused"
        except Exception as exc:  # whole on disk, yet unreadable: made by another onnx, say
            log.warning("ONNX encoder cache %s cannot be loaded (%s): rebuilding it",
                        onnx_path, exc)
            discard(onnx_path, meta_path)
    if encoder is None:
        torch_model.append(SentenceTransformerEmbedder(settings.model, "cpu",
                                                       settings.embed_threads))
        made = _export(torch_model[0], onnx_path, meta_path)
        encoder = _session(name, made, torch_model[0].tokenizer, threads)
        _check_against_torch(encoder, torch_model[0], onnx_path, meta_path)
        why = f"the ONNX file {made.path} exported now from its weights"
    if settings.embed_int8:
        encoder, why = _int8(encoder, onnx_path, meta_path, threads)
    encoder.lanes = settings.embed_lanes or default_lanes(threads)
    return encoder, why


def _int8(fp32: OnnxEmbedder, onnx_path: Path, meta_path: Path, threads: int
          ) -> tuple[OnnxEmbedder, str]:
    """The int8 copy of ``fp32``'s file, cached beside it and checked the same way."""
    path = onnx_path.with_name(onnx_path.stem + "-int8.onnx")
    meta = meta_path.with_name(meta_path.stem + "-int8.json")
    made = read_cached(path, meta)
    why = f"the int8 file {path} quantized from the fp32 file, reused"
    if made is None:
        source = OnnxFile(onnx_path, fp32.dimension, fp32.max_length, reused=True)
        made = quantize(source, path, meta)
        why = f"the int8 file {path} quantized now from the fp32 file"
    encoder = _session(fp32.name, made, fp32.tokenizer, threads, "int8")
    cosine = float((encoder.embed(PROBES) * fp32.embed(PROBES)).sum(axis=1).min())
    if cosine < MIN_COSINE_INT8:
        discard(path, meta)
        raise OnnxFileError(f"the int8 model's vectors are {cosine:.4f} from the fp32 model's "
                            f"(cosine), below {MIN_COSINE_INT8}")
    return encoder, why + f" (cosine to fp32 on the probes: {cosine:.4f} at worst)"


def _export(model: SentenceTransformerEmbedder, onnx_path: Path, meta_path: Path) -> OnnxFile:
    direct = model.direct
    if direct is None:
        raise OnnxFileError(f"{model.name} is not a transformer with mean pooling and "
                            "normalisation, the structure the ONNX file holds")
    with warnings.catch_warnings():  # the tracer's warnings, printed outside the log
        warnings.simplefilter("ignore")
        return export(model.st_model, direct.transformer, onnx_path, meta_path,
                      model.dimension, direct.max_length)


def _session(name: str, made: OnnxFile, tokenizer: Any, threads: int,
             precision: str = "fp32") -> OnnxEmbedder:
    encoder = OnnxEmbedder(name, made.path, tokenizer, made.dimension, made.max_length, threads,
                           precision)
    vectors = encoder.embed(PROBES)
    if vectors.shape != (len(PROBES), made.dimension) or not np.allclose(
            np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4):
        raise OnnxFileError(f"the ONNX file gives vectors of shape {vectors.shape}, not unit "
                            f"vectors of {made.dimension}")
    return encoder


def _check_against_torch(encoder: OnnxEmbedder, model: SentenceTransformerEmbedder,
                         onnx_path: Path, meta_path: Path) -> None:
    cosine = float((encoder.embed(PROBES) * model.embed(PROBES)).sum(axis=1).min())
    if cosine < MIN_COSINE:
        discard(onnx_path, meta_path)
        raise OnnxFileError(f"the exported model's vectors are {cosine:.6f} from torch's "
                            f"(cosine), below {MIN_COSINE}")
