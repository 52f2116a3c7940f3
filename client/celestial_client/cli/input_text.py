"""Where ``celestial store`` and ``update`` get a memory's text: the command line, a file
(``--file FILE``) or stdin (``-``, or ``--file -``).

A text of exactly ``-`` always means stdin, never the one-character memory: that is what a
user who types ``celestial store - < notes.txt`` means, and storing ``-`` silently would hide
the mistake. Stdin that is a terminal is refused rather than waited on, so a ``-`` typed by
mistake does not hang the command.
"""

from __future__ import annotations

import sys
from pathlib import Path

from celestial_client.cli.settings import UsageError

STDIN = "-"
# What is read at most: far above any content limit a server would set, and low enough that
# --file /dev/zero, or a log piped in by mistake, stops here instead of filling the memory.
MAX_READ_BYTES = 16 * 1024 * 1024
LIMIT_NOTE = ("a server accepts at most 32,768 characters unless its "
              "CELESTIAL_MAX_CONTENT_CHARS says otherwise")


def memory_text(text: str | None, file: Path | None, *, text_flag: str,
                required: bool) -> str | None:
    """The text a command was given: ``text`` (``-`` reads stdin) or ``file``'s (``-`` too);
    None when neither was given and the text is optional. ``text_flag`` names ``text`` in
    errors (``TEXT``, ``--content``). Trailing line breaks are dropped: a file or ``echo``
    ends with one that nobody means to store."""
    if text is not None and file is not None:
        raise UsageError(f"give the text once: {text_flag} or --file, not both")
    if file is not None:
        if str(file) == STDIN:
            return _stdin(f"--file {STDIN}")
        return _file(file)
    if text == STDIN:
        return _stdin(STDIN if text_flag == "TEXT" else f"{text_flag} {STDIN}")
    if text is None and required:
        raise UsageError(f"no text: give it as {text_flag}, --file FILE, or {STDIN} to read "
                         "stdin")
    return text


def _stdin(given: str) -> str:
    stream = sys.stdin
    if stream is None:
        raise UsageError(f"{given} reads the text from stdin, but there is no stdin")
    if stream.isatty():
        raise UsageError(f"{given} reads the text from stdin, but stdin is a terminal: pipe or "
                         f"redirect it (celestial store {STDIN} < notes.txt), or use --file FILE")
    buffer = getattr(stream, "buffer", None)  # None: a text stream put in its place
    if buffer is None:
        return _decoded(_bounded(stream.read(MAX_READ_BYTES + 1).encode("utf-8")), "stdin")
    return _decoded(_bounded(buffer.read(MAX_READ_BYTES + 1)), "stdin")


def _file(path: Path) -> str:
    try:
        with path.open("rb") as f:
            data = _bounded(f.read(MAX_READ_BYTES + 1))
    except OSError as err:
        raise UsageError(f"cannot read {path}: {err.strerror}") from None
    return _decoded(data, str(path))


def _bounded(data: bytes) -> bytes:
    if len(data) > MAX_READ_BYTES:
        raise UsageError(f"the text is over {MAX_READ_BYTES // (1024 * 1024)} MiB; {LIMIT_NOTE}")
    return data


def _decoded(data: bytes, where: str) -> str:
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark is the editor's, not the text's
    except UnicodeDecodeError as err:
        raise UsageError(f"{where} is not UTF-8 text (byte {err.start})") from None
    text = text.rstrip("\r\n")
    if not text.strip():
        raise UsageError(f"{where} is empty: there is no text to store")
    return text
