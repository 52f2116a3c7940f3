"""The fenced code blocks of README.md and docs/*.md, for the tests that run and check them.

A ```python block (and a ```ts one, with Node.js) runs as pasted, against a fresh server at the
address the docs use (``localhost:50051``, replaced by the test server's; ``localhost:8080``,
the HTTP port, by its HTTP port's). A ```text block right
after it (blank lines between at most) is what it prints. A ```console block is a shell session
in a folder of its own: each ``$`` line runs, and the lines up to the next ``$`` are what it
prints (``...`` alone: not shown, not checked). A line that is one ``.venv/bin/celestial``
command runs it against the test server; one with shell syntax (``|``, ``<``, ``>``) runs in
bash, its programs ``.venv/bin/celestial``, ``printf``, ``echo`` or ``cat``. A memory id an
earlier line printed stands, in a later line, for the id printed in its place in this run.
A block right after ``<!-- docs-test: skip (REASON) -->`` is only checked for syntax; one right
after ``<!-- docs-test: beside `COMMAND` -->`` runs while the ``celestial`` COMMAND does, in
the background (against the test server; its ``--port`` replaced by a free one, in the block
too).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC_ADDRESS = "localhost:50051"
DOC_HTTP_ADDRESS = "localhost:8080"  # the HTTP port (Connect) as `make run` serves it
RUNS_AS_PASTED = ("python", "ts")
_FENCE = re.compile(r"^```([\w-]*)\s*$")
_SKIP = re.compile(r"^<!-- docs-test: skip \((.+)\) -->$")
_BESIDE = re.compile(r"^<!-- docs-test: beside `(.+)` -->$")
MEMORY_ID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
_MASKS = (
    (MEMORY_ID, "<id>"),
    (re.compile(r"(?<!\d)\d{4}-\d{2}-\d{2}(?!\d)"), "<date>"),  # ISO times too: ...-14T22:13:20Z
    (re.compile(r"(?<![\d:])\d{2}:\d{2}:\d{2}(\.\d+)?(?![\d:])"), "<time>"),
    # A score's digits past the fourth decimal (JSON answers print doubles in full; the
    # encoder's last digits depend on the machine's thread count).
    (re.compile(r"(?<![\d.])(-?\d+\.\d{4})\d+(e-?\d+)?"), r"\1\2"),
)


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    end: int  # of the closing fence
    lang: str
    code: str
    skip: str | None
    output: str | None = None  # the ```text block that follows a python or ts block
    beside: str | None = None  # a celestial command that runs while the block does

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT).as_posix()}:{self.line}"


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _fenced(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), None)
        if end is None:
            raise ValueError(f"{path}:{i + 1}: a code block that is never closed")
        skip = _SKIP.match(lines[i - 1]) if i else None
        beside = _BESIDE.match(lines[i - 1]) if i else None
        found.append(Block(path, i + 1, end + 1, match.group(1), "\n".join(lines[i + 1:end]) + "\n",
                           skip.group(1) if skip else None, None,
                           beside.group(1) if beside else None))
        i = end + 1
    return found


def blocks(path: Path) -> list[Block]:
    """The document's blocks, each python block with the text block that shows its output."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    fenced = _fenced(path)
    for k, block in enumerate(fenced):
        prev = fenced[k - 1] if k else None
        if (block.lang == "text" and prev is not None and prev.lang in RUNS_AS_PASTED
                and all(not line.strip() for line in lines[prev.end:block.line - 1])):
            out[-1] = Block(prev.path, prev.line, prev.end, prev.lang, prev.code, prev.skip,
                            block.code, prev.beside)
            continue
        out.append(block)
    return out


def all_blocks() -> list[Block]:
    return [block for path in documents() for block in blocks(path)]


def normalized(text: str) -> str:
    """Output with what differs from run to run masked: ids, dates and times, and the digits
    of a long float past its fourth decimal."""
    for pattern, mask in _MASKS:
        text = pattern.sub(mask, text)
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def console_steps(block: Block) -> list[tuple[str, str | None]]:
    """(command after ``$ ``, what it prints or None when the docs do not show it)."""
    steps: list[tuple[str, list[str]]] = []
    for line in block.code.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
        else:
            raise ValueError(f"{block.name}: output before any command")
    return [(command, None if shown == ["..."] else "\n".join(shown)) for command, shown in steps]


_SHELL_OPERATORS = frozenset({"|", "||", "&&", ";", "&"})


def shell_words(command: str) -> list[str]:
    """``command``'s words as a shell splits them, its operators and redirections (``|``,
    ``<``, ``>``) words of their own."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def needs_shell(command: str) -> bool:
    """Whether ``command`` pipes or redirects (a line the tests hand to bash)."""
    return any(word and set(word) <= set("|&;<>()") for word in shell_words(command))


def programs(command: str) -> list[str]:
    """The programs a shell line runs: its first word and each one after a ``|``, ``&&``,
    ``||``, ``;`` or ``&``."""
    words = shell_words(command)
    return [w for i, w in enumerate(words) if i == 0 or words[i - 1] in _SHELL_OPERATORS]
