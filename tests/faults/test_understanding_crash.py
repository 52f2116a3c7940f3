"""kill -9 while the model is being asked: the queue lives in the memories' own points, so after
a restart every memory a Store acknowledged is understood, once: none lost, none with its
triples doubled, and the model asked again only about what was in flight."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from celestial_client import CelestialClient

from tests.processes import free_port, start, stop
from tests.scripted_model import ScriptedModel

# Each start of a fresh data folder would export the encoder again (conftest.py).
pytestmark = pytest.mark.usefixtures("shared_encoder")


def facts(body: dict[str, Any]) -> str:
    memories = re.findall(r"^(\d+)\. (.*)$", body["messages"][1]["content"], re.M)
    return json.dumps({"memories": [
        {"n": int(n), "entities": [{"name": "Note", "kind": "other"}],
         "triples": [["note", "says", text]]} for n, text in memories]})


def _wait(predicate: Any, what: str, limit_s: float = 180.0) -> None:
    deadline = time.monotonic() + limit_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_kill_9_mid_call_loses_and_doubles_nothing(tmp_path: Path) -> None:
    model = ScriptedModel(facts)
    model.stall_s = 2.0  # each call is in flight long enough to be killed in
    env = {"CELESTIAL_EXTRACTOR": "llm", "CELESTIAL_LLM_BASE_URL": model.url,
           "CELESTIAL_LLM_MODEL": "scripted", "CELESTIAL_LLM_TIMEOUT_S": "10",
           "CELESTIAL_UNDERSTAND_BATCH": "4", "CELESTIAL_UNDERSTAND_POLL_S": "0.1"}
    port = free_port()
    texts = [f"note number {i} about the garden" for i in range(12)]
    proc = start(tmp_path, port, **env)
    try:
        with CelestialClient(f"127.0.0.1:{port}", tenant="crash") as c:
            ids = [c.store(t).id for t in texts]
        _wait(lambda: len(model.requests) >= 1, "the first model call")
    finally:
        proc.kill()  # kill -9, with a call in flight
        proc.wait()
    asked_before = len(model.requests)
    model.stall_s = 0.0
    proc = start(tmp_path, port, **env)
    try:
        with CelestialClient(f"127.0.0.1:{port}", tenant="crash") as c:
            _wait(lambda: all(c.get(i).understanding == "done" for i in ids), "the queue")
            got = {i: c.get(i) for i in ids}
    finally:
        stop(proc)
        model.close()
    for i, text in zip(ids, texts, strict=True):
        assert got[i].triples == [("note", "says", text)], got[i].triples  # once, not twice
    sent = [line.split(". ", 1)[1] for r in model.requests
            for line in r["messages"][1]["content"].splitlines()]
    # Every memory asked about at least once; only the batch in flight at the kill twice.
    assert set(sent) == set(texts)
    assert len(sent) - len(texts) <= 4 * asked_before
