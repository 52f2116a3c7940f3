"""This checkout's ``celestial`` command, for tests that start it as a process the way an MCP
host does (by name, with an environment of its own): the entry point ``pip install`` writes,
bound to this checkout's code whatever the environment has installed."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def write_celestial(bin_dir: Path) -> Path:
    """``bin_dir/celestial``, made executable."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / "celestial"
    paths = [str(ROOT / "client"), str(ROOT / "server")]
    exe.write_text(f"#!{sys.executable}\nimport sys\nsys.path[:0] = {paths!r}\n"
                   "from celestial_client.cli import main\nsys.exit(main())\n")
    exe.chmod(0o755)
    return exe
