"""The ``celestial`` CLI against a real server (run in a worker thread: it blocks)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from celestial_client.cli import dump_file, main
from celestial_memory.api.grpc.server import MemoryServer

from tests.integration.celestial_exe import write_celestial
from tests.integration.test_cli_input import run_celestial


async def cli(server: MemoryServer, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = await asyncio.to_thread(main, ["--target", f"127.0.0.1:{server.port}", *argv])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


async def test_cli_round_trip(server: MemoryServer, capsys: pytest.CaptureFixture[str]) -> None:
    out = await cli(server, capsys, "store", "The team offsite is in Lisbon in June",
                    "--importance", "0.8", "--tag", "travel", "--meta", "src=cli")
    assert "zone         outer" in out and "tags         travel" in out
    memory_id = out.split()[1]
    out = await cli(server, capsys, "recall", "where is the offsite?")
    header, _, first = out.splitlines()[:3]
    assert header.split()[:4] == ["#", "zone", "relev", "score"]
    assert "Lisbon" in first and memory_id in first
    out = await cli(server, capsys, "get", memory_id)
    assert "recalled     1 times" in out and "src=cli" in out
    out = await cli(server, capsys, "rebalance", "--dry-run", "--full")
    assert out.startswith("scanned 1") and "would move" in out
    out = await cli(server, capsys, "update", memory_id, "--pin")
    assert "pinned True" in out
    out = await cli(server, capsys, "rebalance", "--dry-run", "--full")
    assert out.startswith("scanned 0")  # a pinned memory never moves, so it is not read
    out = await cli(server, capsys, "stats")
    assert out.splitlines()[2].split()[:3] == ["core", "0", "20"]
    assert "total 1" in out and "backend edge" in out
    assert (await cli(server, capsys, "ledger")).strip() == "no events"
    assert (await cli(server, capsys, "delete", memory_id)).strip() == "deleted"


async def test_cli_reports_errors(server: MemoryServer, capsys: pytest.CaptureFixture[str]) -> None:
    code = await asyncio.to_thread(
        main, ["--target", f"127.0.0.1:{server.port}", "store", "  "]
    )
    assert code == 1
    assert "INVALID_ARGUMENT" in capsys.readouterr().err


async def test_cli_export_resume_and_import(
    server: MemoryServer, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for i in range(5):
        await cli(server, capsys, "--tenant", "src", "store", f"note {i}", "--tag", "t")
    dump = tmp_path / "src.bin"
    out = await cli(server, capsys, "--tenant", "src", "export", str(dump))
    assert "exported 5 memories" in out
    full = dump.read_bytes()
    # A broken export: two records and half of the third. --resume finishes it.
    count = dump_file.last_complete(dump)[0]
    cut = [pos for pos, _ in dump_file._records(dump)][1] + 10
    dump.write_bytes(full[:cut])
    assert dump_file.last_complete(dump)[0] == 2
    out = await cli(server, capsys, "--tenant", "src", "export", str(dump), "--resume")
    assert "exported 5 memories" in out and dump.read_bytes() == full and count == 5
    # Lose two memories, then restore them from the file (ids are global, so a file goes back
    # to its own tenant here; another tenant would be refused).
    ids = [r.memory.id for r in dump_file.read(dump)]
    for mid in ids[:2]:
        await cli(server, capsys, "--tenant", "src", "delete", mid)
    assert "total 3" in await cli(server, capsys, "--tenant", "src", "stats")
    out = await cli(server, capsys, "--tenant", "src", "import", str(dump))
    assert "imported 2 memories" in out  # the three still there are skipped
    out = await cli(server, capsys, "--tenant", "src", "import", str(dump), "--skip", "3")
    assert "imported 0 memories" in out  # idempotent: nothing doubled
    assert "total 5" in await cli(server, capsys, "--tenant", "src", "stats")
    code = await asyncio.to_thread(main, ["--target", f"127.0.0.1:{server.port}", "--tenant",
                                          "dst", "import", str(dump)])
    assert code == 1 and "ALREADY_EXISTS" in capsys.readouterr().err


async def test_no_server_says_how_to_start_one(tmp_path: Path) -> None:
    exe = write_celestial(tmp_path / "bin")
    code, out, err = await run_celestial(exe, "--target", "127.0.0.1:1", "stats")
    assert (code, out) == (4, "")
    assert err.startswith("error (UNAVAILABLE)") and "target 127.0.0.1:1, from flag" in err
    assert "start one with `make run` or `celestial serve`" in err
    code, _, err = await run_celestial(exe, "--target", "127.0.0.1:1", "stats", "--json")
    assert code == 4 and "celestial serve" in json.loads(err)["error"]["message"]


async def test_cli_recall_filters_as_store_labels(
    server: MemoryServer, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = {}
    for name, session, agent, src in (("a", "s1", "bot", "cli"), ("b", "s2", "bot", "web"),
                                      ("c", "s1", "other", "web")):
        out = await cli(server, capsys, "store", f"The offsite note {name} is about Lisbon",
                        "--session", session, "--agent", agent, "--meta", f"src={src}")
        ids[name] = out.split()[1]

    async def found(*flags: str) -> set[str]:
        out = await cli(server, capsys, "recall", "offsite in Lisbon", "--json",
                        "--no-reinforce", *flags)
        return {r["memory"]["id"] for r in json.loads(out)["results"]}

    assert await found() == set(ids.values())
    assert await found("--session", "s1") == {ids["a"], ids["c"]}
    assert await found("--agent", "bot") == {ids["a"], ids["b"]}
    assert await found("--meta", "src=web") == {ids["b"], ids["c"]}
    assert await found("--session", "s1", "--agent", "other", "--meta", "src=web") == {ids["c"]}
    code = await asyncio.to_thread(main, ["--target", f"127.0.0.1:{server.port}", "recall",
                                          "offsite", "--meta", "src"])
    assert code == 2 and "--meta wants key=value" in capsys.readouterr().err
