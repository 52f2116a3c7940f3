"""ruff and mypy are part of the suite, so `make test` keeps the code clean."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True)


def test_ruff_is_clean() -> None:
    r = run("ruff", "check", "proto", "server", "client", "tests", "benchmarks")
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_is_clean() -> None:
    r = run("mypy", "server", "client")
    assert r.returncode == 0, r.stdout + r.stderr
