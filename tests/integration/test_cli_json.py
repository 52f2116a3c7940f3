"""``celestial --json``: every command's output parsed as JSON, against a real server (a call of
the contract answers its response in the contract's JSON mapping, test_cli_http_json.py), the
exit statuses scripts branch on, and usage errors as JSON documents too."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from celestial_client.cli import main
from celestial_memory.access.keys import create_key
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.clock import ManualClock
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder

from tests.certs import CertificateAuthority
from tests.integration.celestial_exe import write_celestial
from tests.integration.conftest import running_server
from tests.integration.test_cli_input import run_celestial

DAY = 86_400.0
ZONES = ["ZONE_CORE", "ZONE_INNER", "ZONE_OUTER", "ZONE_BELT", "ZONE_CLOUD"]


def when(rfc3339: str) -> datetime:
    return datetime.fromisoformat(rfc3339)


class Cli:
    def __init__(self, server: MemoryServer, capsys: pytest.CaptureFixture[str]) -> None:
        self.target = f"127.0.0.1:{server.port}"
        self.capsys = capsys

    async def run(self, *argv: str) -> tuple[int, str, str]:
        code = await asyncio.to_thread(main, [*argv, "--target", self.target, "--json"])
        out = self.capsys.readouterr()
        return code, out.out, out.err

    async def json(self, *argv: str, status: int = 0) -> Any:
        code, out, err = await self.run(*argv)
        assert code == status, err
        return json.loads(out)


async def test_every_client_command_answers_json(
    server: MemoryServer, capsys: pytest.CaptureFixture[str], clock: ManualClock, tmp_path: Path
) -> None:
    cli = Cli(server, capsys)
    a = (await cli.json("store", "Caroline moved to Lisbon in June", "--tag", "travel",
                        "--meta", "src=cli", "--importance", "0.6"))["memory"]
    assert a["content"].startswith("Caroline") and a["tags"] == ["travel"]
    assert a["metadata"] == {"src": "cli"} and a["zone"] == "ZONE_OUTER"
    assert a["nextMove"]["zone"] == "ZONE_BELT"
    assert when(a["nextMove"]["at"]) > when(a["createdAt"])
    clock.advance(1)  # recent: newest first
    b = (await cli.json("store", "The build server lives in Frankfurt", "--importance",
                        "0.1"))["memory"]
    clock.advance(1)
    c = (await cli.json("store", "Remember to water the plants", "--importance",
                        "0.1"))["memory"]

    found = await cli.json("recall", "where did Caroline move?", "--limit", "1")
    assert [r["memory"]["id"] for r in found["results"]] == [a["id"]]

    listed = await cli.json("list")
    assert sorted(m["id"] for m in listed["memories"]) == sorted([a["id"], b["id"], c["id"]])
    assert listed["nextPageToken"] == ""
    first = await cli.json("list", "--limit", "2")
    rest = await cli.json("list", "--page-token", first["nextPageToken"])
    assert len(first["memories"]) == 2 and first["nextPageToken"]
    assert [m["id"] for m in first["memories"] + rest["memories"]] == [
        m["id"] for m in listed["memories"]]
    assert [m["id"] for m in (await cli.json("list", "--tag", "travel"))["memories"]] == [a["id"]]
    recent = await cli.json("recent", "--limit", "2")
    assert [m["id"] for m in recent["memories"]] == [c["id"], b["id"]]

    got = (await cli.json("get", a["id"]))["memory"]
    assert got["recallCount"] == "1"  # int64, a string in the JSON mapping
    assert ZONES.index(got["nextMove"]["zone"]) == ZONES.index(got["zone"]) + 1
    pinned = (await cli.json("update", a["id"], "--pin"))["memory"]
    assert pinned["pinned"] is True and "nextMove" not in pinned

    rel = await cli.json("relate", a["id"], b["id"], "about", "--weight", "0.5")
    assert rel["relation"]["relation"] == "about" and rel["relation"]["weight"] == 0.5
    walk = await cli.json("related", a["id"])
    assert [m["memory"]["id"] for m in walk["memories"]] == [b["id"]]
    gone = await cli.json("unrelate", a["id"], b["id"], "about")
    assert gone["removed"] == 1
    assert (await cli.json("unrelate", a["id"], b["id"], status=3))["removed"] == 0
    entities = (await cli.json("entities"))["entities"]
    assert "name:caroline" in [e["id"] for e in entities]
    profile = (await cli.json("entities", "name:caroline"))["profile"]
    assert profile["entity"]["mentions"] == "1"

    stats = await cli.json("stats")
    assert stats["total"] == "3" and [z["zone"] for z in stats["zones"]] == ZONES
    assert stats["zones"][0]["count"] == "0"  # zero fields are there
    clock.advance(DAY)
    dry = await cli.json("rebalance", "--dry-run")
    # b and c (a is pinned), stored in the belt (importance 0.1).
    assert dry["dryRun"] is True and dry["moved"] == [
        {"fromZone": "ZONE_BELT", "toZone": "ZONE_CLOUD", "count": "2"}]
    assert (await cli.json("consolidate"))["dryRun"] is True
    assert (await cli.json("ledger"))["events"] == []

    assert (await cli.json("delete", c["id"]))["deleted"] is True
    assert (await cli.json("delete", c["id"], status=3))["deleted"] is False

    # Forgotten into the archive, listed there, and back.
    clock.advance(100 * DAY)
    assert (await cli.json("rebalance"))["forgotten"] == "1"  # b; a is pinned
    assert [m["id"] for m in (await cli.json("archived"))["memories"]] == [b["id"]]
    assert [m["id"] for m in (await cli.json("list", "--archived"))["memories"]] == [b["id"]]
    assert (await cli.json("ledger"))["events"][-1]["kind"] == "ZONE_EVENT_KIND_FORGOTTEN"
    assert (await cli.json("restore", b["id"]))["memory"]["archived"] is False

    dump = tmp_path / "dump.bin"
    assert (await cli.json("export", str(dump)))["exported"] == 2
    done = await cli.json("import", str(dump))
    assert done["imported"] == 0 and done["skipped"] == 2

    config = await cli.json("config")
    assert config["client"]["target"] == {"value": cli.target, "source": "flag",
                                          "env": "CELESTIAL_TARGET"}
    assert config["serve"]["address"]["source"] in ("default", "env")  # what serve would use
    running = {s["name"]: s for s in config["server"]["settings"]}  # the server's GetConfig
    assert config["server_error"] is None
    assert running["rebalance_interval_s"] == {  # running_server's own setting
        "name": "rebalance_interval_s", "value": "0.0", "source": "CONFIG_SOURCE_FLAG",
        "env": "CELESTIAL_REBALANCE_INTERVAL_S", "secret": False}


async def test_errors_have_exit_statuses_and_a_json_document(
    server: MemoryServer, capsys: pytest.CaptureFixture[str]
) -> None:
    cli = Cli(server, capsys)
    code, out, err = await cli.run("get", "00000000-0000-0000-0000-000000000000")
    assert (code, out) == (3, "")
    assert json.loads(err)["error"]["code"] == "NOT_FOUND"
    code, _, err = await cli.run("store", "  ")
    assert code == 1 and json.loads(err)["error"]["code"] == "INVALID_ARGUMENT"


async def test_a_key_that_may_not_is_exit_5(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock,
    capsys: pytest.CaptureFixture[str],
) -> None:
    keys = tmp_path / "keys.json"
    reader = create_key(keys, "reader", "read", ["a"])[1]
    key_file = tmp_path / "reader.key"
    key_file.write_text(reader + "\n")
    async with running_server(tmp_path / "data", embedder, clock, api_keys_file=keys) as srv:
        cli = Cli(srv, capsys)
        assert (await cli.json("--tenant", "a", "--api-key-file", str(key_file), "stats"))[
            "total"] == "0"
        code, _, err = await cli.run("--tenant", "a", "--api-key-file", str(key_file), "store",
                                     "a note")
        assert code == 5 and json.loads(err)["error"]["code"] == "PERMISSION_DENIED"
        code, _, err = await cli.run("--tenant", "a", "stats")  # no key at all
        assert code == 5 and json.loads(err)["error"]["code"] == "UNAUTHENTICATED"
    listed = json.loads(await _keys(capsys, "--file", str(keys), "list", "--json"))
    assert [k["name"] for k in listed["keys"]] == ["reader"]
    assert "sha256" not in listed["keys"][0] and listed["keys"][0]["state"] == "active"


async def _keys(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert await asyncio.to_thread(main, ["keys", *argv]) == 0
    return capsys.readouterr().out


async def test_eval_answers_json(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock,
    capsys: pytest.CaptureFixture[str],
) -> None:
    conversation = {
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a grey cat called Miso."},
            {"speaker": "Bo", "dia_id": "D1:2", "text": "My train to Porto leaves at noon."},
        ],
        "qa": [{"question": "What is the name of Ann's cat?", "evidence": ["D1:1"],
                "category": 4}],
    }
    data = tmp_path / "conv.json"
    data.write_text(json.dumps(conversation))
    async with running_server(tmp_path / "data", embedder, clock, admin_clock=True) as srv:
        report = await Cli(srv, capsys).json("eval", "locomo", str(data), "--k", "1")
    assert report["benchmark"] == "locomo" and report["k"] == [1]
    assert report["settings"]["hybrid"]["R@1"] == 1.0


async def test_tls_from_flags_or_from_the_environment(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    ca = CertificateAuthority(tmp_path / "pki")
    cert = ca.issue("server", "localhost", server=True)
    async with running_server(tmp_path / "d", embedder, clock, tls_cert=cert.cert,
                              tls_key=cert.key) as srv:
        target = f"localhost:{srv.port}"

        async def stats(*argv: str) -> tuple[int, str]:
            code = await asyncio.to_thread(main, [*argv, "stats", "--json"])
            out = capsys.readouterr()
            return code, out.out or out.err

        code, out = await stats("--target", target, "--tls-ca", str(ca.cert))
        assert code == 0 and json.loads(out)["total"] == "0"
        monkeypatch.setenv("CELESTIAL_TARGET", target)
        monkeypatch.setenv("CELESTIAL_TLS_CA", str(ca.cert))
        code, out = await stats()
        assert code == 0 and json.loads(out)["total"] == "0"
        config = await asyncio.to_thread(main, ["config", "--json"])
        client = json.loads(capsys.readouterr().out)["client"]
        assert config == 0 and client["tls_ca"] == {
            "value": str(ca.cert), "source": "env", "env": "CELESTIAL_TLS_CA"}
        monkeypatch.delenv("CELESTIAL_TLS_CA")
        code, out = await stats()  # plaintext on the TLS port: unreachable, with the hint
        assert code == 4 and "--tls-ca" in json.loads(out)["error"]["message"]
        code, out = await stats("--tls-ca", str(tmp_path / "absent.pem"))
        assert code == 2 and "absent.pem" in json.loads(out)["error"]["message"]


@pytest.mark.parametrize(("argv", "says"), [
    (["--json", "recall"], "celestial recall: the following arguments are required: query"),
    (["stats", "--no-such-flag", "--json"], "unrecognized arguments: --no-such-flag"),
    (["list", "--json", "--zone", "mars"], "argument --zone: invalid choice: 'mars'"),
    (["--json", "no-such-command"], "invalid choice: 'no-such-command'"),
])
async def test_usage_errors_with_json_are_json_documents(
    argv: list[str], says: str, tmp_path: Path
) -> None:
    exe = write_celestial(tmp_path / "bin")
    code, out, err = await run_celestial(exe, *argv)
    assert (code, out) == (2, "")
    error = json.loads(err)["error"]
    assert error["code"] == "USAGE" and error["exit"] == 2 and says in error["message"], err
    # Without --json, argparse's own usage text, with the same status.
    code, out, err = await run_celestial(exe, *[a for a in argv if a != "--json"])
    assert (code, out) == (2, "") and err.startswith("usage: celestial")
