"""The committed protobuf code must be what `make proto` generates from proto/ now."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "proto"))

from generate import generate  # noqa: E402


def test_generated_code_is_current(tmp_path: Path) -> None:
    written = generate(tmp_path)
    assert written
    for path in written:
        rel = path.relative_to(tmp_path)
        committed = ROOT / "client" / "celestial_client" / rel
        assert committed.exists(), f"{rel} is missing: run `make proto`"
        assert committed.read_bytes() == path.read_bytes(), f"{rel} is stale: run `make proto`"
