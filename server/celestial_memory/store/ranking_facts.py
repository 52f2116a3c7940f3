"""What the learned ranker asks of storage: a few payload fields of a recall's best candidates
(domain/candidate_facts.py), read in one round trip, not their whole memories."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from celestial_memory.domain.candidate_facts import CandidateFacts
from celestial_memory.domain.zones import Zone
from celestial_memory.store.engine import MEMORIES, Engine
from celestial_memory.store.payload import ARCHIVE_ZONE

# The fields the features read (ranking/features.py), and the tenant's, to check it.
FACT_FIELDS = ("tenant", "content", "session_id", "edge_ids", "entities", "zone", "importance",
               "recall_count", "created_at")
Row = tuple[str, str, str, list[str], list[str], float, float, float, float]


class RankingFacts:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def read(self, tenant: str, ids: Sequence[str]) -> CandidateFacts:
        """The facts of the memories of ``tenant`` among ``ids``, in their order (missing and
        foreign ones are absent)."""
        records = {r.id: r for r in self._engine.retrieve(MEMORIES, ids, payload=FACT_FIELDS)}
        rows = [row for mid in ids if mid in records
                and records[mid].payload.get("tenant") == tenant
                and (row := _row(mid, records[mid].payload)) is not None]
        columns: list[tuple[Any, ...]] = list(zip(*rows, strict=True)) if rows else [()] * 9
        return CandidateFacts(
            ids=list(columns[0]), content=list(columns[1]), session=list(columns[2]),
            related=list(columns[3]), entities=list(columns[4]),
            zone=np.array(columns[5], dtype=np.float64),
            importance=np.array(columns[6], dtype=np.float64),
            recall_count=np.array(columns[7], dtype=np.float64),
            created_at=np.array(columns[8], dtype=np.float64))


def _row(mid: str, p: dict[str, Any]) -> Row | None:
    """One memory's facts; None for a payload that cannot be read (written by hand or by an
    older version), which ``pages.readable`` skips as well."""
    try:
        zone = int(p["zone"])
        # An archived memory left from the Cloud, and reads as one (payload.from_payload).
        return (mid, str(p["content"]), str(p.get("session_id") or ""),
                list(p.get("edge_ids") or []), list(p.get("entities") or []),
                float(Zone.CLOUD if zone == ARCHIVE_ZONE else zone), float(p["importance"]),
                float(p["recall_count"]), float(p["created_at"]))
    except (KeyError, ValueError, TypeError):
        return None
