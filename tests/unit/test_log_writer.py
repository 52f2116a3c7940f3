"""The log's writer thread (observability/json_logs.configure): every line reaches stderr,
in order and in either format, with its traceback, and what is queued at exit is written."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest


def _run(fmt: str, body: str) -> list[str]:
    code = textwrap.dedent(f"""
        import logging
        from celestial_memory.observability import json_logs
        json_logs.configure("INFO", {fmt!r})
        log = logging.getLogger("celestial_memory.test")
    """) + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stderr.splitlines()


def test_every_line_is_written_in_order_before_the_process_exits() -> None:
    lines = _run("text", """
        for i in range(2000):
            log.info("line %d", i)
    """)
    got = [int(line.rsplit(" ", 1)[1]) for line in lines if "celestial_memory.test" in line]
    assert got == list(range(2000))


def test_a_traceback_and_the_access_log_fields_survive_the_queue() -> None:
    lines = _run("json", """
        args = ["before"]
        log.info("value %s", args, extra={"request_id": "r1", "tenant": "t", "method": "Get",
                                          "status": "OK", "duration_ms": 1.5, "content": "x"})
        args[0] = "after"  # changed once logged: the line shows what was logged
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("failed")
    """)
    first, second = (json.loads(x) for x in lines if x.startswith("{"))
    assert first["message"] == "value ['before']"
    assert (first["request_id"], first["method"], first["duration_ms"]) == ("r1", "Get", 1.5)
    assert "content" not in first
    assert second["message"] == "failed" and second["level"] == "ERROR"
    assert "ValueError: boom" in second["exception"]


def test_text_lines_keep_the_traceback() -> None:
    lines = _run("text", """
        try:
            1 / 0
        except ZeroDivisionError:
            log.exception("divided")
    """)
    text = "\\n".join(lines)
    assert "ERROR celestial_memory.test: divided" in text
    assert "ZeroDivisionError" in text


def test_configuring_again_leaves_one_writer() -> None:
    lines = _run("text", """
        from celestial_memory.observability import json_logs
        json_logs.configure("INFO", "text")
        log.info("once")
    """)
    assert sum("once" in line for line in lines) == 1


def test_the_level_still_filters() -> None:
    lines = _run("text", """
        logging.getLogger().setLevel(logging.WARNING)
        log.info("quiet")
        log.warning("loud")
    """)
    assert any("loud" in line for line in lines) and not any("quiet" in line for line in lines)


def test_a_stalled_writer_makes_callers_write_instead_of_growing_the_queue(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import logging
    import logging.handlers
    import threading

    from celestial_memory.observability import json_logs

    monkeypatch.setattr(json_logs, "QUEUED_LINES", 5)
    gate = threading.Event()

    class Stalled(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            gate.wait(30)

    class Direct(logging.Handler):
        def __init__(self) -> None:
            super().__init__()
            self.lines = 0

        def emit(self, record: logging.LogRecord) -> None:
            self.lines += 1

    lines = json_logs.SimpleQueue()  # type: ignore[var-annotated]
    direct = Direct()
    handler = json_logs._Queued(lines, direct)
    listener = logging.handlers.QueueListener(lines, Stalled())
    listener.start()
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "m", None, None)
    handler.handle(record)
    for _ in range(100):  # the writer takes the first line and stalls on it
        if lines.qsize() == 0:
            break
        threading.Event().wait(0.01)
    for _ in range(19):
        handler.handle(record)
    assert lines.qsize() == 5 and direct.lines == 14  # bounded; the rest written by the caller
    gate.set()
    listener.stop()
    assert lines.qsize() == 0


def test_lines_logged_after_the_exit_drain_still_reach_stderr() -> None:
    code = textwrap.dedent("""
        import atexit, logging
        # Registered first, so it runs after the drain (atexit runs last-registered first).
        atexit.register(lambda: logging.getLogger("celestial_memory.test").warning("late line"))
        from celestial_memory.observability import json_logs
        json_logs.configure("INFO", "text")
        logging.getLogger("celestial_memory.test").info("early line")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "early line" in done.stderr and "late line" in done.stderr
