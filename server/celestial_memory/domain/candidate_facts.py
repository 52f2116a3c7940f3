"""What the learned ranker reads of its candidates (ranking/features.py), column by column: the
part of each memory its features use, so that a recall reads only that part of the candidates it
ranks (store/ranking_facts.py) and the whole memory only of what it returns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from celestial_memory.domain.models import Memory


@dataclass(frozen=True, slots=True)
class CandidateFacts:
    ids: list[str]
    content: list[str]
    session: list[str]  # "" without one
    related: list[list[str]]  # the other ends of its relations
    entities: list[list[str]]
    zone: npt.NDArray[np.float64]
    importance: npt.NDArray[np.float64]
    recall_count: npt.NDArray[np.float64]
    created_at: npt.NDArray[np.float64]

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def of(cls, memories: Sequence[Memory]) -> CandidateFacts:
        """The facts of whole memories (training reads them so)."""
        return cls(
            ids=[m.id for m in memories], content=[m.content for m in memories],
            session=[m.session_id for m in memories],
            related=[[e.other for e in m.edges] for m in memories],
            entities=[list(m.entities) for m in memories],
            zone=np.array([float(m.zone) for m in memories]),
            importance=np.array([m.importance for m in memories], dtype=np.float64),
            recall_count=np.array([m.recall_count for m in memories], dtype=np.float64),
            created_at=np.array([m.created_at for m in memories], dtype=np.float64))
