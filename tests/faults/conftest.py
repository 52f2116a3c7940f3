"""Fixtures of the crash tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def shared_encoder(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Servers the test starts cache the encoder's ONNX file in one folder for the whole run,
    not in each data folder: a data folder's first start would otherwise export it from the
    model again (seconds of each start). Where the file lives is no part of what a crash test
    shows; the data folders are still each test's own."""
    monkeypatch.setenv("CELESTIAL_EMBED_ONNX_DIR", str(tmp_path_factory.getbasetemp() / "encoders"))
