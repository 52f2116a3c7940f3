"""The audit log: one JSON line per denied call and per admin call, on the
``celestial_memory.audit`` logger; key ids only, never a key or any content."""

from __future__ import annotations

import json
import logging
from typing import Any

audit_log = logging.getLogger("celestial_memory.audit")


def audit(event: str, **fields: Any) -> None:
    audit_log.info(json.dumps({"event": event, **fields}, sort_keys=True))
