"""The ONNX file of a mean-pooled sentence-transformers model, made from its local weights.

The file holds the whole encode after the tokenizer: the transformer, mean pooling over the
attention mask and unit length, so ONNX Runtime returns the final vectors. It is exported by
``torch.onnx.export`` from the weights already on disk (nothing is downloaded) and cached under a
name that fingerprints the weights, the torch version and this exporter, so another model or
torch gets its own file. A sidecar records the file's SHA-256: a file that does not match it (a
crash mid-write, a disk fault, an edit) is rebuilt, never loaded.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# Part of the cache key: a change to what is exported (inputs, pooling, opset) bumps it.
FORMAT = 1
OPSET = 17
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
CHUNK = 1 << 20


class OnnxFileError(RuntimeError):
    """The ONNX file cannot be made or read; the caller may fall back to torch."""


@dataclass(frozen=True)
class OnnxFile:
    path: Path
    dimension: int
    max_length: int
    reused: bool  # found in the cache (True) or exported now (False)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def model_fingerprint(model_dir: Path) -> str:
    """The model directory's files (names and contents), the torch version and the format."""
    import torch

    digest = hashlib.sha256(f"format={FORMAT};opset={OPSET};torch={torch.__version__}".encode())
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(model_dir)).encode())
        digest.update(file_sha256(path).encode())
    return digest.hexdigest()[:16]


def cached_paths(cache_dir: Path, name: str, fingerprint: str) -> tuple[Path, Path]:
    stem = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)
    base = cache_dir / f"{stem}-{fingerprint}"
    return base.with_suffix(".onnx"), base.with_suffix(".json")


def read_cached(onnx_path: Path, meta_path: Path) -> OnnxFile | None:
    """The cached file when it is whole; None when absent; a damaged one is removed."""
    if not onnx_path.exists() and not meta_path.exists():
        return None
    try:
        meta = json.loads(meta_path.read_text())
        if file_sha256(onnx_path) != meta["sha256"]:
            raise ValueError("its SHA-256 does not match the one recorded when it was made")
        return OnnxFile(onnx_path, int(meta["dimension"]), int(meta["max_length"]), reused=True)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("ONNX encoder cache %s is damaged (%s): rebuilding it", onnx_path, exc)
        discard(onnx_path, meta_path)
        return None


def discard(*paths: Path) -> None:
    for path in paths:
        path.unlink(missing_ok=True)


def export(st_model: Any, transformer: Any, onnx_path: Path, meta_path: Path, dimension: int,
           max_length: int) -> OnnxFile:
    """Exports ``transformer`` with mean pooling and normalisation."""
    import torch

    class Pooled(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            tokens = self.inner(input_ids=input_ids, attention_mask=attention_mask,
                                token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            pooled = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2, dim=1)

    features = st_model.tokenizer(["an example sentence", "two"], padding=True,
                                  return_tensors="pt")
    if any(k not in features for k in INPUTS):
        raise OnnxFileError(f"the tokenizer gives {sorted(features)}, not {list(INPUTS)}")

    def write(tmp: Path) -> None:
        axes = {name: {0: "batch", 1: "tokens"} for name in INPUTS}
        with torch.inference_mode(False), torch.no_grad():
            torch.onnx.export(
                Pooled(transformer).eval(), tuple(features[k] for k in INPUTS), str(tmp),
                input_names=list(INPUTS), output_names=["embedding"],
                dynamic_axes={**axes, "embedding": {0: "batch"}}, opset_version=OPSET,
                dynamo=False)

    return _made(write, "torch.onnx.export", onnx_path, meta_path, dimension, max_length)


def quantize(fp32: OnnxFile, onnx_path: Path, meta_path: Path) -> OnnxFile:
    """An int8 copy of ``fp32``: ONNX Runtime's dynamic quantization of the MatMul weights, one
    scale per output channel (docs/encoder.md, "int8", has what else was tried and why this)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    def write(tmp: Path) -> None:
        # The quantizer reports each tensor it skips on the root logger: start-up noise.
        before = logging.root.manager.disable
        logging.disable(logging.WARNING)
        try:
            quantize_dynamic(str(fp32.path), str(tmp), weight_type=QuantType.QInt8,
                             per_channel=True, op_types_to_quantize=["MatMul"])
        finally:
            logging.disable(before)

    return _made(write, "int8 quantization", onnx_path, meta_path, fp32.dimension,
                 fp32.max_length)


def _made(write: Any, what: str, onnx_path: Path, meta_path: Path, dimension: int,
          max_length: int) -> OnnxFile:
    """The file ``write`` makes, written to a temporary name and renamed with its sidecar, so a
    process that starts beside this one never reads half a file."""
    onnx_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=onnx_path.parent, suffix=".onnx.tmp")
    os.close(fd)
    tmp = Path(tmp_name)
    tmp.chmod(0o644)  # mkstemp's 0600 would hide it from another user serving the same data
    try:
        write(tmp)
        meta = {"sha256": file_sha256(tmp), "dimension": dimension, "max_length": max_length}
        os.replace(tmp, onnx_path)
        tmp_meta = meta_path.with_suffix(".json.tmp")
        tmp_meta.write_text(json.dumps(meta))
        os.replace(tmp_meta, meta_path)
    except Exception as exc:
        discard(tmp)
        raise OnnxFileError(f"{what} failed: {exc}") from exc
    return OnnxFile(onnx_path, dimension, max_length, reused=False)
