"""Deployment files: docker-compose and Kubernetes validators where installed (Debian's
docker-compose, PyPI's kubernetes-validate; no engine or cluster needed), pinned images, safe
defaults (no well-known Qdrant key, loopback ports) and owner-only development secrets."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = sorted((ROOT / "deploy" / "k8s").glob("*.yaml"))


COMPOSE = ROOT / "docker-compose.yml"


def _compose_config(tmp_path: Path, env_file: str) -> subprocess.CompletedProcess[str]:
    """``docker-compose config`` with only ``env_file`` for variables (not the caller's
    environment, not a .env of the checkout)."""
    exe = shutil.which("docker-compose")
    if exe is None:
        pytest.skip("docker-compose is not installed (Debian package docker-compose)")
    (tmp_path / "compose.env").write_text(env_file)
    env = {k: v for k, v in os.environ.items() if k != "QDRANT_API_KEY"}
    return subprocess.run([exe, "-f", str(COMPOSE), "--env-file", str(tmp_path / "compose.env"),
                           "config"], capture_output=True, text=True, cwd=ROOT, env=env)


def test_docker_compose_accepts_the_compose_file(tmp_path: Path) -> None:
    r = _compose_config(tmp_path, "QDRANT_API_KEY=k3y-from-env-file\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("k3y-from-env-file") == 2  # Qdrant's key and the service's


def test_compose_refuses_to_start_without_a_qdrant_key(tmp_path: Path) -> None:
    r = _compose_config(tmp_path, "")
    assert r.returncode != 0
    assert "set QDRANT_API_KEY (make dev-secrets writes one to .env)" in r.stderr


def _published_ports(text: str) -> list[str]:
    """The entries of every ``ports:`` list of the compose file."""
    found: list[str] = []
    for block in re.findall(r"^( +)ports:\n((?:\1 +- .*\n)+)", text, re.M):
        found += [line.split("- ", 1)[1].split("#")[0].strip().strip('"')
                  for line in block[1].splitlines()]
    return found


def test_compose_has_no_default_key_and_publishes_on_loopback_only() -> None:
    text = COMPOSE.read_text()
    assert "change-me" not in text and ":-" not in text  # no fallback value for any variable
    assert text.count("${QDRANT_API_KEY:?") == 2
    published = _published_ports(text)
    assert len(published) == 5, published  # Qdrant's two, the service's gRPC, HTTP, metrics
    for port in published:
        assert port.startswith("127.0.0.1:"), port


def test_compose_gives_the_service_its_secrets_from_a_volume_not_the_host_folder() -> None:
    text = COMPOSE.read_text()
    service = text.split("\n  celestial:\n")[1].split("\nvolumes:\n")[0]
    assert "./.secrets" not in service and "celestial_secrets:/run/celestial:ro" in service
    assert "service_completed_successfully" in service
    copier = text.split("\n  copy-secrets:\n")[1].split("\n  celestial:\n")[0]
    assert "./.secrets:/from:ro" in copier and "network_mode: none" in copier
    assert "-o 10001 -g 10001 -m 0400 /from/tls/server.pem /from/tls/server.key" in copier


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_dev_secrets_are_readable_by_their_owner_only(tmp_path: Path) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cli = Path(sys.executable).with_name("celestial")
    env = {**os.environ, "CELESTIAL": str(cli)}
    umask = os.umask(0o022)  # a common umask: the script must not rely on a stricter one
    try:
        for _ in range(2):  # a second run renews the certificate, adds a key, keeps the Qdrant key
            r = subprocess.run([str(ROOT / "deploy" / "dev-secrets.sh"), str(tmp_path)],
                               capture_output=True, text=True, env=env)
            assert r.returncode == 0, r.stderr
            assert re.search(r"cm_[0-9a-f]{12}_", r.stdout)  # the new admin key, shown once
    finally:
        os.umask(umask)
    secrets = tmp_path / ".secrets"
    for private in (secrets / "tls" / "server.key", secrets / "keys.json", tmp_path / ".env"):
        assert _mode(private) == 0o600, (private, oct(_mode(private)))
    assert _mode(secrets) == 0o700 and _mode(secrets / "tls") == 0o700
    assert "PRIVATE KEY" in (secrets / "tls" / "server.key").read_text()
    assert "CERTIFICATE" in (secrets / "tls" / "server.pem").read_text()
    env_lines = (tmp_path / ".env").read_text().splitlines()
    assert len(env_lines) == 1 and re.fullmatch(r"QDRANT_API_KEY=[0-9a-f]{48}", env_lines[0])


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
