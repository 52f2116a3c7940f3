"""``CELESTIAL_LOG_FORMAT=json``: one JSON object per log line, for log collectors. The fields
are the time, level, logger and message, and of the access log's fields (api/grpc/observer.py)
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
from queue import SimpleQueue

FIELDS = ("request_id", "tenant", "method", "status", "duration_ms")
QUEUED_LINES = 10_000  # lines waiting for the writer thread; beyond, the caller writes


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
    change a mutable argument after logging.

    The queue is a ``SimpleQueue``, whose ``put`` may be re-entered (a finalizer that logs while
    the same thread is inside ``put`` would deadlock on ``Queue``'s lock). Its bound is kept
    here: with ``QUEUED_LINES`` waiting (stderr not drained), the caller writes the line itself,
    as it did before there was a writer thread, instead of the queue growing without bound."""

    def __init__(self, lines: SimpleQueue[logging.LogRecord | None],
                 stream: logging.Handler) -> None:
        super().__init__(lines)
        self._lines, self._stream = lines, stream

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        record = copy.copy(record)
        record.msg, record.args = record.getMessage(), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        record.exc_info = None  # a traceback's frames are not handed to another thread
        return record

    def enqueue(self, record: logging.LogRecord) -> None:
        if self._lines.qsize() >= QUEUED_LINES:
            self._stream.handle(record)
        else:
            self._lines.put(record)


_listener: logging.handlers.QueueListener | None = None
_stream: logging.Handler | None = None


def configure(level: str, fmt: str) -> None:
    """The root logger's one handler, on stderr, in ``fmt`` ("text" or "json"), written by a
    thread of its own: formatting a line and writing it to stderr took a tenth of a call's time
    in the server's event loop (the access log writes a line per call). Lines queued when the
    process exits normally are written (atexit), and later ones straight to stderr; a killed
    process can lose the last few."""
    global _listener, _stream
    stream = logging.StreamHandler()
    stream.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s: %(message)s"))
    if _listener is not None:
        _listener.stop()
    lines: SimpleQueue[logging.LogRecord | None] = SimpleQueue()
    _listener = logging.handlers.QueueListener(lines, stream, respect_handler_level=True)
    _listener.start()
    _stream = stream
    logging.basicConfig(level=level.upper(), handlers=[_Queued(lines, stream)], force=True)


@atexit.register
def _drain() -> None:
    global _listener
    if _listener is None or _stream is None:
        return
    _listener.stop()  # writes what is queued, then ends the thread
    _listener = None
    root = logging.getLogger()
    for handler in list(root.handlers):  # what is logged after this goes straight to stderr
        if isinstance(handler, _Queued):
            root.removeHandler(handler)
            root.addHandler(_stream)
