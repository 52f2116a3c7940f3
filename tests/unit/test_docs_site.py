"""The documentation site builds with ``mkdocs build --strict`` (a broken link, an unknown anchor
or a page missing from the nav fails it), and every code block of the docs is well formed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.doc_snippets import ROOT, all_blocks, console_steps, documents


def _nav_pages(nav: list[object]) -> list[str]:
    pages: list[str] = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages.extend(_nav_pages(value) if isinstance(value, list) else [str(value)])
    return pages


def test_site_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "configuration" / "index.html").exists()


def test_nav_lists_every_page_once() -> None:
    yaml = pytest.importorskip("yaml")  # mkdocs's own dependency
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    pages = _nav_pages(config["nav"])
    assert len(pages) == len(set(pages))
    assert sorted(pages) == sorted(p.name for p in documents() if p.parent.name == "docs")


def test_readme_starts_with_the_two_commands_and_stays_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) < 250
    first = "\n".join(lines[:40])
    assert "make run" in first and "make test" in first


def test_code_blocks_are_well_formed() -> None:
    checked = 0
    for block in all_blocks():
        if block.lang == "python":
            compile(block.code, block.name, "exec")  # every one, the skipped ones too
        elif block.lang == "json":
            json.loads(block.code)
        elif block.lang == "console":
            assert all(command.strip() for command, _ in console_steps(block)), block.name
        elif block.lang == "text":
            continue
        checked += 1
    assert checked >= 10


def _slug(heading: str) -> str:
    """The anchor mkdocs (and GitHub) give an ASCII heading."""
    kept = "".join(ch for ch in heading.strip().lower() if ch.isalnum() or ch in " -_")
    return "-".join(kept.split())


def test_readme_links_resolve() -> None:
    """mkdocs checks the pages' links; the README is outside the site, so it is checked here."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [link for link in links if "://" not in link]
    assert local
    for link in local:
        path, _, anchor = link.partition("#")
        target = ROOT / path
        assert target.exists(), f"README.md links to {link}, which does not exist"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", target.read_text(encoding="utf-8"), re.MULTILINE)
            assert anchor in {_slug(h) for h in headings}, f"README.md: no anchor for {link}"
