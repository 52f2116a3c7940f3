"""The MCP setup of docs/cli.md, run as written: the page's Python snippet (the MCP SDK's stdio
client starting ``celestial mcp`` with the connection in its args) against a server on another
port than the default, with an API key read from a file, and none of it in the environment the
SDK passes on."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from celestial_memory.access.keys import create_key
from celestial_memory.clock import ManualClock
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.integration.celestial_exe import ROOT, write_celestial
from tests.integration.conftest import running_server
from tests.processes import finished

DOC = ROOT / "docs" / "cli.md"
DOC_TARGET, DOC_KEY_FILE = "localhost:50052", "/home/me/.config/celestial/key"


def _block(language: str, marker: str) -> str:
    blocks = re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), re.S)
    [block] = [b for b in blocks if marker in b]
    return str(block)


async def _run_snippet(code: str, bin_dir: Path) -> tuple[int, str, str]:
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "HOME": os.environ["HOME"],
           # Set in the caller's shell, as in the failure this guards against; never used.
           "CELESTIAL_TARGET": "127.0.0.1:1"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, env=env, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    # Killed (past the bound, or as the test failed), it leaves no MCP server: the SDK's stdio
    # child, in a session of its own, reads the end of its stdin and exits.
    out, err = await finished(proc, 180)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_the_documented_mcp_flow_reaches_a_server_on_another_port(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock,
) -> None:
    keys = tmp_path / "keys.json"
    key_file = tmp_path / "key"
    key_file.write_text(create_key(keys, "desktop", "write", ["me"])[1] + "\n")
    snippet = _block("python", "StdioServerParameters")
    host = json.loads(_block("json", "mcpServers"))["mcpServers"]["celestial-memory"]
    # The host's configuration and the Python snippet start the same command line.
    assert host["command"] == "celestial"
    assert all(json.dumps(a) in snippet for a in host["args"])
    bin_dir = tmp_path / "bin"
    write_celestial(bin_dir)
    async with running_server(tmp_path / "data", embedder, clock, api_keys_file=keys) as srv:
        assert srv.port != 50051 and f":{srv.port}" != DOC_TARGET[-6:]
        code, out, err = await _run_snippet(
            snippet.replace(DOC_TARGET, f"localhost:{srv.port}")
            .replace(DOC_KEY_FILE, str(key_file)), bin_dir)
        assert code == 0, err
        assert out == "Alice drinks her espresso without sugar\n"


async def test_a_tool_error_is_an_mcp_tool_error_with_structured_content(tmp_path: Path) -> None:
    exe = write_celestial(tmp_path / "bin")
    params = StdioServerParameters(command=str(exe),
                                   args=["--target", "127.0.0.1:1", "mcp"])
    async with Client(params, read_timeout_seconds=60) as mcp:
        failed = await mcp.call_tool("memory_stats", {})
        assert failed.is_error
        assert failed.structured_content is not None
        error = failed.structured_content["error"]
        assert error["code"] == "UNAVAILABLE"
        text = failed.content[0].text
        assert text.startswith("UNAVAILABLE: ")
        assert "cannot reach the Celestial Memory server at 127.0.0.1:1" in text
        assert "--target" in text
        bad = await mcp.call_tool("memory_search", {"query": "x", "limit": 0})
        assert bad.is_error and bad.structured_content["error"]["code"] == "INVALID_ARGUMENT"
