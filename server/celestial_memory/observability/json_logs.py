"""``CELESTIAL_LOG_FORMAT=json``: one JSON object per log line, for log collectors. The fields
are the time, level, logger and message, and of the access log's fields (grpc_api/observer.py)
only the known ones: request id, tenant, method, status, duration. Nothing else a record carries
is copied, so no content or key reaches the log by way of an extra field.
"""

from __future__ import annotations

import atexit
import copy
import json
import logging
import logging.handlers
from datetime import UTC, datetime
from queue import Queue

FIELDS = ("request_id", "tenant", "method", "status", "duration_ms")
QUEUED_LINES = 10_000  # lines waiting for the writer thread at most


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        out.update({f: getattr(record, f) for f in FIELDS if hasattr(record, f)})
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:  # formatted already where it was logged (configure's queue)
            out["exception"] = record.exc_text
        return json.dumps(out, ensure_ascii=False)


class _Queued(logging.handlers.QueueHandler):
    """Hands a record to the writer thread as it is: the stream handler formats it there. (The
    standard ``prepare`` formats the message first, the cost this handler exists to move off
    the caller's thread.) The arguments are rendered here all the same, since the caller may
    change a mutable argument after logging."""

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        record = copy.copy(record)
        record.msg, record.args = record.getMessage(), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        record.exc_info = None  # a traceback's frames are not handed to another thread
        return record

    def __init__(self, lines: Queue[logging.LogRecord]) -> None:
        super().__init__(lines)
        self._lines = lines

    def enqueue(self, record: logging.LogRecord) -> None:
        # Blocks when the queue is full (stderr not drained): the caller waits, as it did when
        # it wrote the line itself, instead of the queue growing without bound.
        self._lines.put(record)


_listener: logging.handlers.QueueListener | None = None


def configure(level: str, fmt: str) -> None:
    """The root logger's one handler, on stderr, in ``fmt`` ("text" or "json"), written by a
    thread of its own: formatting a line and writing it to stderr took a tenth of a call's time
    in the server's event loop (the access log writes a line per call). Lines queued when the
    process exits normally are written (atexit); a killed process can lose the last few."""
    global _listener
    stream = logging.StreamHandler()
    stream.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s: %(message)s"))
    if _listener is not None:
        _listener.stop()
    queue: Queue[logging.LogRecord] = Queue(QUEUED_LINES)
    _listener = logging.handlers.QueueListener(queue, stream, respect_handler_level=True)
    _listener.start()
    logging.basicConfig(level=level.upper(), handlers=[_Queued(queue)], force=True)


@atexit.register
def _drain() -> None:
    if _listener is not None:
        _listener.stop()  # writes what is queued, then ends the thread
