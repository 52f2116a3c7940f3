"""``CELESTIAL_LOG_FORMAT=json``: one JSON object per log line, for log collectors. The fields
are the time, level, logger and message, and of the access log's fields (grpc_api/observer.py)
only the known ones: request id, tenant, method, status, duration. Nothing else a record carries
is copied, so no content or key reaches the log by way of an extra field.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

FIELDS = ("request_id", "tenant", "method", "status", "duration_ms")


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
        return json.dumps(out, ensure_ascii=False)


def configure(level: str, fmt: str) -> None:
    """The root logger's one handler, on stderr, in ``fmt`` ("text" or "json")."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
