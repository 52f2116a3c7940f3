"""GetConfig and ``celestial config``: a running server reports the settings it runs with, each
with where its value came from when it started (flag, env, default), and never a secret's value;
only an admin key for every tenant may ask, over gRPC and Connect JSON alike. ``celestial
config`` prints the running server's settings beside the local parts, and says in one line why
it cannot when the server is not there or the key may not ask."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from celestial_client import AsyncCelestialClient, PermissionDeniedError
from celestial_client.cli import main
from celestial_client.v1 import memory_pb2 as pb
from celestial_memory.access.keys import create_key
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.clock import ManualClock
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder

from tests.integration.conftest import TRANSPORTS, running_server, stub_over
from tests.processes import free_port, start, stop

SECRET = "sk-llm-5f1e0c9a-never-shown"


class Keys:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.admin = create_key(path, "ops", "admin", ["*"])[1]
        self.a_admin = create_key(path, "a-ops", "admin", ["a"])[1]
        self.a_read = create_key(path, "a-read", "read", ["a"])[1]
        self.a_write = create_key(path, "a-write", "write", ["a"])[1]


@pytest.fixture
def keys(tmp_path: Path) -> Keys:
    return Keys(tmp_path / "keys.json")


@pytest.fixture
async def secured(tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock,
                  keys: Keys, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[MemoryServer]:
    """A server started with two settings from the environment, one of them a secret; the
    settings running_server passes in are its flags."""
    for name in ("CELESTIAL_MAX_TAGS", "CELESTIAL_LLM_API_KEY", "CELESTIAL_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CELESTIAL_MAX_TAGS", "32")
    monkeypatch.setenv("CELESTIAL_LLM_API_KEY", SECRET)
    async with running_server(tmp_path / "data", embedder, clock, api_keys_file=keys.path,
                              http_address="127.0.0.1:0") as srv:
        monkeypatch.setenv("CELESTIAL_MAX_TAGS", "64")  # after the start: not the server's
        yield srv


def auth(key: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {key}"),)


async def code_of(call: Any) -> grpc.StatusCode:
    try:
        await call
    except grpc.aio.AioRpcError as err:
        return err.code()
    return grpc.StatusCode.OK


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_admin_sees_each_setting_with_its_source_and_no_secret(
    secured: MemoryServer, keys: Keys, transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="celestial_memory.audit")
    async with stub_over(transport, secured) as stub:
        answer = await stub.GetConfig(pb.GetConfigRequest(), metadata=auth(keys.admin))
    got = {s.name: s for s in answer.settings}
    assert (got["max_tags"].value, got["max_tags"].source) == ("32", pb.CONFIG_SOURCE_ENV)
    assert got["max_tags"].env == "CELESTIAL_MAX_TAGS" and not got["max_tags"].secret
    key = got["llm_api_key"]
    assert (key.value, key.source, key.secret) == ("set", pb.CONFIG_SOURCE_ENV, True)
    assert got["qdrant_api_key"].value == "" and got["qdrant_api_key"].secret  # not set
    files = got["api_keys_file"]
    assert (json.loads(files.value), files.source) == (str(keys.path), pb.CONFIG_SOURCE_FLAG)
    assert (got["backend"].value, got["backend"].source) == ('"edge"', pb.CONFIG_SOURCE_DEFAULT)
    assert SECRET.encode() not in answer.SerializeToString()
    audited = [json.loads(r.getMessage()) for r in caplog.records
               if r.name == "celestial_memory.audit"]
    assert [(a["event"], a["tenant"]) for a in audited if a.get("method") == "GetConfig"] == [
        ("admin", "")]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_only_an_admin_key_for_every_tenant_may_ask(
    secured: MemoryServer, keys: Keys, transport: str
) -> None:
    async with stub_over(transport, secured) as stub:
        for key in (keys.a_read, keys.a_write, keys.a_admin):
            call = stub.GetConfig(pb.GetConfigRequest(), metadata=auth(key))
            assert await code_of(call) == grpc.StatusCode.PERMISSION_DENIED
        assert await code_of(stub.GetConfig(pb.GetConfigRequest())) == \
            grpc.StatusCode.UNAUTHENTICATED


async def test_the_python_client_reads_typed_settings(secured: MemoryServer, keys: Keys) -> None:
    target = f"127.0.0.1:{secured.port}"
    async with AsyncCelestialClient(target, api_key=keys.admin) as c:
        config = await c.server_config()
    assert (config["max_tags"].value, config["max_tags"].source) == (32, "env")
    assert config["zone_capacities"].value == [20, 100, 1000, 0, 0]
    assert config["api_keys_file"].source == "flag" and config["backend"].source == "default"
    assert config["llm_api_key"].value == "set" and config["llm_api_key"].secret
    assert config["otlp_endpoint"].value == "" and config["reinforce_flush_ms"].value is None
    async with AsyncCelestialClient(target, api_key=keys.a_read) as c:
        with pytest.raises(PermissionDeniedError):
            await c.server_config()


def row(text: str, name: str) -> list[str]:
    """The cells of the row of the setting ``name`` in a table of ``text``."""
    match = re.search(rf"^{re.escape(name)}\s.*$", text, re.M)
    assert match, (name, text)
    return match[0].split()


def part(text: str, title: str) -> str:
    """The part of ``celestial config``'s text that opens with ``title``, up to the next."""
    start = text.index(title)
    end = text.find("\n\n", start)
    return text[start:] if end < 0 else text[start:end]


async def config(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = await asyncio.to_thread(main, [*argv, "config"])
    out = capsys.readouterr()
    assert out.err == ""
    return code, out.out


async def test_celestial_config_prints_the_running_servers_settings(
    secured: MemoryServer, keys: Keys, capsys: pytest.CaptureFixture[str]
) -> None:
    target = f"127.0.0.1:{secured.port}"
    code, text = await config(capsys, "--target", target, "--api-key", keys.admin)
    assert code == 0 and SECRET not in text
    server = part(text, f"server (running at {target}: ")
    assert row(server, "max_tags") == ["max_tags", "32", "env", "CELESTIAL_MAX_TAGS"]
    assert row(server, "llm_api_key") == ["llm_api_key", "<redacted>", "env",
                                          "CELESTIAL_LLM_API_KEY"]
    assert row(server, "api_keys_file")[2] == "flag"
    # The local part is labelled as what a new serve would use: this environment now.
    local = part(text, "serve (what `celestial serve` would use here")
    assert "not the running server" in local.splitlines()[0]
    assert row(local, "max_tags")[1:3] == ["64", "env"]
    assert text.index("client (") < text.index("serve (") < text.index("server (")

    code, out = await config(capsys, "--target", target, "--api-key", keys.admin, "--json")
    document = json.loads(out)
    assert code == 0 and set(document) == {"client", "serve", "server", "server_error"}
    assert document["server_error"] is None
    settings = {s["name"]: s for s in document["server"]["settings"]}  # the contract's JSON
    assert settings["max_tags"] == {"name": "max_tags", "value": "32",
                                    "source": "CONFIG_SOURCE_ENV", "env": "CELESTIAL_MAX_TAGS",
                                    "secret": False}
    assert settings["llm_api_key"]["value"] == "set" and SECRET not in out
    assert document["serve"]["max_tags"] == {"value": 64, "source": "env",
                                             "env": "CELESTIAL_MAX_TAGS"}


async def test_celestial_config_says_why_it_shows_no_server_and_prints_the_rest(
    secured: MemoryServer, keys: Keys, capsys: pytest.CaptureFixture[str]
) -> None:
    target = f"127.0.0.1:{secured.port}"
    code, text = await config(capsys, "--target", target, "--api-key", keys.a_read)
    line = next(x for x in text.splitlines() if x.startswith("server ("))
    assert code == 0 and line.startswith(f"server (running at {target}): not shown "
                                         "(PERMISSION_DENIED: ")
    assert text.rstrip().endswith(line)  # one line, and the local parts above it
    assert "client (this command's connection)" in text and "serve (" in text
    code, out = await config(capsys, "--target", target, "--api-key", keys.a_read, "--json")
    document = json.loads(out)
    assert document["server"] is None and document["server_error"]["code"] == "PERMISSION_DENIED"
    assert document["client"]["target"]["value"] == target and document["serve"] is not None

    gone = f"127.0.0.1:{free_port()}"  # nothing listens there
    code, text = await config(capsys, "--target", gone)
    assert code == 0 and f"server (running at {gone}): not reached (UNAVAILABLE: " in text
    assert text.rstrip().splitlines()[-1].startswith("server (") and "serve (" in text
    code, out = await config(capsys, "--target", gone, "--json")
    assert json.loads(out)["server_error"]["code"] == "UNAVAILABLE"


async def test_a_served_process_reports_its_flags_and_its_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``celestial serve`` as a process: its flags (--address, --data-dir) are flags, what its
    environment set is env; the server is stopped whatever the test's outcome."""
    port = free_port()
    proc = start(tmp_path / "data", port, CELESTIAL_MAX_TAGS="32",
                 CELESTIAL_LLM_API_KEY=SECRET)
    try:
        code, out = await config(capsys, "--target", f"127.0.0.1:{port}", "--json")
    finally:
        stop(proc)
    assert code == 0 and SECRET not in out
    settings = {s["name"]: s for s in json.loads(out)["server"]["settings"]}
    assert settings["address"]["source"] == "CONFIG_SOURCE_FLAG"
    assert settings["address"]["value"] == json.dumps(f"127.0.0.1:{port}")
    assert settings["data_dir"]["source"] == "CONFIG_SOURCE_FLAG"
    assert settings["max_tags"]["source"] == "CONFIG_SOURCE_ENV"
    assert settings["rebalance_interval_s"] == {
        "name": "rebalance_interval_s", "value": "0.0", "source": "CONFIG_SOURCE_ENV",
        "env": "CELESTIAL_REBALANCE_INTERVAL_S", "secret": False}
    assert settings["llm_api_key"]["value"] == "set"
    assert settings["merge_repeats"]["source"] == "CONFIG_SOURCE_DEFAULT"
