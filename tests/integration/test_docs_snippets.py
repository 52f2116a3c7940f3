"""Every runnable snippet of README.md and docs/*.md, as pasted, against a fresh server of its
own (so no snippet leans on what another stored), with the output the docs show checked
(ids, dates and times masked). tests/doc_snippets.py says how blocks are marked."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import shutil
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from celestial_client.cli import main
from celestial_memory.clock import ManualClock
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder

from tests.doc_snippets import (
    DOC_ADDRESS,
    DOC_HTTP_ADDRESS,
    MEMORY_ID,
    ROOT,
    Block,
    all_blocks,
    console_steps,
    needs_shell,
    normalized,
    programs,
)
from tests.e2e.test_grpcurl import GRPCURL
from tests.e2e.test_typescript_client import PACKAGE, install_package
from tests.integration.celestial_exe import write_celestial
from tests.integration.conftest import running_server
from tests.processes import finished, running

CELESTIAL = ".venv/bin/celestial"  # as the docs run it, from the checkout after make install
SHELL_PROGRAMS = (CELESTIAL, "printf", "echo", "cat")
# A bound on one snippet or command, which takes seconds: only a hung one comes near it. A
# snippet killed (past it, or as its test failed) leaves no MCP server: the SDK's stdio child, in
# a session of its own, reads the end of its stdin and exits.
SNIPPET_S = 240.0

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


async def _run_python(block: Block, address: str, cwd: Path, code: str | None = None) -> str:
    code = block.code if code is None else code
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code.replace(DOC_ADDRESS, address), cwd=cwd,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=_environment())
    out, err = await finished(proc, SNIPPET_S)
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
    out, err = await finished(proc, SNIPPET_S)
    assert proc.returncode == 0, f"{block.name} failed:\n{err.decode()}"
    return out.decode()


async def _run_shell(block: Block, command: str, address: str, work: Path) -> str:
    """A line that pipes or redirects, in bash, in the session's folder (whose
    ``.venv/bin/celestial`` is this checkout's), ``CELESTIAL_TARGET`` naming the test server."""
    unknown = [p for p in programs(command) if p not in SHELL_PROGRAMS]
    assert not unknown, f"{block.name}: only {', '.join(SHELL_PROGRAMS)} run in a shell line"
    env = {**_environment(), "CELESTIAL_TARGET": address}
    # A session of its own, so that killing bash (tests/processes.py) takes its line's commands.
    proc = await asyncio.create_subprocess_exec(
        "bash", "-c", command.replace(DOC_ADDRESS, address), cwd=work, env=env,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, start_new_session=True)
    out, err = await finished(proc, SNIPPET_S)
    assert proc.returncode == 0, f"{block.name}: `{command}` failed: {err.decode()}"
    return out.decode()


async def _run_command(block: Block, command: str, address: str, http: str,
                       capsys: pytest.CaptureFixture[str], work: Path) -> str:
    if needs_shell(command):
        return await _run_shell(block, command, address, work)
    program, *argv = shlex.split(command)
    if program == CELESTIAL:
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
    out, err = await finished(proc, SNIPPET_S)
    assert proc.returncode == 0, f"{block.name}: `{command}` failed: {err.decode()}"
    return out.decode()


async def _run_console(block: Block, address: str, http: str,
                       capsys: pytest.CaptureFixture[str], work: Path) -> None:
    """The session's lines in order, in ``work`` (the current folder meanwhile, for the
    commands run in this process). An id the docs show printed stands for the one this run
    printed there."""
    write_celestial(work / ".venv" / "bin")
    ids: dict[str, str] = {}
    with contextlib.chdir(work):
        for command, shown in console_steps(block):
            command = MEMORY_ID.sub(lambda m: ids.get(m[0], m[0]), command)
            printed = await _run_command(block, command, address, http, capsys, work)
            if shown is not None:
                assert normalized(printed) == normalized(shown), (
                    f"{block.name}: `{command}` printed\n{printed}")
                ids.update(zip(MEMORY_ID.findall(shown), MEMORY_ID.findall(printed),
                               strict=True))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def _beside(block: Block, address: str, tmp_path: Path) -> AsyncIterator[str]:
    """The block's ``beside`` command, running against the test server on a free port until
    the block is done; yields the block's code with that port in it."""
    assert block.beside is not None
    program, *argv = shlex.split(block.beside.replace(DOC_ADDRESS, address))
    assert program in ("celestial", CELESTIAL), f"{block.name}: beside runs only celestial"
    doc_port = re.search(r"--port (\d+)", block.beside)
    assert doc_port, f"{block.name}: beside needs --port"
    port = _free_port()
    argv = [str(port) if a == doc_port[1] else a for a in argv]
    exe = write_celestial(tmp_path / "bin")
    log = tmp_path / "beside.log"
    with log.open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            str(exe), *argv, env=_environment(), stdin=asyncio.subprocess.DEVNULL,
            stdout=err, stderr=err)
    async with running(proc):
        while True:  # until it listens, or it ended: no time limit but the test's own
            assert proc.returncode is None, (
                f"{block.name}: `{block.beside}` ended:\n{log.read_text()}")
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.1)
                continue
            writer.close()
            await writer.wait_closed()
            break
        yield block.code.replace(f":{doc_port[1]}", f":{port}")


def test_the_docs_have_runnable_snippets() -> None:
    names = {b.name.split(":")[0] for b in RUNNABLE}
    assert {"README.md", "docs/clients.md", "docs/agents.md", "docs/concepts.md"} <= names
    assert any(b.lang == "console" for b in RUNNABLE)


def test_the_cli_inputs_and_the_mcp_http_client_are_among_them() -> None:
    """The snippets that show a long text from a file or stdin, and the MCP SDK's client over
    streamable HTTP, run here rather than only being shown."""
    lines = [command for b in RUNNABLE if b.lang == "console"
             for command, _ in console_steps(b)]
    assert any(c.startswith(f"{CELESTIAL} store --file ") for c in lines)
    assert any(re.search(rf"{CELESTIAL} store - .*< \S+", c) for c in lines)
    assert any(re.search(rf"\| {CELESTIAL} store -", c) for c in lines)
    assert any(c.startswith(f"{CELESTIAL} update ") and " --file " in c for c in lines)
    http = [b for b in RUNNABLE if b.beside and "--transport http" in b.beside]
    assert http and all("from mcp import Client" in b.code for b in http)
    assert all(b.output for b in http)


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.name for b in RUNNABLE])
async def test_snippet_runs_and_prints_what_the_docs_show(
    block: Block, tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock,
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with running_server(tmp_path / "data", embedder, clock,
                              http_address="127.0.0.1:0") as server:
        address = f"127.0.0.1:{server.port}"
        if block.lang == "console":
            await _run_console(block, address, f"127.0.0.1:{server.http_port}", capsys,
                               tmp_path / "work")
            return
        if block.beside is not None:
            assert block.lang == "python", f"{block.name}: beside runs only python blocks"
            async with _beside(block, address, tmp_path) as code:
                printed = await _run_python(block, address, tmp_path, code)
        else:
            run = _run_typescript if block.lang == "ts" else _run_python
            printed = await run(block, address, tmp_path)
        if block.output is not None:
            assert normalized(printed) == normalized(block.output), (
                f"{block.name} printed\n{printed}")
