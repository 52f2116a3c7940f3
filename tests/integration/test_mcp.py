"""``celestial mcp`` over stdio, driven by the MCP SDK's own client, against a live server."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.clock import ManualClock
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from mcp import Client
from mcp.client.stdio import StdioServerParameters, get_default_environment

from tests.integration.celestial_exe import write_celestial
from tests.integration.conftest import running_server
from tests.integration.test_reflection import STORIES, scripted
from tests.processes import finished, running
from tests.scripted_model import ScriptedModel

# This checkout's command, as an MCP host starts it.
CELESTIAL = str(write_celestial(Path(tempfile.mkdtemp(prefix="celestial-bin-"))))


def stdio(server: MemoryServer, *more: str) -> StdioServerParameters:
    # The SDK passes the child only a safe part of the environment: PYTHONPATH goes along, so
    # the child runs the code under test (a checkout ahead of the installed package).
    env = get_default_environment()
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return StdioServerParameters(
        command=CELESTIAL, args=["--target", f"127.0.0.1:{server.port}", "--tenant", "mcp", "mcp",
                                 *more], env=env)


async def test_mcp_over_stdio_lists_saves_searches_pins_and_reports_errors(
    server: MemoryServer,
) -> None:
    async with Client(stdio(server), read_timeout_seconds=60) as mcp:
        tools = {t.name: t for t in (await mcp.list_tools()).tools}
        assert set(tools) == {"memory_save", "memory_search", "memory_context", "memory_get",
                              "memory_update",
                              "memory_pin", "memory_delete", "memory_stats", "memory_recent",
                              "memory_related", "memory_relate", "memory_restore",
                              "memory_ledger", "memory_rebalance",
                              "memory_feedback", "memory_reflect", "memory_auto",
                              "policy_decide", "policy_status"}
        save = tools["memory_save"].input_schema
        assert save["required"] == ["content"]
        assert all(p.get("description") for p in save["properties"].values())
        assert tools["memory_delete"].annotations is not None
        assert tools["memory_delete"].annotations.destructive_hint is True

        saved = await mcp.call_tool("memory_save", {"content": "Alice drinks her espresso without "
                                                    "sugar", "tags": ["prefs"], "importance": 0.7})
        assert not saved.is_error
        memory = saved.structured_content["memory"]
        assert memory["content"].startswith("Alice drinks") and memory["tags"] == ["prefs"]
        await mcp.call_tool("memory_save", {"content": "The build server lives in Frankfurt"})

        found = await mcp.call_tool("memory_search", {"query": "how does Alice take coffee?",
                                                      "limit": 1})
        assert not found.is_error
        results = found.structured_content["results"]
        assert [r["id"] for r in results] == [memory["id"]]
        assert results[0]["recall_count"] == 1  # the search reinforced it
        assert "espresso" in found.content[0].text

        pinned = await mcp.call_tool("memory_pin", {"id": memory["id"]})
        assert pinned.structured_content["memory"]["pinned"] is True
        assert (await mcp.call_tool("memory_get", {"id": memory["id"]})).structured_content[
            "memory"]["pinned"] is True

        stats = await mcp.call_tool("memory_stats", {})
        assert stats.structured_content["total"] == 2
        assert sum(stats.structured_content["zones"].values()) == 2
        assert "2 memories" in stats.content[0].text

        # A bad argument: the schema's message, as a tool error the model can read.
        bad = await mcp.call_tool("memory_search", {"query": "coffee", "limit": 0})
        assert bad.is_error
        assert "limit" in bad.content[0].text
        unknown = await mcp.call_tool("memory_save", {"content": "x", "colour": "red"})
        assert unknown.is_error and "colour" in unknown.content[0].text
        # The service's own error, with its message.
        missing = await mcp.call_tool("memory_get", {"id": "no-such-memory"})
        assert missing.is_error
        assert missing.content[0].text.startswith(("NOT_FOUND", "INVALID_ARGUMENT"))

        voted = await mcp.call_tool("memory_feedback", {"id": memory["id"], "helpful": True})
        assert not voted.is_error
        assert voted.structured_content["memory"]["importance"] > memory["importance"]
        fact = await mcp.call_tool("memory_save", {"content": "Alice's office is on floor 7",
                                                   "memory_type": "fact", "immutable": True})
        assert fact.structured_content["memory"]["memory_type"] == "fact"
        assert fact.structured_content["memory"]["immutable"] is True
        facts = await mcp.call_tool("memory_search", {"query": "Alice", "memory_types": ["fact"],
                                                      "reinforce": False})
        assert [r["id"] for r in facts.structured_content["results"]] == [
            fact.structured_content["memory"]["id"]]
        refused = await mcp.call_tool("memory_update", {"id": fact.structured_content["memory"]["id"],
                                                        "content": "floor 8"})
        assert refused.is_error and "immutable" in refused.content[0].text
        no_verdict = await mcp.call_tool("memory_feedback", {"id": memory["id"]})
        assert no_verdict.is_error and "helpful" in no_verdict.content[0].text

        dry = await mcp.call_tool("memory_rebalance", {})
        assert dry.structured_content["dry_run"] is True


async def test_mcp_print_tools_needs_no_server(tmp_path: Path) -> None:
    import asyncio
    import json

    proc = await asyncio.create_subprocess_exec(
        CELESTIAL, "--target", "127.0.0.1:1", "mcp", "--print-tools",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await finished(proc, 60)
    assert proc.returncode == 0, err.decode()
    tools = json.loads(out)
    assert [t["name"] for t in tools][:2] == ["memory_save", "memory_search"]
    assert tools[0]["inputSchema"]["properties"]["content"]["type"] == "string"


async def test_mcp_over_streamable_http(server: MemoryServer) -> None:
    import asyncio
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = await asyncio.create_subprocess_exec(
        CELESTIAL, "--target", f"127.0.0.1:{server.port}", "--tenant", "mcp-http", "mcp",
        "--transport", "http", "--port", str(port), stderr=asyncio.subprocess.PIPE)
    async with running(proc):
        for _ in range(200):  # until it listens
            try:
                _, w = await asyncio.open_connection("127.0.0.1", port)
                w.close()
                break
            except OSError:
                await asyncio.sleep(0.1)
        async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=60) as mcp:
            saved = await mcp.call_tool("memory_save", {"content": "The deploy key rotates monthly"})
            assert not saved.is_error, saved.content
            found = await mcp.call_tool("memory_search", {"query": "when does the key rotate?"})
            assert found.structured_content["results"][0]["content"] == (
                "The deploy key rotates monthly")


async def test_mcp_reflects_with_the_servers_model_and_says_when_there_is_none(
        server: MemoryServer, tmp_path: Path, embedder: SentenceTransformerEmbedder,
        clock: ManualClock) -> None:
    async with Client(stdio(server), read_timeout_seconds=60) as mcp:
        refused = await mcp.call_tool("memory_reflect", {})
        assert refused.is_error and "needs a model" in refused.content[0].text
    model = ScriptedModel(scripted)
    try:
        async with running_server(tmp_path / "with-model", embedder, clock,
                                  llm_base_url=model.url, llm_model="scripted") as srv, \
                Client(stdio(srv), read_timeout_seconds=60) as mcp:
            for text in STORIES:
                await mcp.call_tool("memory_save", {"content": text})
            dry = await mcp.call_tool("memory_reflect", {})
            assert not dry.is_error and dry.structured_content["dry_run"] is True
            insights = dry.structured_content["insights"]
            assert insights and all(i["source_ids"] and not i["created"] for i in insights)
            wrote = await mcp.call_tool("memory_reflect", {"dry_run": False})
            assert all(i["created"] for i in wrote.structured_content["insights"])
            found = await mcp.call_tool("memory_search", {
                "query": insights[0]["content"], "memory_types": ["insight"],
                "reinforce": False})
            assert insights[0]["id"] in [r["id"] for r in found.structured_content["results"]]
    finally:
        model.close()
