"""The ONNX Runtime encoder: torch's vectors, its file cached and reused, a damaged file rebuilt,
torch when the file cannot be made, and the one start-up line that says which runs."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from celestial_memory.config import Settings
from celestial_memory.encoding import OnnxEmbedder, onnx_cache_dir, open_encoder
from celestial_memory.encoding.choice import default_lanes
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.encoding.onnx_file import file_sha256

TEXTS = [
    "When did Caroline go to the LGBTQ support group?",
    "ok",
    "",
    "요가 수업에 다녀왔어요. 다음 주 화요일에 또 가요.",
    "The boiler was serviced on 3 March; the engineer said the pump needs replacing soon. " * 20,
    "Café naïve résumé — déjà vu 🙂",
    *[f"note {i}: {'word ' * (i % 17)}" for i in range(150)],  # more than one batch of 64
]
ENCODER_LOG = "celestial_memory.encoder"


def encoder_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == ENCODER_LOG]


def onnx_files(settings: Settings) -> list[Path]:
    return sorted(onnx_cache_dir(settings).glob("*.onnx"))


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """A data directory whose encoder cache holds the bundled model's exported file."""
    settings = Settings(data_dir=tmp_path_factory.mktemp("data"))
    assert isinstance(open_encoder(settings), OnnxEmbedder)
    return settings


def test_the_onnx_vectors_are_torchs(exported: Settings,
                                     embedder: SentenceTransformerEmbedder) -> None:
    onnx = open_encoder(exported)
    assert isinstance(onnx, OnnxEmbedder) and onnx.dimension == embedder.dimension
    ours, theirs = onnx.embed(TEXTS), embedder.embed(TEXTS)
    assert ours.shape == theirs.shape and ours.dtype == np.float32
    assert (ours * theirs).sum(axis=1).min() >= 0.99999
    # A recall's query alone is the same as within a batch.
    assert float(onnx.embed([TEXTS[0]])[0] @ theirs[0]) >= 0.99999
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_the_cached_file_is_reused_on_restart(exported: Settings,
                                              caplog: pytest.LogCaptureFixture) -> None:
    [path] = onnx_files(exported)
    before = path.stat()
    with caplog.at_level(logging.INFO):
        assert isinstance(open_encoder(exported), OnnxEmbedder)
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    [line] = encoder_lines(caplog)
    assert "ONNX Runtime" in line.getMessage() and "reused" in line.getMessage()


@pytest.mark.parametrize("damage", ["flip", "truncate", "no-sidecar"])
def test_a_damaged_cache_file_is_rebuilt(exported: Settings, tmp_path: Path, damage: str,
                                         embedder: SentenceTransformerEmbedder,
                                         caplog: pytest.LogCaptureFixture) -> None:
    shutil.copytree(onnx_cache_dir(exported), tmp_path / "encoders")
    settings = Settings(data_dir=tmp_path)
    [path] = onnx_files(settings)
    if damage == "flip":
        with path.open("r+b") as f:
            f.seek(path.stat().st_size // 2)
            byte = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([byte[0] ^ 0xFF]))
    elif damage == "truncate":
        os.truncate(path, path.stat().st_size // 3)
    else:
        path.with_suffix(".json").unlink()
    with caplog.at_level(logging.INFO):
        onnx = open_encoder(settings)
    assert isinstance(onnx, OnnxEmbedder)
    assert any("damaged" in r.getMessage() and r.levelno == logging.WARNING
               for r in caplog.records)
    assert "exported now" in encoder_lines(caplog)[-1].getMessage()
    [rebuilt] = onnx_files(settings)
    meta = json.loads(rebuilt.with_suffix(".json").read_text())
    assert file_sha256(rebuilt) == meta["sha256"]
    assert (onnx.embed(TEXTS[:6]) * embedder.embed(TEXTS[:6])).sum(axis=1).min() >= 0.99999


def test_torch_runs_when_the_onnx_file_cannot_be_made(tmp_path: Path,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "a-file").write_text("")  # the cache directory cannot be made under a file
    settings = Settings(data_dir=tmp_path, embed_onnx_dir=tmp_path / "a-file" / "encoders")
    with caplog.at_level(logging.INFO):
        encoder = open_encoder(settings)
    assert isinstance(encoder, SentenceTransformerEmbedder)
    [line] = encoder_lines(caplog)  # one line, a warning, that says torch and why
    assert line.levelno == logging.WARNING
    assert "torch" in line.getMessage() and "ONNX Runtime cannot run it" in line.getMessage()


def test_onnx_asked_for_explicitly_fails_instead(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    settings = Settings(data_dir=tmp_path, embed_backend="onnx",
                        embed_onnx_dir=tmp_path / "a-file" / "encoders")
    with pytest.raises(RuntimeError, match="CELESTIAL_EMBED_BACKEND=onnx"):
        open_encoder(settings)


def test_torch_asked_for_runs_torch(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        encoder = open_encoder(Settings(data_dir=tmp_path, embed_backend="torch"))
    assert isinstance(encoder, SentenceTransformerEmbedder)
    assert not (tmp_path / "encoders").exists()
    [line] = encoder_lines(caplog)
    assert "torch" in line.getMessage() and "CELESTIAL_EMBED_BACKEND=torch" in line.getMessage()


def test_the_backend_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().embed_backend == "auto"
    monkeypatch.setenv("CELESTIAL_EMBED_BACKEND", "torch")
    assert Settings().embed_backend == "torch"


def test_start_up_in_json_log_mode_prints_only_json(exported: Settings) -> None:
    # In a child process: the log's handlers and the libraries' progress bars are process-wide.
    code = ("from celestial_memory.observability import json_logs; json_logs.configure('info', 'json');"
            "from celestial_memory.config import Settings;"
            "from celestial_memory.encoding import open_encoder;"
            f"open_encoder(Settings(data_dir={str(exported.data_dir)!r}));"
            "open_encoder(Settings(embed_backend='torch'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=300)
    lines = out.stderr.splitlines()
    assert lines and all(json.loads(line)["message"] for line in lines), out.stderr
    assert sum("embedding encoder" in json.loads(line)["message"] for line in lines) == 2


def test_context_counts_tokens_with_the_models_tokenizer_under_onnx(
    exported: Settings, embedder: SentenceTransformerEmbedder,
) -> None:
    from celestial_memory.encoding.batching import BatchingEmbedder
    from celestial_memory.memory.prompt_context import ModelTokens, token_counter

    batcher = BatchingEmbedder(open_encoder(exported))
    try:
        ours, theirs = token_counter(batcher), token_counter(embedder)
        assert isinstance(ours, ModelTokens) and ours.count(TEXTS) == theirs.count(TEXTS)
    finally:
        batcher.close()


def test_the_int8_copy_is_made_once_close_to_fp32_and_rebuilt_when_damaged(
        exported: Settings, tmp_path: Path, embedder: SentenceTransformerEmbedder,
        caplog: pytest.LogCaptureFixture) -> None:
    shutil.copytree(onnx_cache_dir(exported), tmp_path / "encoders")
    settings = Settings(data_dir=tmp_path, embed_int8=True)
    with caplog.at_level(logging.INFO):
        int8 = open_encoder(settings)
    assert isinstance(int8, OnnxEmbedder) and int8.precision == "int8"
    [line] = encoder_lines(caplog)
    assert "ONNX Runtime (int8)" in line.getMessage() and "quantized now" in line.getMessage()
    [path] = [p for p in onnx_files(settings) if p.stem.endswith("-int8")]
    assert path.stat().st_size < 0.8 * (path.parent / path.name.replace("-int8", "")).stat().st_size
    cosine = (int8.embed(TEXTS) * embedder.embed(TEXTS)).sum(axis=1)
    assert cosine.min() >= 0.95 and cosine.mean() >= 0.98  # close, not equal: hence off by default
    assert cosine.min() < 0.99999
    before = path.stat()
    caplog.clear()
    with caplog.at_level(logging.INFO):
        assert open_encoder(settings).precision == "int8"  # type: ignore[attr-defined]
    assert "reused" in encoder_lines(caplog)[-1].getMessage()
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    os.truncate(path, path.stat().st_size // 3)
    caplog.clear()
    with caplog.at_level(logging.INFO):
        rebuilt = open_encoder(settings)
    assert any("damaged" in r.getMessage() for r in caplog.records)
    assert "quantized now" in encoder_lines(caplog)[-1].getMessage()
    assert np.allclose(rebuilt.embed(TEXTS[:6]), int8.embed(TEXTS[:6]), atol=1e-5)


def test_lanes_give_the_same_vectors_and_run_chunks_on_threads_of_their_own(
        exported: Settings) -> None:
    one = open_encoder(exported.model_copy(update={"embed_lanes": 1}))
    three = open_encoder(exported.model_copy(update={"embed_lanes": 3}))
    assert isinstance(one, OnnxEmbedder) and isinstance(three, OnnxEmbedder)
    assert (one.lanes, three.lanes) == (1, 3)
    texts = TEXTS * 2  # five chunks of 64
    seen: set[str] = set()
    used: list[object] = []
    encode = three._encode

    def spy(tokenizer: object, chunk: list[str]) -> np.ndarray:
        seen.add(threading.current_thread().name)
        used.append(tokenizer)
        return encode(tokenizer, chunk)

    three._encode = spy  # type: ignore[method-assign]
    ours, theirs = three.embed(texts), one.embed(texts)
    assert np.allclose(ours, theirs, atol=1e-5)
    assert seen and all(name.startswith("encode-lane") for name in seen)
    # Lanes use copies of the tokenizer, at most one per lane (a fast tokenizer refuses a
    # second thread); the caller's own is not among them.
    assert all(t is not three.tokenizer for t in used)
    assert 1 <= len({id(t) for t in used}) <= 3
    assert len(seen) >= 2  # five chunks over three lanes: more than one lane took a chunk
    # One short encode stays on the caller's thread.
    seen.clear()
    assert np.allclose(three.embed([TEXTS[0]]), one.embed([TEXTS[0]]), atol=1e-5)
    assert seen == {threading.current_thread().name}


def test_the_default_lanes_are_the_cores_over_the_threads(exported: Settings) -> None:
    encoder = open_encoder(exported.model_copy(update={"embed_lanes": 0, "embed_threads": 1}))
    assert isinstance(encoder, OnnxEmbedder)
    assert encoder.lanes == max(1, min(8, len(os.sched_getaffinity(0))))
    assert default_lanes(3) == max(1, min(8, len(os.sched_getaffinity(0)) // 3))
