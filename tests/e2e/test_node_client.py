"""A Node.js program (@grpc/grpc-js + @grpc/proto-loader, the same .proto) against a real server."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from celestial_memory.grpc_api.server import MemoryServer

EXAMPLE = Path(__file__).resolve().parents[2] / "client" / "node-example"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None, reason="node is not installed"
)


async def run(*cmd: str, cwd: Path, timeout: float) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        *cmd, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode or 0, out.decode()


async def test_node_client_stores_and_recalls(server: MemoryServer) -> None:
    if not (EXAMPLE / "node_modules" / "@grpc" / "grpc-js").exists():
        code, out = await run("npm", "ci", "--no-audit", "--no-fund", cwd=EXAMPLE, timeout=300)
        assert code == 0, out
    code, out = await run("node", "example.js", f"127.0.0.1:{server.port}", cwd=EXAMPLE,
                          timeout=60)
    assert code == 0, out
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    stored, *recalled, error = lines
    assert stored["zone"] == "ZONE_OUTER"
    assert recalled[0]["id"] == stored["stored"]
    assert "Tuesday" in recalled[0]["content"] and recalled[0]["relevance"] > 0.4
    assert error["error"] == "INVALID_ARGUMENT" and error["details"].startswith("content")
