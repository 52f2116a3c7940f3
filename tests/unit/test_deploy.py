"""Deployment files: docker-compose and Kubernetes validators where installed (Debian's
docker-compose, PyPI's kubernetes-validate; no engine or cluster needed), and pinned images."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = sorted((ROOT / "deploy" / "k8s").glob("*.yaml"))


def test_docker_compose_accepts_the_compose_file() -> None:
    exe = shutil.which("docker-compose")
    if exe is None:
        pytest.skip("docker-compose is not installed (Debian package docker-compose)")
    r = subprocess.run([exe, "-f", str(ROOT / "docker-compose.yml"), "config", "-q"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr


def test_kubernetes_validate_accepts_every_manifest() -> None:
    exe = shutil.which("kubernetes-validate") or str(Path(sys.executable).with_name(
        "kubernetes-validate"))
    if not Path(exe).exists():
        pytest.skip("kubernetes-validate is not installed (pip install kubernetes-validate)")
    assert MANIFESTS
    r = subprocess.run([exe, "--strict", *map(str, MANIFESTS)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def _images() -> list[tuple[str, str]]:
    found = []
    for path in [ROOT / "docker-compose.yml", *MANIFESTS]:
        found += [(path.name, m) for m in re.findall(r"^\s*image:\s*(\S+)", path.read_text(), re.M)]
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    found += [("Dockerfile", m) for m in re.findall(r"^FROM\s+(\S+)", dockerfile, re.M)]
    return found


def test_every_image_is_pinned_to_a_version() -> None:
    images = _images()
    assert len(images) >= 5
    for where, image in images:
        name, _, tag = image.rpartition(":")
        assert name and re.search(r"\d+\.\d+", tag) and tag != "latest", (where, image)
