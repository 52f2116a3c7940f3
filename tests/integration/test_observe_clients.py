"""The turn policy (Observe, GetPolicy, ResetPolicy) everywhere a user reaches it: the Python
clients, sync and async, the ``celestial observe`` and ``celestial policy`` commands (and a
skipped turn in ``celestial archived``), and the MCP tools memory_auto, policy_decide and
policy_status, against a real server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from celestial_client import AsyncCelestialClient, CelestialClient
from celestial_client.cli import main
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.clock import ManualClock
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder

from tests.integration.conftest import running_server

GREETING = "Hi there!"
FACT = "I moved to Lisbon in May 2023 with my sister Ana."
QUESTION = "Where did I move?"


@pytest.fixture
async def server(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> AsyncIterator[MemoryServer]:
    """The usual server (and so the usual clients) without exploration: each decision is the
    policy's best, never one drawn at random (1 in 40 of the bandit's by default)."""
    async with running_server(tmp_path, embedder, clock, policy_exploration=0.0) as srv:
        yield srv


async def test_the_sync_client_skips_saves_retrieves_and_resets(
    server: MemoryServer, client: CelestialClient,
) -> None:

    def turns() -> None:
        hi = client.observe(GREETING, session_id="s1")
        d = hi.decision
        assert (hi.action, d.keep, d.trace.phase, d.dry_run) == ("SKIP", False, 1, False)
        assert d.trace.rule and d.trace.probability == 1.0 and d.id == 1
        assert d.why.startswith("phase 1 (clear-case rules): ")
        assert hi.memory is not None and hi.memory.archived and hi.created
        assert hi.memory.metadata["policy"] == "SKIP"
        assert hi.memory.metadata["policy_decision"] == "1"
        assert hi.results == [] and hi.context == "" and hi.context_tokens == 0

        fact = client.observe(FACT, session_id="s1", previous=[GREETING], agent_id="a1")
        assert fact.action == "SAVE" and fact.decision.keep and fact.created
        assert fact.memory is not None and not fact.memory.archived
        assert fact.memory.context == GREETING  # the session's earlier turns
        assert (fact.memory.session_id, fact.memory.agent_id) == ("s1", "a1")
        assert fact.memory.metadata["policy"] == "SAVE" and fact.memory.metadata["policy_why"]

        asked = client.observe(QUESTION, session_id="s1", previous=[GREETING, FACT])
        d = asked.decision
        assert asked.action == "RETRIEVE" and d.trace.phase == 0 and d.trace.rule == "question"
        assert d.trace.keep_by  # what decided keeping the question too
        assert "Lisbon" in asked.context and asked.context_tokens > 0
        assert fact.memory.id in [r.id for r in asked.results]

        # The skipped turn is in the archive, never in the zones.
        assert hi.memory.id in [m.id for m in client.recent(20, archived=True)]
        assert hi.memory.id not in [m.id for m in client.recent(20)]
        assert client.get(hi.memory.id).archived

        dry = client.observe("Thanks!", session_id="s1", dry_run=True)
        assert dry.decision.dry_run and dry.decision.id == 0 and dry.memory is None
        assert dry.action == "SKIP" and not dry.created

        p = client.policy()
        assert p.decisions == {"SAVE": 1, "SKIP": 1, "RETRIEVE": 1}  # the dry run is not one
        assert p.total == 3 and sum(p.phases.values()) == 3
        assert p.phases["0"] == 1 and p.phases["1"] >= 1
        assert p.kept == 1 + asked.decision.keep
        assert [x.id for x in p.last] == [3, 2, 1]  # newest first
        assert [x.action for x in p.last] == ["RETRIEVE", "SAVE", "SKIP"]
        assert p.last[2].trace.rule == hi.decision.trace.rule
        assert len(p.fingerprint) == 64 and p.exploration == 0.0
        assert [x.id for x in client.policy(last=1).last] == [3]

        assert client.reset_policy() == 3
        after = client.policy()
        assert after.total == 0 and after.decisions == {"SAVE": 0, "SKIP": 0, "RETRIEVE": 0}
        assert after.last == [] and after.kept == 0 and after.rewards == 0
        assert client.get(fact.memory.id).content == FACT  # its memories stay
        assert client.reset_policy() == 0

    await asyncio.to_thread(turns)


async def test_the_async_client_observes_the_same(
    server: MemoryServer, aclient: AsyncCelestialClient,
) -> None:
    c = aclient.with_options(tenant="async")
    hi = await c.observe(GREETING, session_id="s")
    assert hi.action == "SKIP" and hi.decision.trace.phase == 1 and hi.decision.trace.rule
    assert hi.memory is not None and hi.memory.archived
    fact = await c.observe(FACT, session_id="s", previous=[GREETING])
    assert fact.decision.keep and fact.memory is not None and not fact.memory.archived
    asked = await c.observe(QUESTION, session_id="s", previous=[GREETING, FACT], limit=3,
                            max_tokens=200)
    assert asked.action == "RETRIEVE" and "Lisbon" in asked.context
    assert 0 < asked.context_tokens <= 200 and len(asked.results) <= 3
    archived = await c.recent(10, archived=True)
    assert [m.id for m in archived] == [hi.memory.id]
    p = await c.policy(last=5)
    assert p.decisions == {"SAVE": 1, "SKIP": 1, "RETRIEVE": 1}
    assert [d.action for d in p.last] == ["RETRIEVE", "SAVE", "SKIP"]
    assert await c.reset_policy() == 3
    assert (await c.policy()).total == 0
    # The other tenant's policy was never touched.
    assert (await aclient.policy()).total == 0


async def test_previous_must_be_turns_not_a_string(client: CelestialClient) -> None:
    with pytest.raises(TypeError, match="previous"):
        await asyncio.to_thread(client.observe, FACT, previous="Hi there!")


async def cli(server: MemoryServer, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = await asyncio.to_thread(
        main, ["--target", f"127.0.0.1:{server.port}", "--tenant", "cli", *argv])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


async def test_the_cli_observes_shows_the_policy_and_resets_it(
    server: MemoryServer, capsys: pytest.CaptureFixture[str],
) -> None:
    out = await cli(server, capsys, "observe", GREETING, "--session", "s")
    lines = out.splitlines()
    assert lines[0] == "decision     SKIP (#1)"
    assert lines[1].startswith("why          phase 1 (clear-case rules): ")
    assert lines[3].startswith("turn         archived ")
    skipped_id = lines[3].split()[2]

    out = await cli(server, capsys, "observe", FACT, "--session", "s", "--previous", GREETING)
    assert out.startswith("decision     SAVE (#2)\n") and "kept in " in out
    asked = json.loads(await cli(server, capsys, "observe", QUESTION, "--session", "s",
                                 "--previous", GREETING, "--previous", FACT, "--json"))
    # ObserveResponse's JSON mapping, as the HTTP port answers it.
    assert asked["decision"]["action"] == "TURN_ACTION_RETRIEVE"
    assert asked["decision"]["trace"]["phase"] == 0 and asked["decision"]["trace"]["keepBy"]
    assert "Lisbon" in asked["context"] and asked["contextTokens"] > 0
    assert asked["mergedInto"] == "" and asked["results"]
    assert asked["memory"]["context"] == f"{GREETING}\n{FACT}"

    # Text: the block after the decision, what a terminal would act on escaped.
    await cli(server, capsys, "observe", "Keep in mind: my locker code is 4312 \x1b[2J",
              "--session", "s")
    out = await cli(server, capsys, "observe", "What is my locker code?", "--session", "s")
    assert out.startswith("decision     RETRIEVE (#5)\n")
    assert "\\x1b[2J" in out and "\x1b" not in out
    assert "context      " in out and "locker code is 4312" in out

    dry = await cli(server, capsys, "observe", "Thanks!", "--dry-run")
    assert dry.startswith("decision     SKIP (dry run: nothing stored, recalled or learnt)")
    assert "turn " not in dry

    out = await cli(server, capsys, "policy", "--last", "2")
    assert out.startswith("decisions    5: SAVE 2, SKIP 1, RETRIEVE 2; kept ")
    assert "last decisions, newest first:" in out
    rows = out.split("last decisions, newest first:\n")[1].splitlines()
    assert [r.split()[0] for r in rows[2:]] == ["5", "4"]
    status = json.loads(await cli(server, capsys, "policy", "--json"))  # GetPolicyResponse
    assert status["decisions"] == {"SAVE": "2", "SKIP": "1", "RETRIEVE": "2"}  # int64: strings
    assert [d["id"] for d in status["last"]] == ["5", "4", "3", "2", "1"]
    assert status["last"][-1]["trace"]["rule"] and "rewardByRule" in status

    # The skipped turn is an archived memory like any other.
    out = await cli(server, capsys, "archived")
    assert skipped_id in out and GREETING in out
    archived = json.loads(await cli(server, capsys, "archived", "--json"))["memories"]
    assert [m["id"] for m in archived] == [skipped_id]
    assert archived[0]["metadata"]["policy"] == "SKIP"

    out = await cli(server, capsys, "policy", "--reset")
    assert out.strip() == "turn policy reset: the dropped policy had taken 5 decisions"
    assert json.loads(await cli(server, capsys, "policy", "--reset", "--json")) == {
        "decisions": "0"}
    out = await cli(server, capsys, "policy")
    assert out.startswith("decisions    0: SAVE 0, SKIP 0, RETRIEVE 0; kept 0")
    assert "last decisions" not in out


async def test_mcp_memory_auto_policy_decide_and_policy_status(server: MemoryServer) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from tests.integration.test_mcp import stdio

    async with Client(stdio(server), read_timeout_seconds=60) as mcp:
        tools = {t.name: t for t in (await mcp.list_tools()).tools}
        auto = tools["memory_auto"]
        assert auto.input_schema["required"] == ["text"]
        assert all(p.get("description") for p in auto.input_schema["properties"].values())
        assert auto.annotations is not None and auto.annotations.read_only_hint is False
        assert tools["policy_decide"].annotations.read_only_hint is True
        assert tools["policy_status"].annotations.read_only_hint is True

        hi = await mcp.call_tool("memory_auto", {"text": GREETING, "session_id": "m"})
        assert not hi.is_error
        data = hi.structured_content
        assert data["action"] == "SKIP" and data["decision"]["trace"]["phase"] == 1
        assert data["decision"]["trace"]["rule"] and data["memory"]["archived"] is True
        assert hi.content[0].text.startswith("SKIP: phase 1 (clear-case rules): ")
        assert "archived as" in hi.content[0].text

        fact = await mcp.call_tool("memory_auto", {"text": FACT, "session_id": "m",
                                                   "previous": [GREETING]})
        assert fact.structured_content["action"] == "SAVE"
        assert fact.structured_content["memory"]["archived"] is False

        dry = await mcp.call_tool("policy_decide", {"text": QUESTION, "session_id": "m"})
        assert dry.structured_content["action"] == "RETRIEVE"
        assert dry.structured_content["decision"]["dry_run"] is True
        assert dry.structured_content["memory"] is None and "dry run" in dry.content[0].text

        asked = await mcp.call_tool("memory_auto", {"text": QUESTION, "session_id": "m",
                                                    "previous": [GREETING, FACT]})
        data = asked.structured_content
        assert data["action"] == "RETRIEVE" and "Lisbon" in data["context"]
        assert data["context_tokens"] > 0 and data["results"]
        assert "Lisbon" in asked.content[0].text  # the block, for the model to read

        status = await mcp.call_tool("policy_status", {"last": 2})
        data = status.structured_content
        assert data["decisions"] == {"SAVE": 1, "SKIP": 1, "RETRIEVE": 1}
        assert [d["action"] for d in data["last"]] == ["RETRIEVE", "SAVE"]
        assert status.content[0].text.startswith("3 decisions (SAVE 1, SKIP 1, RETRIEVE 1)")

        bad = await mcp.call_tool("memory_auto", {"text": ""})
        assert bad.is_error and "text" in bad.content[0].text
