"""What a running server reports of its settings (ops/running_config.py, GetConfig): each value
as JSON with the source recorded when the settings were built (a constructor's value, as
``celestial serve``'s flags are; the environment; the default), and no secret, ever."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from celestial_client.v1 import memory_pb2 as pb
from celestial_memory.api.grpc.converters import config_to_pb
from celestial_memory.config import Settings
from celestial_memory.main import add_serve_arguments, serve_overrides
from celestial_memory.ops.running_config import ConfigEntry, running_config

KEY = "sk-very-secret-0f9a"


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Only what a test sets: the caller's own CELESTIAL_ variables stay out."""
    for name in [n for n in os.environ if n.upper().startswith("CELESTIAL_")]:
        monkeypatch.delenv(name)
    yield


def by_name(settings: Settings) -> dict[str, ConfigEntry]:
    return {e.name: e for e in running_config(settings)}


def test_every_setting_in_order_with_its_variable() -> None:
    entries = running_config(Settings())
    assert [e.name for e in entries] == list(Settings.model_fields)
    assert all(e.env == f"CELESTIAL_{e.name.upper()}" for e in entries)
    assert {e.source for e in entries} == {"default"}
    shown = {e.name: json.loads(e.value) for e in entries if not e.secret}
    assert shown["zone_capacities"] == [20, 100, 1000, 0, 0]
    assert shown["backend"] == "edge" and shown["data_dir"] == "data"
    assert shown["rebalance_interval_s"] == 300.0 and shown["merge_repeats"] is True
    assert shown["api_keys_file"] is None and shown["reinforce_flush_ms"] is None
    assert by_name(Settings())["zone_capacities"].value == "[20,100,1000,0,0]"  # as the variable


def test_sources_are_recorded_when_the_settings_are_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CELESTIAL_MAX_TAGS", "32")
    monkeypatch.setenv("celestial_zone_margin", "0.9")  # any case, as pydantic-settings reads it
    monkeypatch.setenv("CELESTIAL_BACKEND", "qdrant")  # a flag wins over it
    settings = Settings(backend="edge", rebalance_interval_s=60)
    monkeypatch.setenv("CELESTIAL_FEEDBACK_STEP", "0.5")  # after the start: not this server's
    got = by_name(settings)
    assert (got["max_tags"].value, got["max_tags"].source) == ("32", "env")
    assert (got["zone_margin"].value, got["zone_margin"].source) == ("0.9", "env")
    assert (got["backend"].value, got["backend"].source) == ('"edge"', "flag")
    assert (got["rebalance_interval_s"].value, got["rebalance_interval_s"].source) == (
        "60.0", "flag")
    assert (got["feedback_step"].value, got["feedback_step"].source) == ("0.2", "default")
    assert got["instance_id"].source == "default"  # derived at start, set by no one


def test_serve_flags_are_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    """What main.py builds from ``celestial serve``'s flags."""
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    args = parser.parse_args(["--address", "127.0.0.1:7000", "--weights", "0.1,0.2,0.3,0.4"])
    monkeypatch.setenv("CELESTIAL_DATA_DIR", "/srv/memory")
    got = by_name(Settings(**serve_overrides(args)))
    assert got["address"].source == "flag" and got["w_context"].source == "flag"
    assert (got["data_dir"].value, got["data_dir"].source) == ('"/srv/memory"', "env")
    assert got["log_level"].source == "default"


def test_secrets_say_only_whether_they_are_set(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    monkeypatch.setenv("CELESTIAL_LLM_API_KEY", KEY)
    monkeypatch.setenv("CELESTIAL_QDRANT_API_KEY", "")
    settings = Settings(policy_peer_key=KEY + "-peer", tls_cert=tmp_path / "cert.pem",
                        tls_key=tmp_path / "very-private.key")
    got = by_name(settings)
    assert (got["llm_api_key"].value, got["llm_api_key"].source) == ("set", "env")
    assert (got["policy_peer_key"].value, got["policy_peer_key"].source) == ("set", "flag")
    assert got["qdrant_api_key"].value == "" and got["qdrant_api_key"].source == "env"
    assert got["importance_llm_api_key"].value == ""  # unset
    assert got["tls_key"].value == "set" and got["tls_key"].secret  # a private key's file
    assert got["policy_peer_cert_key"].value == "" and got["policy_peer_cert_key"].secret
    assert json.loads(got["tls_cert"].value) == str(tmp_path / "cert.pem")  # not a secret
    secret = {e.name for e in running_config(settings) if e.secret}
    assert secret == {"qdrant_api_key", "llm_api_key", "importance_llm_api_key",
                      "policy_peer_key", "tls_key", "policy_peer_cert_key"}
    everything = config_to_pb(running_config(settings)).SerializeToString()
    assert KEY.encode() not in everything and b"very-private" not in everything


@pytest.mark.parametrize("url", ["https://user:s3cr3tPW@models.example/v1",
                                 "u:s3cr3tPW@host:6333", "https://h/v1?api_key=s3cr3tPW&x=1",
                                 "https://h/p;jsessionid=s3cr3tPW", "https://h/#token=s3cr3tPW"])
def test_credentials_in_a_url_are_redacted(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("CELESTIAL_LLM_BASE_URL", url)
    monkeypatch.setenv("CELESTIAL_POLICY_PEERS", json.dumps(["peer-a:50051"]))
    got = by_name(Settings(qdrant_url=url))
    for name in ("llm_base_url", "qdrant_url"):
        assert "s3cr3tPW" not in got[name].value and "<redacted>" in got[name].value, name
    assert json.loads(got["policy_peers"].value) == ["peer-a:50051"]  # plain text stays


def test_a_number_json_cannot_hold_is_sent_as_text() -> None:
    got = by_name(Settings(max_stream_s=float("inf")))
    assert json.loads(got["max_stream_s"].value) == "inf"


def test_the_answer_carries_each_source_as_the_contract_names_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CELESTIAL_MAX_TAGS", "32")
    answer = config_to_pb(running_config(Settings(address="127.0.0.1:7000")))
    got = {s.name: s for s in answer.settings}
    assert got["address"].source == pb.CONFIG_SOURCE_FLAG
    assert got["max_tags"].source == pb.CONFIG_SOURCE_ENV
    assert got["backend"].source == pb.CONFIG_SOURCE_DEFAULT
    assert got["llm_api_key"].secret and got["llm_api_key"].value == ""
    assert got["max_tags"].env == "CELESTIAL_MAX_TAGS"
