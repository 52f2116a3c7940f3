"""What `make run` shows on a fresh clone: the packaging metadata of both distributions without a
deprecated form (setuptools warns at every build of it, seven times per install), and a line
from the Makefile for each step of the set-up."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
import warnings
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PYPROJECTS = [ROOT / "pyproject.toml", ROOT / "client" / "pyproject.toml"]
# The first setuptools to read `license` as an SPDX expression (PEP 639).
SPDX_SETUPTOOLS = Version("77")


def _toml(path: Path) -> dict[str, Any]:
    return tomllib.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", PYPROJECTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_license_is_an_spdx_expression_not_the_deprecated_table(path: Path) -> None:
    project = _toml(path)["project"]
    assert project["license"] == "Apache-2.0"
    # An expression and a license classifier together are refused by PEP 639 builders.
    assert not [c for c in project.get("classifiers", []) if c.startswith("License ::")]
    for pattern in project.get("license-files", []):
        assert list(path.parent.glob(pattern)), f"license-files: {pattern} matches nothing"


@pytest.mark.parametrize("path", PYPROJECTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_build_asks_for_a_setuptools_that_reads_the_expression(path: Path) -> None:
    requires = [Requirement(r) for r in _toml(path)["build-system"]["requires"]]
    setuptools = next(r for r in requires if r.name == "setuptools")
    assert not setuptools.specifier.contains(Version("76.99")), setuptools
    assert setuptools.specifier.contains(SPDX_SETUPTOOLS), setuptools


@pytest.mark.parametrize("path", PYPROJECTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_setuptools_reads_the_metadata_without_a_warning(path: Path) -> None:
    setuptools = pytest.importorskip("setuptools")
    if Version(setuptools.__version__) < SPDX_SETUPTOOLS:
        pytest.skip(f"setuptools {setuptools.__version__} predates PEP 639")
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dist = apply_configuration(Distribution(), path)
    assert [str(w.message) for w in caught] == []
    assert dist.metadata.license_expression == "Apache-2.0"


def _dry_run(tmp_path: Path) -> str:
    """`make -n run` against a virtual environment that does not exist yet: every step's
    commands, printed and not run."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    out = subprocess.run(["make", "-n", "run", f"VENV={tmp_path / 'venv'}"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, check=True)
    return out.stdout


def test_make_run_says_each_step_of_the_set_up_in_order(tmp_path: Path) -> None:
    said = re.findall(r'^echo "(→ [^"]*)"$', _dry_run(tmp_path), re.MULTILINE)
    steps = ["→ creating the virtual environment", "→ installing packages", "→ packages installed",
             "→ starting the server"]
    found = [next((i for i, line in enumerate(said) if line.startswith(s)), -1) for s in steps]
    assert -1 not in found and found == sorted(found), said


def test_make_run_keeps_pip_quiet_and_the_commands_unechoed(tmp_path: Path) -> None:
    printed = _dry_run(tmp_path)
    pips = [line for line in printed.splitlines() if " -m pip install" in line]
    assert len(pips) == 3 and all("--quiet" in line for line in pips), pips
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    recipes = makefile.split("\ninstall: $(STAMP)")[0].split("\n$(PY):")[1]
    # Every command of the set-up is silent (@): its step line says what runs.
    commands = [line for line in recipes.splitlines() if line.startswith("\t")]
    assert commands and all(line.startswith("\t@") for line in commands), commands
