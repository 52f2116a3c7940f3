"""buf lint and buf breaking over the contract (proto/buf.yaml has the rules). The images in
proto/contract/ are the contracts callers were given; a change that breaks one (on the wire or in
its JSON form) fails here. buf comes from the npm registry through npx, pinned."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

PROTO = Path(__file__).resolve().parents[2] / "proto"
BUF = ["npx", "--yes", "@bufbuild/buf@1.75.0"]
CONTRACTS = sorted((PROTO / "contract").glob("*.binpb"))

pytestmark = pytest.mark.skipif(shutil.which("npx") is None, reason="npm is not installed")


def buf(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BUF, *args], cwd=PROTO, capture_output=True, text=True, timeout=300)


def test_the_contract_passes_buf_lint() -> None:
    done = buf("lint")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("contract", CONTRACTS, ids=[c.stem for c in CONTRACTS])
def test_the_contract_keeps_every_earlier_one(contract: Path) -> None:
    done = buf("breaking", "--against", str(contract))
    assert done.returncode == 0, done.stdout + done.stderr


def test_buf_breaking_would_catch_a_break(tmp_path: Path) -> None:
    # The check can fail: a field renumbered in a copy of the contract is reported.
    copy = tmp_path / "proto"
    shutil.copytree(PROTO, copy)
    proto = copy / "celestial" / "v1" / "memory.proto"
    proto.write_text(proto.read_text().replace("int64 recall_count = 7;", "int64 recall_count = 99;"))
    done = subprocess.run([*BUF, "breaking", "--against", str(CONTRACTS[-1])], cwd=copy,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "recall_count" in done.stdout + done.stderr
