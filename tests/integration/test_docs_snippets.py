"""Every runnable snippet of README.md and docs/*.md, as pasted, against a fresh server of its
own (so no snippet leans on what another stored), with the output the docs show checked
(ids, dates and times masked). tests/doc_snippets.py says how blocks are marked."""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import sys
from pathlib import Path

import pytest
from celestial_client.cli import main
from celestial_memory.clock import ManualClock
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder

from tests.doc_snippets import (
    DOC_ADDRESS,
    DOC_HTTP_ADDRESS,
    ROOT,
    Block,
    all_blocks,
    console_steps,
    normalized,
)
from tests.e2e.test_grpcurl import GRPCURL
from tests.e2e.test_typescript_client import PACKAGE, install_package
from tests.integration.conftest import running_server

RUNNABLE = [b for b in all_blocks() if b.lang in ("python", "ts", "console") and b.skip is None]


def _environment() -> dict[str, str]:
    """This interpreter's tools first on PATH (`celestial` for the MCP snippet), this checkout's
    packages first on the path, and no CELESTIAL_ setting of the caller's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CELESTIAL_")}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "server"), str(ROOT / "client"), env.get("PYTHONPATH", "")])
    env["HF_HUB_OFFLINE"] = "1"
    return env


async def _run_python(block: Block, address: str, cwd: Path) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", block.code.replace(DOC_ADDRESS, address), cwd=cwd,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=_environment())
    out, err = await proc.communicate()
    assert proc.returncode == 0, f"{block.name} failed:\n{err.decode()}"
    return out.decode()


async def _run_typescript(block: Block, address: str, cwd: Path) -> str:
    """The snippet as an ES module (it has no type annotations, so Node runs it as written)
    beside a node_modules that holds the package, built from this checkout."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node is not installed")
    await install_package(build=True)
    scope = cwd / "node_modules" / "@celestial-memory"
    scope.mkdir(parents=True)
    (scope / "client").symlink_to(PACKAGE, target_is_directory=True)
    (cwd / "snippet.mjs").write_text(block.code.replace(DOC_ADDRESS, address), encoding="utf-8")
    proc = await asyncio.create_subprocess_exec(
        "node", "snippet.mjs", cwd=cwd, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode == 0, f"{block.name} failed:\n{err.decode()}"
    return out.decode()


async def _run_command(block: Block, command: str, address: str, http: str,
                       capsys: pytest.CaptureFixture[str]) -> str:
    program, *argv = shlex.split(command)
    if program == ".venv/bin/celestial":
        code = await asyncio.to_thread(main, ["--target", address, *argv])
        printed = capsys.readouterr()
        assert code == 0, f"{block.name}: `{command}` failed: {printed.err}"
        return printed.out
    assert program in ("grpcurl", "curl"), (
        f"{block.name}: only celestial, grpcurl and curl commands run here")
    if program == "grpcurl" and not Path(GRPCURL).exists():
        pytest.skip("grpcurl is not installed")
    if program == "curl" and shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    proc = await asyncio.create_subprocess_exec(
        GRPCURL if program == "grpcurl" else "curl",
        *(arg.replace(DOC_ADDRESS, address).replace(DOC_HTTP_ADDRESS, http) for arg in argv),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode == 0, f"{block.name}: `{command}` failed: {err.decode()}"
    return out.decode()


async def _run_console(block: Block, address: str, http: str,
                       capsys: pytest.CaptureFixture[str]) -> None:
    for command, shown in console_steps(block):
        printed = await _run_command(block, command, address, http, capsys)
        if shown is not None:
            assert normalized(printed) == normalized(shown), (
                f"{block.name}: `{command}` printed\n{printed}")


def test_the_docs_have_runnable_snippets() -> None:
    names = {b.name.split(":")[0] for b in RUNNABLE}
    assert {"README.md", "docs/clients.md", "docs/agents.md", "docs/concepts.md"} <= names
    assert any(b.lang == "console" for b in RUNNABLE)


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.name for b in RUNNABLE])
async def test_snippet_runs_and_prints_what_the_docs_show(
    block: Block, tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock,
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with running_server(tmp_path / "data", embedder, clock,
                              http_address="127.0.0.1:0") as server:
        address = f"127.0.0.1:{server.port}"
        if block.lang == "console":
            await _run_console(block, address, f"127.0.0.1:{server.http_port}", capsys)
            return
        run = _run_typescript if block.lang == "ts" else _run_python
        printed = await run(block, address, tmp_path)
        if block.output is not None:
            assert normalized(printed) == normalized(block.output), (
                f"{block.name} printed\n{printed}")
