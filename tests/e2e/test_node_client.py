"""A Node.js program (@grpc/grpc-js + @grpc/proto-loader, the same .proto) against a real server."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest
from celestial_memory.access.keys import create_key
from celestial_memory.clock import ManualClock
from celestial_memory.embedding import SentenceTransformerEmbedder
from celestial_memory.grpc_api.server import MemoryServer

from tests.certs import CertificateAuthority
from tests.integration.conftest import running_server

EXAMPLE = Path(__file__).resolve().parents[2] / "client" / "node-example"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None, reason="node is not installed"
)


async def run(
    *cmd: str, cwd: Path, timeout: float, env: dict[str, str] | None = None
) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        *cmd, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, **(env or {})},
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


async def test_node_client_with_an_api_key_over_mtls(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    if not (EXAMPLE / "node_modules" / "@grpc" / "grpc-js").exists():
        code, out = await run("npm", "ci", "--no-audit", "--no-fund", cwd=EXAMPLE, timeout=300)
        assert code == 0, out
    ca = CertificateAuthority(tmp_path / "pki")
    server, client = ca.issue("server", "localhost", True), ca.issue("client", "node", False)
    keys = tmp_path / "keys.json"
    _, key = create_key(keys, "node", "write", ["node-example"])
    async with running_server(tmp_path / "d", embedder, clock, api_keys_file=keys,
                              tls_cert=server.cert, tls_key=server.key,
                              tls_client_ca=ca.cert) as srv:
        env = {"CELESTIAL_API_KEY": key, "CELESTIAL_TLS_CA": str(ca.cert),
               "CELESTIAL_TLS_CLIENT_CERT": str(client.cert),
               "CELESTIAL_TLS_CLIENT_KEY": str(client.key)}
        code, out = await run("node", "example.js", f"localhost:{srv.port}", cwd=EXAMPLE,
                              timeout=60, env=env)
        assert code == 0, out
        assert '"stored"' in out and "Tuesday" in out
        code, out = await run("node", "example.js", f"localhost:{srv.port}", cwd=EXAMPLE,
                              timeout=60, env={**env, "CELESTIAL_API_KEY": ""})
        assert code != 0 and "UNAUTHENTICATED" in out
