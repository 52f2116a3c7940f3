"""The TypeScript client package's own tests (client/typescript, node --test) against a real
server without a model, one with a scripted model that stalls on any request about Dave until
the test ends (the operations' tests cancel those), and one with API keys (an admin key for
every tenant, a write key for one, and a secret setting) for the admin calls."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from celestial_memory.access.keys import create_key
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.clock import ManualClock
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder

from tests.integration.conftest import running_server
from tests.integration.test_reflection import scripted
from tests.processes import finished
from tests.scripted_model import ScriptedModel

PACKAGE = Path(__file__).resolve().parents[2] / "client" / "typescript"
SECRET = "qk-ts-5f1e0c9a-never-shown"

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None, reason="node is not installed"
)


async def run(
    *cmd: str, cwd: Path, timeout: float, env: dict[str, str] | None = None
) -> tuple[int, str]:
    """Runs a command without blocking the event loop, which serves the test's server."""
    proc = await asyncio.create_subprocess_exec(
        *cmd, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, **(env or {})},
    )
    out, _ = await finished(proc, timeout)
    return proc.returncode or 0, out.decode()


async def install_package(build: bool = False) -> None:
    """client/typescript's dependencies, when missing; with ``build``, its dist/ built again from
    the current sources (npm ci builds it too, but an existing one may be stale)."""
    manifest = json.loads((PACKAGE / "package.json").read_text())
    wanted = {**manifest["dependencies"], **manifest["devDependencies"]}
    if not all((PACKAGE / "node_modules" / name / "package.json").exists() for name in wanted):
        code, out = await run("npm", "ci", "--no-audit", "--no-fund", cwd=PACKAGE, timeout=300)
        assert code == 0, out
    elif build:
        code, out = await run("npm", "run", "build", cwd=PACKAGE, timeout=120)
        assert code == 0, out


async def test_typescript_client_suite(
        server: MemoryServer, tmp_path: Path, embedder: SentenceTransformerEmbedder,
        clock: ManualClock) -> None:
    await install_package()
    stall = threading.Event()

    def answer(body: dict[str, Any]) -> str:
        if "name:dave" in body["messages"][1]["content"]:
            stall.wait(30)  # until the test cancels it (the server gives up after 5 s)
        return scripted(body)

    keys = tmp_path / "keys.json"
    admin = create_key(keys, "ts-admin", "admin", ["*"])[1]
    write = create_key(keys, "ts-write", "write", ["ts-keyed"])[1]
    model = ScriptedModel(answer)
    try:
        async with (running_server(tmp_path / "model", embedder, clock, llm_base_url=model.url,
                                   llm_model="scripted", llm_timeout_s=5.0) as with_model,
                    running_server(tmp_path / "keyed", embedder, clock, api_keys_file=keys,
                                   qdrant_api_key=SECRET) as keyed):
            code, out = await run("npm", "test", cwd=PACKAGE, timeout=180, env={
                "CELESTIAL_TEST_ADDRESS": f"127.0.0.1:{server.port}",
                "CELESTIAL_TEST_MODEL_ADDRESS": f"127.0.0.1:{with_model.port}",
                "CELESTIAL_TEST_KEYED_ADDRESS": f"127.0.0.1:{keyed.port}",
                "CELESTIAL_TEST_ADMIN_KEY": admin, "CELESTIAL_TEST_WRITE_KEY": write,
                "CELESTIAL_TEST_SECRET": SECRET})
    finally:
        stall.set()
        model.close()
    assert code == 0, out
    assert "# fail 0" in out and "# SKIP" not in out, out  # the live tests ran


async def test_generated_code_is_current(tmp_path: Path) -> None:
    """src/gen is checked in; it must be what `npm run generate` makes from the protos now."""
    await install_package()
    code, out = await run("npm", "run", "generate", "--", "--output", str(tmp_path), cwd=PACKAGE,
                          timeout=120)
    assert code == 0, out
    fresh = {p.relative_to(tmp_path / "src" / "gen"): p.read_bytes()
             for p in (tmp_path / "src" / "gen").rglob("*") if p.is_file()}
    gen = PACKAGE / "src" / "gen"
    committed = {p.relative_to(gen): p.read_bytes() for p in gen.rglob("*") if p.is_file()}
    assert sorted(committed) == sorted(fresh), "run `npm run generate` in client/typescript"
    stale = [str(rel) for rel, text in fresh.items() if committed[rel] != text]
    assert not stale, f"stale: {stale}; run `npm run generate` in client/typescript"
