"""LoCoMo conversations stored in-process, as ``celestial eval locomo`` stores them through the
server (each turn a memory with the two previous turns of its session as context, the clock
following the sessions, a rebalance after each session without forgetting), and a recall's
candidates as the service gathers them: what the ranking studies and the ranker's training
(ranker_study.py, train_ranker.py) start from."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from celestial_client.cli.locomo_eval import Conversation
from celestial_memory.clock import ManualClock
from celestial_memory.domain import validation as check
from celestial_memory.domain.models import Memory
from celestial_memory.domain.requests import NewMemory, RecallQuery
from celestial_memory.memory.service import MemoryService
from celestial_memory.observability import metrics

Floats = npt.NDArray[np.float64]


def store(service: MemoryService, clock: ManualClock, conv: Conversation, tenant: str) -> None:
    """Every turn of ``conv`` into ``tenant``; the clock is left one hour after the last
    session, where the questions are asked."""
    for start, items in conv.sessions:
        clock.set(start + len(items))
        service.store_batch(tenant, [NewMemory(
            content=i.content, context=i.context, session_id=i.session_id,
            created_at=i.created_at if isinstance(i.created_at, float) else None,
            metadata=i.metadata) for i in items])
        service.rebalance(tenant, forget=False)
    clock.set(conv.sessions[-1][0] + 3600)
    print(f"{conv.name}: stored; {len(conv.questions)} questions", file=sys.stderr, flush=True)


@dataclass
class Gathered:
    """One question's best candidates by relevance, best first."""

    ids: list[str]
    signals: Floats  # rows: candidates; columns: the four signals, raw
    relevance: Floats
    memories: list[Memory]
    asked: list[str]  # the query's entity ids


def gather(service: MemoryService, tenant: str, text: str, best: int) -> Gathered:
    """The candidates a limit-10 recall of ``text`` finds (nothing reinforced), the ``best`` by
    relevance, with their payloads: what the learned ranker re-ranks when serving."""
    s = service.settings
    q = RecallQuery(query=text, limit=10, reinforce=False, ignore_zones=True, min_relevance=0.0)
    qvec = service.embedder.embed([text])[0]
    found = service._candidates.find(tenant, q, text, qvec, check.memory_filter(q.filter, s),
                                     0.0, 10, metrics.Stages())
    order = np.argsort(-found.relevance, kind="stable")[:best]
    ids = [found.candidates.ids[i] for i in order]
    got = service.store.get(tenant, ids)
    keep = [k for k, mid in enumerate(ids) if mid in got]
    order = order[keep]
    ids = [ids[k] for k in keep]
    return Gathered(ids, found.candidates.signals[order], found.relevance[order],
                    [got[mid] for mid in ids], service.retrieval.entities(text))


def turn_ids(m: Memory) -> set[str]:
    """The dia_ids a memory stands for: its own and those of the repeats merged into it."""
    return {m.metadata.get("dia_id", ""), *(p.metadata.get("dia_id", "") for p in m.merged)}


def evidence_held(evidence: set[str], memories: list[Memory]) -> float:
    return len(evidence & set().union(*(turn_ids(m) for m in memories))) / len(evidence)
