"""The log's writer thread (observability/json_logs.configure): every line reaches stderr,
in order and in either format, with its traceback, and what is queued at exit is written."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap


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


def test_a_stalled_stderr_holds_the_caller_back_instead_of_growing_the_queue() -> None:
    import logging as logging_
    import threading

    from celestial_memory.observability import json_logs

    gate = threading.Event()

    class Stalled(logging_.Handler):
        def emit(self, record: logging_.LogRecord) -> None:
            gate.wait(30)

    queue = json_logs.Queue(5)  # type: ignore[var-annotated]
    handler = json_logs._Queued(queue)
    listener = logging_.handlers.QueueListener(queue, Stalled())
    listener.start()
    record = logging_.LogRecord("x", logging_.INFO, __file__, 1, "m", None, None)
    done = threading.Event()

    def log_many() -> None:
        for _ in range(20):
            handler.handle(record)
        done.set()

    threading.Thread(target=log_many, daemon=True).start()
    assert not done.wait(0.5)  # held back: the writer takes one line, five wait, the rest block
    assert queue.qsize() == 5
    gate.set()
    assert done.wait(30)
    listener.stop()
