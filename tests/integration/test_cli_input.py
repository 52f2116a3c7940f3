"""Long texts into ``celestial store`` and ``update``: from a file (``--file``) or stdin (``-``),
through the ``celestial`` executable as a user runs it, against a real server. ``-`` is never
the one-character memory, and a text over the server's limit is refused naming the setting."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from celestial_memory.api.grpc.server import MemoryServer

from tests.integration.celestial_exe import write_celestial
from tests.processes import finished

NOTES = "Release checklist\n- tag the version\n- build the wheels\n- publish the notes\n"


async def run_celestial(exe: Path, *argv: str, stdin: bytes | int | None = None,
                        cwd: Path | None = None) -> tuple[int, str, str]:
    """``exe`` run with ``argv``; ``stdin``: bytes to pipe in, a file descriptor (a terminal),
    or None for an empty one. Returns (exit status, stdout, stderr)."""
    env: Mapping[str, str] = {**{k: v for k, v in os.environ.items()
                                 if not k.startswith("CELESTIAL_")}, "HF_HUB_OFFLINE": "1"}
    proc = await asyncio.create_subprocess_exec(
        str(exe), *argv, cwd=cwd, env=env,
        stdin=stdin if isinstance(stdin, int) else asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    # A generous bound: only a command that hangs on its input comes near it.
    out, err = await finished(proc, 120, stdin if isinstance(stdin, bytes) else None)
    return proc.returncode or 0, out.decode(), err.decode()


class Celestial:
    """The executable, pointed at ``server``."""

    def __init__(self, server: MemoryServer, tmp_path: Path) -> None:
        self.exe = write_celestial(tmp_path / "bin")
        self.target = f"127.0.0.1:{server.port}"
        self.cwd = tmp_path

    async def run(self, *argv: str, stdin: bytes | int | None = None) -> tuple[int, str, str]:
        return await run_celestial(self.exe, "--target", self.target, *argv, stdin=stdin,
                                   cwd=self.cwd)

    async def json(self, *argv: str, stdin: bytes | None = None) -> Any:
        code, out, err = await self.run(*argv, "--json", stdin=stdin)
        assert code == 0, err
        return json.loads(out)

    async def contents(self) -> list[str]:
        return [m["content"] for m in (await self.json("list"))["memories"]]


@pytest.fixture
def celestial(server: MemoryServer, tmp_path: Path) -> Celestial:
    return Celestial(server, tmp_path)


async def test_store_and_update_read_a_file_or_stdin(
    celestial: Celestial, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text(NOTES, encoding="utf-8")
    kept = NOTES.rstrip("\n")  # the file's last line break is not part of the text
    from_file = (await celestial.json("store", "--file", "notes.txt", "--tag", "release"))
    assert from_file["memory"]["content"] == kept
    assert from_file["memory"]["tags"] == ["release"]
    piped = await celestial.json("store", "-", stdin=b"Dana announces it on Friday\n")
    assert piped["memory"]["content"] == "Dana announces it on Friday"
    also_piped = await celestial.json("store", "--file", "-",
                                      stdin="Ask Zoë for the café keys".encode())
    assert also_piped["memory"]["content"] == "Ask Zoë for the café keys"

    mid = from_file["memory"]["id"]
    (tmp_path / "notes.txt").write_text(NOTES + "- tell the team\n", encoding="utf-8")
    updated = await celestial.json("update", mid, "--file", str(tmp_path / "notes.txt"))
    assert updated["memory"]["id"] == mid
    assert updated["memory"]["content"] == kept + "\n- tell the team"
    updated = await celestial.json("update", mid, "--content", "-",
                                   stdin=b"Release checklist: done")
    assert updated["memory"]["content"] == "Release checklist: done"
    assert sorted(await celestial.contents()) == sorted(
        ["Release checklist: done", "Dana announces it on Friday", "Ask Zoë for the café keys"])


async def test_a_dash_is_never_stored_as_the_text(celestial: Celestial) -> None:
    main, terminal = os.openpty()
    try:
        for argv in (["store", "-"], ["store", "--", "-"], ["store", "--file", "-"]):
            code, out, err = await celestial.run(*argv, stdin=terminal)
            assert (code, out) == (2, ""), err
            assert "stdin is a terminal" in err and "--file FILE" in err
        stored = (await celestial.json("store", "a note"))["memory"]["id"]
        code, _, err = await celestial.run("update", stored, "--content", "-", stdin=terminal)
        assert code == 2 and "stdin is a terminal" in err
    finally:
        os.close(main)
        os.close(terminal)
    code, _, err = await celestial.run("store", "-", stdin=b"")
    assert code == 2 and "stdin is empty" in err
    code, _, err = await celestial.run("store", "-", stdin=b"\n\n")
    assert code == 2 and "stdin is empty" in err
    assert await celestial.contents() == ["a note"]


async def test_input_mistakes_are_usage_errors(celestial: Celestial, tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (tmp_path / "notes.txt").write_text(NOTES)
    for argv, says in [
        (["store", "text", "--file", "notes.txt"], "not both"),
        (["store"], "no text"),
        (["store", "--file", "absent.txt"], "cannot read absent.txt"),
        (["store", "--file", "empty.txt"], "empty.txt is empty"),
        (["store", "--file", "latin1.txt"], "latin1.txt is not UTF-8"),
        (["update", "00000000-0000-0000-0000-000000000000", "--content", "x", "--file",
          "notes.txt"], "not both"),
    ]:
        code, out, err = await celestial.run(*argv)
        assert (code, out) == (2, ""), argv
        assert err.startswith("error (USAGE)") and says in err, (argv, err)
        code, _, err = await celestial.run(*argv, "--json")
        assert code == 2 and says in json.loads(err)["error"]["message"]
    assert await celestial.contents() == []


async def test_a_text_over_the_limit_names_the_setting_that_raises_it(
    celestial: Celestial, tmp_path: Path
) -> None:
    (tmp_path / "at_limit.txt").write_text("a" * 32_768)
    (tmp_path / "over_limit.txt").write_text("a" * 32_769)
    assert len((await celestial.json("store", "--file", "at_limit.txt"))["memory"]["content"]) == (
        32_768)
    code, out, err = await celestial.run("store", "--file", "over_limit.txt")
    assert (code, out) == (1, "")
    assert "INVALID_ARGUMENT" in err and "at most 32768 characters, got 32769" in err
    assert "CELESTIAL_MAX_CONTENT_CHARS" in err
