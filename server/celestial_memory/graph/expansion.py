"""Graph expansion of a recall (docs/design.md, "Connected memory"): the relations of the best
candidates bring their neighbours into the candidates, with a relevance made from their seed's.

A neighbour's relevance is ``max(own, (1 - g) * own + g * w * seed)``: ``own`` its relevance to
the query as any candidate's (the same signals, scored by the engine), ``w`` the relation's
weight, ``seed`` the relevance of the candidate it was reached from, ``g`` the graph weight.
So a relation never lowers a memory, a neighbour that says nothing of the query rises only
part of the way towards its seed, and one that is relevant itself rises more. A second hop
takes its seed's expanded relevance times the next weight. Candidates already found that are
a seed's neighbours get the same lift. Cost: one payload read per hop (the seeds' relations),
one filtered read of the neighbours' zones (the recall's filter holds for them) and one
exact scoring of those not yet candidates.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from celestial_memory.domain.models import HybridQuery, MemoryFilter, Via
from celestial_memory.store.repository import Candidates, MemoryRepository

FloatArray = npt.NDArray[np.float64]
MAX_NEIGHBOURS = 200  # memories one expansion may add: a bound on its work
MAX_FRONTIER = 64  # memories whose relations a second hop reads


@dataclass(slots=True)
class Expanded:
    candidates: Candidates
    relevance: FloatArray  # follows candidates.ids
    via: dict[str, Via]  # candidates lifted through a relation, by id


def expand(store: MemoryRepository, tenant: str, query: HybridQuery, flt: MemoryFilter,
           cands: Candidates, relevance: FloatArray, seeds: int, hops: int,
           graph_weight: float, entities: Sequence[str],
           score: Callable[[FloatArray], FloatArray]) -> Expanded:
    """``cands`` with the neighbours of their ``seeds`` best (``hops`` steps along relations)
    and every relevance lifted as the module says; ``score`` turns signal rows into relevance
    (Retrieval.relevance over the joined rows, so keyword scores are normalised over all);
    neighbours are asked which of the query's ``entities`` they mention, as candidates are."""
    order = np.argsort(-relevance, kind="stable")[:seeds]
    frontier = {cands.ids[i]: float(relevance[i]) for i in order}
    reached: dict[str, tuple[float, Via]] = {}  # id -> (lift, via)
    seen = set(frontier)
    for hop in range(1, hops + 1):
        edges = store.graph.edges_of(tenant, list(frontier))
        nxt: dict[str, float] = {}
        for src, seed_rel in frontier.items():
            for e in edges.get(src, []):
                # Another seed may be lifted too; only memories not met yet lead on.
                lift = graph_weight * e.weight * seed_rel
                if e.other != src and lift > reached.get(e.other, (-1.0, None))[0]:
                    reached[e.other] = (lift, Via(src if hop == 1 else reached[src][1].source,
                                                  e.relation, e.weight, hop))
                if e.other not in seen:
                    nxt[e.other] = max(nxt.get(e.other, 0.0), e.weight * seed_rel)
                if len(reached) >= MAX_NEIGHBOURS:
                    break
            if len(reached) >= MAX_NEIGHBOURS:
                break
        seen.update(nxt)
        # Only the strongest lead on: the next hop reads their relations (256 each at most).
        frontier = dict(heapq.nlargest(MAX_FRONTIER, nxt.items(), key=lambda kv: (kv[1], kv[0])))
        if not frontier:
            break
    if not reached:
        return Expanded(cands, relevance, {})
    index = {mid: i for i, mid in enumerate(cands.ids)}
    new = [mid for mid in reached if mid not in index]
    if new:
        # The recall's filter holds for neighbours too; archived ones stay out.
        zones = store.matching(tenant, flt, ids=new, archive=False)
        live = [mid for mid in new if mid in zones]
        if live:
            cands = cands.joined(store.scored(tenant, query, live, [int(zones[m]) for m in live],
                                              entities))
            relevance = score(cands.signals)
            index = {mid: i for i, mid in enumerate(cands.ids)}
    relevance = relevance.copy()
    via: dict[str, Via] = {}
    for mid, (lift, how) in reached.items():
        i = index.get(mid)
        if i is None:
            continue
        own = float(relevance[i])
        lifted = (1 - graph_weight) * own + lift
        if lifted > own:
            relevance[i] = lifted
            via[mid] = how
    return Expanded(cands, relevance, via)
