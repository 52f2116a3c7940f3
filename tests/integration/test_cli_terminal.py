"""What ``celestial`` prints is safe to print: stored content (anyone's input) reaches the
terminal with its control sequences escaped, in text and in JSON alike, and ``celestial config``
never shows a password or a credential a URL carries."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from celestial_client import AsyncCelestialClient
from celestial_client.cli import main
from celestial_client.cli.output import as_json, printable
from celestial_memory.api.grpc.server import MemoryServer

from tests.integration.test_cli_input import Celestial

# Clear the screen, retitle the window, write the clipboard (OSC 52), an 8-bit CSI, a carriage
# return that overwrites the line and a right-to-left override.
HOSTILE = ("note \x1b[2J cleared \x1b]0;owned\x07 titled "
           "\x1b]52;c;ZWNobyBwd25lZA==\x07 clip \x9b31m red \r back \u202e desrever")


async def _run(server: MemoryServer, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = await asyncio.to_thread(main, ["--target", f"127.0.0.1:{server.port}", *argv])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def _unsafe(text: str) -> list[str]:
    return [c for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f
            or c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"]


async def test_get_recall_and_list_show_control_sequences_escaped(
    server: MemoryServer, capsys: pytest.CaptureFixture[str]
) -> None:
    out = await _run(server, capsys, "store", HOSTILE, "--tag", "t")
    mid = out.split()[1]
    assert _unsafe(out) == []
    for argv in (("get", mid), ("recall", "note cleared titled"), ("list",), ("recent",)):
        out = await _run(server, capsys, *argv)
        assert _unsafe(out) == [], argv
    out = await _run(server, capsys, "get", mid)
    assert "\\x1b[2J" in out and "\\x1b]52;c;" in out and "\\x07" in out and "\\u202e" in out
    # --json keeps the exact text, every unsafe character escaped as JSON writes escapes.
    out = await _run(server, capsys, "--json", "get", mid)
    assert _unsafe(out) == [] and "\\u009b31m" in out and "\\u202e" in out
    assert json.loads(out)["memory"]["content"] == HOSTILE


async def test_the_executable_escapes_c1_controls_in_json_as_in_text(
    server: MemoryServer, aclient: AsyncCelestialClient, tmp_path: Path
) -> None:
    mid = (await aclient.store(HOSTILE)).id
    celestial = Celestial(server, tmp_path)
    code, out, err = await celestial.run("--tenant", "it", "--json", "get", mid)
    assert code == 0, err
    assert _unsafe(out) == [] and "clip \\u009b31m red" in out
    assert json.loads(out)["memory"]["content"] == HOSTILE
    code, out, err = await celestial.run("--tenant", "it", "get", mid)
    assert code == 0, err
    assert _unsafe(out) == [] and "clip \\x9b31m red" in out


def test_json_escapes_what_the_text_escapes_and_decodes_to_the_same_text() -> None:
    doc = {"memory": {"content": HOSTILE, "tags": ["\x85next line", "zero\u200bwidth"],
                      "metadata": {"key\u2028": "\x7f\ufeff"}}}
    out = as_json(doc)
    assert _unsafe(out) == [] and printable(out) == out  # nothing left for a terminal to act on
    for escaped in ("\\u009b", "\\u0085", "\\u007f", "\\u200b", "\\u2028", "\\ufeff"):
        assert escaped in out
    assert json.loads(out) == doc
    ordinary = "Tabs\tand\nnewlines, Hangul 한국어, emoji 🎉, accents café"
    assert ordinary in json.loads(as_json({"t": ordinary}))["t"]
    assert "한국어, emoji 🎉, accents café" in as_json({"t": ordinary})  # shown, not escaped


def test_printable_leaves_ordinary_text_alone() -> None:
    text = "Tabs\tand\nnewlines, Hangul 한국어, emoji 🎉, accents café, C:\\Users"
    assert printable(text) == text
    assert printable("\x1b[2J") == "\\x1b[2J"
    for c in "\u200e\u200f\u061c\ufeff\u2028\u2029\u200b\u2066":  # marks, BOM, separators
        assert printable(f"a{c}b") == f"a\\u{ord(c):04x}b"


@pytest.mark.parametrize("variable", ["CELESTIAL_LLM_BASE_URL", "CELESTIAL_QDRANT_URL"])
def test_config_never_shows_a_password_in_a_url(
    variable: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(variable, "https://user:s3cretPass@models.example:8443/v1?api_key=k3y&x=1")
    for argv in (["config"], ["--json", "config"]):
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "s3cretPass" not in out and "k3y" not in out
        assert "<redacted>@models.example:8443/v1" in out and "x=1" in out


@pytest.mark.parametrize("url", [
    "https://s3cr3tPW@h/", "https://u:s3cr3tPW@[::1/v1", "https://u:s3cr3tPW@h]/",
    "u:s3cr3tPW@host:6333", "https://h/#token=s3cr3tPW", "https://h/?a=1;token=s3cr3tPW",
    "https://h/p;jsessionid=s3cr3tPW", "https://h/?jwt=s3cr3tPW", "https://h/?sas=s3cr3tPW",
    "https://h/?session=s3cr3tPW", "https://h/?code=s3cr3tPW"])
def test_config_redacts_every_shape_of_credential_in_a_url(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CELESTIAL_LLM_BASE_URL", url)
    assert main(["--json", "config"]) == 0
    out = capsys.readouterr().out
    assert "s3cr3tPW" not in out and "<redacted>" in out
