"""kill -9 while a reflection waits on the model: the operation's record survives, and the
restarted server reports it ended (ABORTED, "the server restarted"), never running forever nor
lost; the automatic trigger's count of new memories survives too, so the memories stored before
the kill still count toward the next automatic reflection."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from celestial_client import CelestialClient

from tests.integration.test_reflection import ALICE, STORIES, scripted
from tests.processes import free_port, start, stop
from tests.scripted_model import ScriptedModel


def _wait(predicate: Any, what: str, limit_s: float = 180.0) -> None:
    deadline = time.monotonic() + limit_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_kill_9_mid_reflection_reports_it_and_keeps_the_trigger_count(tmp_path: Path) -> None:
    model = ScriptedModel(scripted)
    # Eight new memories trigger an automatic reflection: six before the kill are not enough.
    env = {"CELESTIAL_LLM_BASE_URL": model.url, "CELESTIAL_LLM_MODEL": "scripted",
           "CELESTIAL_LLM_TIMEOUT_S": "60", "CELESTIAL_REFLECT_AFTER": "8",
           "CELESTIAL_UNDERSTAND_POLL_S": "0.1"}
    port = free_port()
    proc = start(tmp_path, port, **env)
    try:
        with CelestialClient(f"127.0.0.1:{port}", tenant="crash", timeout=5) as c:
            for t in STORIES:
                c.store(t)
            model.hold()
            op = c.start_reflection(dry_run=False)
            _wait(lambda: len(model.requests) == 1, "the model call")
            running = c.get_operation(op.name)
            assert (running.done, running.stage) == (False, "asking_model")
            assert c.list_operations().items[0].name == op.name  # no automatic one: 6 < 8
    finally:
        proc.kill()  # kill -9, the model call in flight
        proc.wait()
    model.release()
    proc = start(tmp_path, port, **env)
    try:
        with CelestialClient(f"127.0.0.1:{port}", tenant="crash", timeout=5) as c:
            ended = c.get_operation(op.name)
            assert ended.done and ended.result is None and ended.error is not None
            assert (ended.error.code, ended.error.reason) == ("ABORTED", "INTERRUPTED")
            assert "restarted" in ended.error.message
            assert [o.done for o in c.watch_operation(op.name)] == [True]
            assert c.recent(100, tags_any=["insight"]) == []  # it wrote nothing
            # Two more: eight since the last automatic reflection, counting the six from
            # before the kill.
            c.store("Alice asked about honesty at work")
            c.store("Alice wondered whether white lies are wrong")
            _wait(lambda: any(o.automatic and o.done for o in c.list_operations().items),
                  "the automatic reflection")
            [auto] = [o for o in c.list_operations().items if o.automatic]
            assert auto.error is None and auto.result is not None
            assert ALICE in [s.entity for s in auto.result.summaries]
    finally:
        stop(proc)
        model.close()
