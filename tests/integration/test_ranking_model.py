"""The learned ranker's model folder (CELESTIAL_RANKER_MODEL): the learned order is the default
and the start-up line says so; a user's own folder is checked as the shipped one; and every
damaged folder (a truncated model whose card's hash was updated to match, a card that is a list
or has a field out of range, missing, empty or non-UTF-8 files, a model over other features)
gives one warning line and the weighted order, and the process goes on."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from celestial_client import CelestialClient
from celestial_memory.app import build_service
from celestial_memory.config import Settings
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.ranking import learned
from celestial_memory.ranking.card import MAX_CANDIDATES
from celestial_memory.ranking.model_text import TextRefused, check_structure, trial_load
from grpc_health.v1 import health_pb2, health_pb2_grpc

LOGGER = "celestial_memory.ranking.learned"
SHIPPED_TEXT = (learned.MODEL_DIR / "ranker.txt").read_text()


def folder_with(tmp: Path, name: str, text: str | bytes | None = None,
                card: Callable[[dict[str, Any]], Any] | None = None,
                rehash: bool = True) -> Path:
    """A copy of the shipped folder, its ranker.txt replaced by ``text`` (the card's hash then
    made to match it, as someone who wanted it loaded would) and its card changed by ``card``."""
    out = tmp / name
    shutil.copytree(learned.MODEL_DIR, out)
    data = json.loads((out / "card.json").read_text())
    if text is not None:
        raw = text.encode() if isinstance(text, str) else text
        (out / "ranker.txt").write_bytes(raw)
        if rehash:
            data["sha256"] = hashlib.sha256(raw).hexdigest()
    if card is not None:
        data = card(data)
    (out / "card.json").write_text(json.dumps(data))
    return out


def with_field(field: str, value: object) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda card: {**card, field: value}


def other_features_text() -> str:
    """The shipped model as if trained over one feature fewer."""
    lines = SHIPPED_TEXT.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("max_feature_idx="):
            lines[i] = "max_feature_idx=34"
        elif line.startswith("feature_names="):
            lines[i] = " ".join(line.split()[:-1])
    return "\n".join(lines)


def bad_child_text() -> str:
    """The shipped model with one tree's child pointing past its leaves."""
    lines = SHIPPED_TEXT.split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("left_child="))
    lines[at] = "left_child=99 " + lines[at].split("=", 1)[1].split(" ", 1)[1]
    return "\n".join(lines)


HALF = SHIPPED_TEXT[: len(SHIPPED_TEXT) // 2]
# Each damaged folder: how it is made, and words the warning must hold.
DAMAGED: dict[str, tuple[Callable[[Path], Path], str]] = {
    "truncated model, hash updated": (lambda t: folder_with(t, "half", HALF), "end of trees"),
    "card a JSON list": (lambda t: _card_text(t, "list", "[1, 2, 3]"), "a JSON list, not an object"),
    "candidates 'abc'": (lambda t: folder_with(t, "abc", card=with_field("candidates", "abc")),
                         "candidates"),
    "candidates -5": (lambda t: folder_with(t, "neg", card=with_field("candidates", -5)),
                      "candidates"),
    "candidates 1e9": (lambda t: folder_with(t, "big", card=with_field("candidates", 1e9)),
                       "candidates"),
    "candidates past the bound": (
        lambda t: folder_with(t, "past", card=with_field("candidates", MAX_CANDIDATES + 1)),
        "candidates"),
    "candidates true": (lambda t: folder_with(t, "bool", card=with_field("candidates", True)),
                        "candidates"),
    "hash not hex": (lambda t: folder_with(t, "hex", card=with_field("sha256", "zz" * 32)),
                     "sha256"),
    "features not a list": (lambda t: folder_with(t, "flist", card=with_field("features", "dense")),
                            "features"),
    "an unknown feature": (
        lambda t: folder_with(t, "fname", card=lambda c: {**c, "features": [*c["features"][:-1],
                                                                           "shoe_size"]}),
        "does not know"),
    "a field the card does not have": (
        lambda t: folder_with(t, "extra", card=with_field("threads", 8)), "threads"),
    "name empty": (lambda t: folder_with(t, "noname", card=with_field("name", "")), "name"),
    "a field missing": (
        lambda t: folder_with(t, "nofig", card=lambda c: {k: v for k, v in c.items()
                                                          if k != "figures"}), "figures"),
    "no folder": (lambda t: t / "nowhere", "cannot read"),
    "no card": (lambda t: _without(folder_with(t, "nocard"), "card.json"), "cannot read"),
    "no model": (lambda t: _without(folder_with(t, "nomodel"), "ranker.txt"), "cannot read"),
    "empty card": (lambda t: _card_text(t, "emptycard", ""), "is empty"),
    "empty model": (lambda t: folder_with(t, "emptymodel", b""), "is empty"),
    "card not UTF-8": (lambda t: _card_text(t, "latin", b'{"name": "caf\xe9"}'), "not UTF-8"),
    "model not UTF-8": (lambda t: folder_with(t, "latinmodel", b"tree\n\xff\xfe"), "not UTF-8"),
    "card not JSON": (lambda t: _card_text(t, "notjson", "{name: 1"), "not JSON"),
    "model over other features": (
        lambda t: folder_with(t, "features35", other_features_text()), "max_feature_idx"),
    "a tree pointing outside itself": (
        lambda t: folder_with(t, "child", bad_child_text()), "outside the tree"),
    "model not LightGBM's": (lambda t: folder_with(t, "garbage", "not a model"), "LightGBM text"),
    "model replaced, hash not updated": (
        lambda t: folder_with(t, "replaced", HALF, rehash=False), "damaged or replaced"),
}


def _card_text(tmp: Path, name: str, text: str | bytes) -> Path:
    out = folder_with(tmp, name)
    (out / "card.json").write_bytes(text.encode() if isinstance(text, str) else text)
    return out


def _without(folder: Path, name: str) -> Path:
    (folder / name).unlink()
    return folder


@pytest.mark.parametrize("case", list(DAMAGED))
def test_a_damaged_folder_gives_one_warning_and_the_weights(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    make, why = DAMAGED[case]
    monkeypatch.setenv("CELESTIAL_RANKER_MODEL", str(make(tmp_path)))
    monkeypatch.delenv("CELESTIAL_RANKER", raising=False)
    settings = Settings(data_dir=tmp_path / "data")
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert learned.load(settings.ranker, settings.ranker_model) is None
    lines = [r for r in caplog.records if r.name == LOGGER]
    assert len(lines) == 1 and lines[0].levelno == logging.WARNING, lines
    said = lines[0].getMessage()
    assert why in said and "the weighted relevance orders recalls" in said, said


def test_lightgbm_aborts_on_a_truncated_model_only_in_the_trial_process() -> None:
    # The text the structural check refuses, given to the trial alone: LightGBM ends the
    # short-lived process that reads it, and the trial reports it as a refusal.
    with pytest.raises(TextRefused, match="LightGBM ended the process"):
        trial_load(HALF, hashlib.sha256(HALF.encode()).hexdigest(), 36)
    with pytest.raises(TextRefused, match="end of trees"):
        check_structure(HALF, 36)
    assert check_structure(SHIPPED_TEXT, 36) == 100


def test_a_users_own_folder_is_loaded_and_named_at_start_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    own = folder_with(tmp_path, "own",
                      card=lambda c: {**c, "name": "my-recalls", "candidates": 20})
    monkeypatch.setenv("CELESTIAL_RANKER_MODEL", str(own))
    settings = Settings(data_dir=tmp_path / "data")
    with caplog.at_level(logging.INFO, logger=LOGGER):
        ranker = learned.load(settings.ranker, settings.ranker_model)
    assert ranker is not None and ranker.candidates == 20 and ranker.name.startswith("my-recalls")
    said = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert len(said) == 1 and str(own) in said[0] and "my-recalls" in said[0]


def test_learned_is_the_default_and_the_start_up_line_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
    embedder: SentenceTransformerEmbedder,
) -> None:
    monkeypatch.delenv("CELESTIAL_RANKER", raising=False)
    monkeypatch.delenv("CELESTIAL_RANKER_MODEL", raising=False)
    settings = Settings(data_dir=tmp_path / "data", rebalance_interval_s=0)
    assert settings.ranker == "learned" and settings.ranker_model is None
    with caplog.at_level(logging.INFO, logger=LOGGER):
        service = build_service(settings, embedder=embedder)
    try:
        assert service._candidates.ranker is not None
    finally:
        service.close()
    said = [r for r in caplog.records if r.name == LOGGER]
    assert len(said) == 1 and said[0].levelno == logging.INFO
    line = said[0].getMessage()
    assert "the learned model locomo-dev-lambdamart" in line and "within the zone tiers" in line
    assert "still gates them" in line and str(learned.MODEL_DIR) in line


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def healthy(proc: subprocess.Popen[bytes], port: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        stub = health_pb2_grpc.HealthStub(ch)
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if stub.Check(health_pb2.HealthCheckRequest(), timeout=1).status == \
                        health_pb2.HealthCheckResponse.SERVING:
                    return True
            except grpc.RpcError:
                time.sleep(0.3)
    return False


def test_a_server_given_a_truncated_model_serves_in_the_weighted_order(tmp_path: Path) -> None:
    half = folder_with(tmp_path, "half", HALF)
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CELESTIAL_REBALANCE_INTERVAL_S": "0",
           "CELESTIAL_RANKER_MODEL": str(half)}
    env.pop("CELESTIAL_RANKER", None)
    proc = subprocess.Popen([sys.executable, "-m", "celestial_client.cli", "serve", "--address",
                             f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "data")],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        assert healthy(proc, port, 120), "the server did not come up"
        with CelestialClient(f"127.0.0.1:{port}") as c:
            m = c.store("the boiler was serviced on 3 March")
            assert c.recall("when was the boiler serviced?", limit=1)[0].id == m.id
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 0, out.decode()
    said = [line for line in out.decode().splitlines() if "ranker:" in line]
    assert len(said) == 1, said
    assert "is not used, the weighted relevance orders recalls" in said[0]
    assert "end of trees" in said[0]
