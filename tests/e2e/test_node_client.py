"""The Node.js example (client/node-example, on the @celestial-memory/client package) against a real
server: from the repository, over mTLS with an API key, and copied out of the repository with the
package installed from its npm tarball."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from celestial_memory.access.keys import create_key
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.clock import ManualClock
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder

from tests.certs import CertificateAuthority
from tests.e2e.test_typescript_client import PACKAGE, install_package, run
from tests.integration.conftest import running_server

EXAMPLE = Path(__file__).resolve().parents[2] / "client" / "node-example"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None, reason="node is not installed"
)


async def install_example() -> None:
    """The example's node_modules links to client/typescript, whose dist/ must be current."""
    await install_package(build=True)
    if not (EXAMPLE / "node_modules" / "@celestial-memory" / "client").exists():
        code, out = await run("npm", "ci", "--no-audit", "--no-fund", cwd=EXAMPLE, timeout=300)
        assert code == 0, out


def assert_example_output(out: str) -> None:
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    stored, *recalled, error = lines
    assert stored["zone"] == "ZONE_OUTER"
    assert recalled[0]["id"] == stored["stored"]
    assert "Tuesday" in recalled[0]["content"] and recalled[0]["relevance"] > 0.4
    assert error["error"] == "INVALID_ARGUMENT" and error["details"].startswith("content")
    assert error["field"] == "content"


async def test_node_client_stores_and_recalls(server: MemoryServer) -> None:
    await install_example()
    code, out = await run("node", "example.js", f"127.0.0.1:{server.port}", cwd=EXAMPLE,
                          timeout=60)
    assert code == 0, out
    assert_example_output(out)


async def test_node_client_with_an_api_key_over_mtls(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    await install_example()
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
        assert_example_output(out)
        code, out = await run("node", "example.js", f"localhost:{srv.port}", cwd=EXAMPLE,
                              timeout=60, env={**env, "CELESTIAL_API_KEY": ""})
        assert code != 0 and "UNAUTHENTICATED" in out


async def test_node_example_copied_out_with_the_package_tarball(
    server: MemoryServer, tmp_path: Path
) -> None:
    """What a user outside the repository does: npm pack the package, install the tarball into a
    copy of the example (whose file:../typescript means nothing there), and run it."""
    await install_package()
    packs = tmp_path / "packs"
    packs.mkdir()
    code, out = await run("npm", "pack", "--pack-destination", str(packs), cwd=PACKAGE,
                          timeout=120)
    assert code == 0, out
    [tarball] = packs.glob("celestial-memory-client-*.tgz")
    assert PACKAGE.parent.parent not in tmp_path.parents  # truly outside the repository
    copy = tmp_path / "example"
    copy.mkdir()
    for name in ("example.js", "package.json"):
        shutil.copy(EXAMPLE / name, copy / name)
    code, out = await run("npm", "install", "--no-audit", "--no-fund", str(tarball), cwd=copy,
                          timeout=300)
    assert code == 0, out
    installed = copy / "node_modules" / "@celestial-memory" / "client"
    assert not installed.is_symlink() and (installed / "dist" / "index.js").exists()
    code, out = await run("node", "example.js", f"127.0.0.1:{server.port}", cwd=copy, timeout=60)
    assert code == 0, out
    assert_example_output(out)
