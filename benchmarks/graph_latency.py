"""Connected memory at scale, on the embedded store, in-process, with precomputed vectors.

Loads N memories (default 100,000; rebalance.py's ``populate``: 384-d vectors around 1,000
centres, ten-word texts) into Qdrant Edge in a temporary folder, builds the indexes and measures
the data folder; then gives the memories relations as the service keeps them (both ends, as
payload of the two memories): sessions of 20 consecutive memories, each following the previous
one ("follows", weight 0.5, made by "session", as ``Relations.follow_sessions`` writes them), and
R random "about" relations from each memory (weight uniform in [0.3, 1], made by "caller", as
``Relations.relate`` writes them; a repeated pair is kept once). The edge lists are made here and
each memory's is written once, with ``GraphStore.write_edges``, 2,000 memories a call. Then:

1. how many relations and edge ends were written, and how long that took;
2. the index build after it (payload writes leave the rewritten points outside the indexes; the
   service's ``build_indexes`` does not count them, so the store's ``optimize(min_new=0)`` builds),
   and reads timed before the relations and again after this build: a recall without
   expansion, ``store.matching`` of 200 ids, ``store.get`` of 10, a full member scan (the
   engine reads a point's whole payload, so the edges may slow reads that skip them; not
   interleaved, as the store changed between the two);
3. recall with a query vector and a two-word keyword query (limit 10, not reinforced) with
   ``expand`` 0, 1 and 2, in the order 0 1 2 then 2 1 0 with half the calls each, the same
   queries for each, so drift on the noisy machine falls on all alike: p50 / p90, and the
   ratios to ``expand=0``;
   then the same with a name in the query, the entity signal on and off (interleaved): what
   reading the candidates' entities with their scores costs;
4. ``MemoryService.related`` at depth 2 (and depth 1 beside it, interleaved the same way) from
   random memories: p50 / p90 and how many memories a walk reached; a sample of walks is
   checked against a walk over the edge lists written (same memories, order and strengths);
5. bytes per edge on disk: the data folder (allocated and apparent, with a flush after the
   build) with the relations less without them, per edge end and per relation, by part; and as
   a cross-check the JSON of the edge payload (``edge_fields``) per memory, per end.

    python benchmarks/graph_latency.py [--memories 100000] [--relations 8] [--calls 300]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
from celestial_memory.clock import ManualClock
from celestial_memory.domain.models import Edge
from celestial_memory.domain.requests import RecallQuery
from celestial_memory.domain.selection import Selection
from celestial_memory.graph.relations import FOLLOWS, with_edge
from celestial_memory.memory.service import MemoryService
from celestial_memory.store.payload import edge_fields

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "peers"))
from harness import disk_bytes, disk_parts  # peers/harness.py: standard library only
from rebalance import T0, TENANT, open_service, populate
from recall_latency import queries, summary

SESSION = 20  # memories per session
BATCH = 2000  # memories per write_edges call
ABOUT = "about"


def load_order(svc: MemoryService, n: int) -> list[str]:
    """The memories' ids in the order ``populate`` wrote them: it puts the index in the low
    bits of each id (the UUID's variant bits lie above them)."""
    ids = svc.store.members(TENANT, Selection()).ids
    assert len(ids) == n, f"{len(ids)} memories stored, {n} loaded"
    return sorted(ids, key=lambda mid: uuid.UUID(mid).int & (2**62 - 1))


def make_edges(ids: list[str], relations: int, rng: np.random.Generator,
               ) -> tuple[dict[str, list[Edge]], int, int]:
    """Each memory's edge list; how many session and "about" relations it holds."""
    edges: dict[str, list[Edge]] = {mid: [] for mid in ids}
    now = T0
    follows = 0
    for k in range(1, len(ids)):
        if k % SESSION == 0:
            continue  # the first of a session follows nothing
        prev, nxt = ids[k - 1], ids[k]
        edges[nxt], _ = with_edge(edges[nxt], Edge(prev, FOLLOWS, 0.5, "session", now, True))
        edges[prev], _ = with_edge(edges[prev], Edge(nxt, FOLLOWS, 0.5, "session", now, False))
        follows += 1
    n = len(ids)
    targets = rng.integers(0, n - 1, (n, relations))
    weights = rng.uniform(0.3, 1.0, (n, relations))
    about = 0
    for a in range(n):
        src = ids[a]
        for t, w in zip(targets[a].tolist(), weights[a].tolist(), strict=True):
            tgt = ids[t if t < a else t + 1]  # never itself
            out = Edge(tgt, ABOUT, w, "caller", now, True)
            edges[src], new = with_edge(edges[src], out)
            edges[tgt], _ = with_edge(edges[tgt], Edge(src, ABOUT, w, "caller", now, False))
            about += new
    return edges, follows, about


def expected_walk(edges: dict[str, list[Edge]], start: str, depth: int) -> list[tuple[str, int, float]]:
    """Relations.walk's answer over the edge lists written: every memory within ``depth`` steps,
    by its strongest shortest path, nearest first, then strongest, then id."""
    frontier = {start: 1.0}
    seen = {start}
    out: list[tuple[str, int, float]] = []
    for d in range(1, depth + 1):
        found: dict[str, float] = {}
        for mid, strength in frontier.items():
            for e in edges[mid]:
                if e.other in seen:
                    continue
                s = strength * e.weight
                if s > found.get(e.other, -1.0):
                    found[e.other] = s
        if not found:
            break
        level = sorted(found.items(), key=lambda kv: (-kv[1], kv[0]))
        out += [(mid, d, s) for mid, s in level]
        seen.update(found)
        frontier = found
    return out


def interleaved(variants: dict[str, Callable[[object], object]], items: list[object],
                warm: int = 5) -> dict[str, list[float]]:
    """Milliseconds per call of each variant over ``items``: the variants in order on the first
    half, then in reverse order on the second, each after ``warm`` untimed calls."""
    times: dict[str, list[float]] = {v: [] for v in variants}
    half = len(items) // 2
    for order, chunk in ((list(variants), items[:half]), (list(variants)[::-1], items[half:])):
        for v in order:
            call = variants[v]
            for it in chunk[:warm]:
                call(it)
            for it in chunk:
                t = time.perf_counter()
                call(it)
                times[v].append((time.perf_counter() - t) * 1000)
    return times


def reads(svc: MemoryService, qs: list[tuple[list[float], str]], picks: list[list[str]],
          ) -> dict[str, float]:
    """Reads whose cost the edge payload may change, p50 ms: a recall without expansion, the
    zones of 200 memories by id (``store.matching``, as expansion reads its neighbours') and the
    payloads of 10 (``store.get``, a recall's payload stage); the best of two full member scans."""
    out: dict[str, list[float]] = {"recall expand=0": [], "matching 200 ids": [], "get 10 ids": [],
                                   "members() scan": []}
    for vec, text in qs:
        t = time.perf_counter()
        svc.recall(TENANT, RecallQuery(query=text, query_vector=vec, limit=10, reinforce=False,
                                       expand=0))
        out["recall expand=0"].append((time.perf_counter() - t) * 1000)
    for ids in picks:
        t = time.perf_counter()
        svc.store.matching(TENANT, ids=ids, archive=False)
        out["matching 200 ids"].append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        svc.store.get(TENANT, ids[:10])
        out["get 10 ids"].append((time.perf_counter() - t) * 1000)
    for _ in range(2):
        t = time.perf_counter()
        svc.store.members(TENANT, Selection())
        out["members() scan"].append((time.perf_counter() - t) * 1000)
    return {k: min(v) if k == "members() scan" else statistics.median(v) for k, v in out.items()}


def size(path: Path) -> tuple[dict[str, int], dict[str, int]]:
    return disk_bytes(path), disk_parts(path)


def mib(b: float) -> str:
    return f"{b / 2**20:,.1f} MiB"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--relations", type=int, default=8, help='random "about" relations per memory')
    ap.add_argument("--calls", type=int, default=300, help="recalls per expand value, walks per depth")
    ap.add_argument("--checked", type=int, default=30, help="walks checked against the edge lists")
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((1000, 384))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    with tempfile.TemporaryDirectory(prefix="celestial-graph-") as tmp:
        path = Path(tmp)
        svc = open_service(path, ManualClock(T0))
        svc.settings.optimize_interval_s = 0  # built below, timed
        t = time.perf_counter()
        populate(svc, args.memories, rng, centres)
        print(f"loaded {args.memories:,} memories in {time.perf_counter() - t:.1f} s")
        t = time.perf_counter()
        assert svc.build_indexes(), "nothing to build"
        svc.store.flush()
        print(f"indexes built in {time.perf_counter() - t:.1f} s")
        before, before_parts = size(path)
        ids = load_order(svc, args.memories)
        ref_qs = queries(rng, centres, 100)
        picks = [[ids[int(i)] for i in rng.integers(0, len(ids), 200)] for _ in range(30)]
        reads_before = reads(svc, ref_qs, picks)

        # -- 1. relations ---------------------------------------------------------------------
        t = time.perf_counter()
        edges, follows, about = make_edges(ids, args.relations, rng)
        made = time.perf_counter() - t
        ends = sum(len(es) for es in edges.values())
        relations = follows + about
        assert ends == 2 * relations, (ends, relations)
        t = time.perf_counter()
        for start in range(0, len(ids), BATCH):
            svc.store.graph.write_edges(TENANT, {mid: edges[mid] for mid in ids[start:start + BATCH]})
        written = time.perf_counter() - t
        most = max(len(es) for es in edges.values())
        print(f"relations: {relations:,} ({follows:,} follows in sessions of {SESSION}, "
              f"{about:,} about), {ends:,} edge ends ({ends / len(ids):.1f} per memory, at most "
              f"{most}); edge lists made in {made:.1f} s, written in {written:.1f} s "
              f"({len(ids) / written:,.0f} memories/s, {relations / written:,.0f} relations/s, "
              f"{-(-len(ids) // BATCH)} write_edges calls of {BATCH:,} memories)")
        sample = [ids[int(i)] for i in rng.integers(0, len(ids), 50)]
        got = svc.store.graph.edges_of(TENANT, sample)
        bad, ulp = 0, 0.0
        for mid in sample:
            mine, read = (sorted(es, key=lambda e: (e.other, e.relation, e.outgoing))
                          for es in (edges[mid], got.get(mid, [])))
            bad += [replace(e, weight=0.0) for e in mine] != [replace(e, weight=0.0) for e in read]
            ulp = max([ulp, *(abs(a.weight - b.weight) for a, b in zip(mine, read, strict=False))])
        print(f"edges_of read back for 50 random memories: {50 - bad} hold what was written "
              f"(weights within {ulp:.1e}: the engine's payload keeps a float to about 16 digits)")

        qs = queries(rng, centres, args.calls)
        unbuilt = []
        for vec, text in qs[:30]:
            t1 = time.perf_counter()
            svc.recall(TENANT, RecallQuery(query=text, query_vector=vec, limit=10, reinforce=False,
                                           expand=0))
            unbuilt.append((time.perf_counter() - t1) * 1000)
        print(summary("recall expand=0 after the edge writes, before the rebuild", unbuilt))

        # -- 2. indexes -------------------------------------------------------------------------
        t = time.perf_counter()
        service_built = svc.build_indexes()
        svc.store.optimize(min_new=0)
        svc.store.flush()
        print(f"index build after the edge writes: {time.perf_counter() - t:.1f} s "
              f"(service.build_indexes() built: {service_built}; then store.optimize(min_new=0))")
        after, after_parts = size(path)
        reads_after = reads(svc, ref_qs, picks)
        print("reads without -> with the relations, p50 (members: best of two; not interleaved, the "
              "store changed between them): " + "; ".join(
                  f"{k} {reads_before[k]:.2f} -> {reads_after[k]:.2f} ms "
                  f"(x{reads_after[k] / reads_before[k]:.2f})" for k in reads_before))

        # -- 3. recall with expansion -------------------------------------------------------------
        results: dict[int, list[int]] = {0: [], 1: [], 2: []}
        via: dict[int, list[int]] = {0: [], 1: [], 2: []}

        def recall(hops: int) -> Callable[[object], object]:
            def call(q: object) -> object:
                vec, text = q  # type: ignore[misc]
                got = svc.recall(TENANT, RecallQuery(query=text, query_vector=vec, limit=10,
                                                     reinforce=False, expand=hops))
                results[hops].append(len(got))
                via[hops].append(sum(r.via is not None for r in got))
                return got
            return call

        times = interleaved({f"expand={h}": recall(h) for h in (0, 1, 2)}, list(qs))
        for label, ts in times.items():
            h = int(label[-1])
            print(summary(f"recall {label}", ts) + f"; mean {np.mean(results[h]):.2f} results, "
                  f"{np.mean(via[h]):.2f} of them through a relation")
        p50 = {k: statistics.median(v) for k, v in times.items()}
        p90 = {k: sorted(v)[int(0.9 * len(v))] for k, v in times.items()}
        print(f"p50 expand1/expand0 {p50['expand=1'] / p50['expand=0']:.3f}, "
              f"expand2/expand0 {p50['expand=2'] / p50['expand=0']:.3f}; "
              f"p90 expand1/expand0 {p90['expand=1'] / p90['expand=0']:.3f}, "
              f"expand2/expand0 {p90['expand=2'] / p90['expand=0']:.3f}")

        # The entity signal's cost: the same recalls with a name in the query, so the rescoring
        # also reads each candidate's entities (the payload the edges make heavy), with the
        # signal on (the default weight) and off.
        weight = svc.settings.entity_weight

        def named(on: bool) -> Callable[[object], object]:
            def call(q: object) -> object:
                vec, text = q  # type: ignore[misc]
                svc.settings.entity_weight = weight if on else 0.0
                return svc.recall(TENANT, RecallQuery(query=f"Caroline {text}", query_vector=vec,
                                                      limit=10, reinforce=False, expand=0))
            return call

        named_times = interleaved({"entity signal off": named(False),
                                   "entity signal on": named(True)}, list(qs))
        svc.settings.entity_weight = weight
        for label, ts in named_times.items():
            print(summary(f"recall, a name in the query, {label}", ts))
        on_off = (statistics.median(named_times["entity signal on"])
                  / statistics.median(named_times["entity signal off"]))
        print(f"p50 entity signal on/off {on_off:.3f}")

        # -- 4. walks ---------------------------------------------------------------------------
        starts = [ids[int(i)] for i in rng.integers(0, len(ids), args.calls)]
        reached: dict[int, list[int]] = {1: [], 2: []}

        def walk(depth: int) -> Callable[[object], object]:
            def call(mid: object) -> object:
                got = svc.related(TENANT, str(mid), depth)
                reached[depth].append(len(got))
                return got
            return call

        walks = interleaved({"depth 2": walk(2), "depth 1": walk(1)}, list(starts))
        for label, ts in walks.items():
            d = int(label[-1])
            print(summary(f"related {label}", ts) + f"; mean {np.mean(reached[d]):.1f} memories "
                  f"reached (min {min(reached[d])}, max {max(reached[d])})")
        ratio = statistics.median(walks["depth 2"]) / statistics.median(walks["depth 1"])
        print(f"p50 related depth2/depth1 {ratio:.3f}")
        wrong = []
        for mid in starts[:args.checked]:
            for depth in (1, 2):
                got = [(m.id, len(r.path), r.strength) for m, r in svc.related(TENANT, mid, depth)]
                want = expected_walk(edges, mid, depth)[:2000]
                if [g[:2] for g in got] != [w[:2] for w in want] or any(
                        abs(g[2] - w[2]) > 1e-12 for g, w in zip(got, want, strict=True)):
                    wrong.append((mid, depth))
        print(f"walks checked against the edge lists written: {2 * args.checked - len(wrong)} of "
              f"{2 * args.checked} agree" + (f"; differ: {wrong[:5]}" if wrong else ""))
        svc.close()

        # -- 5. bytes per edge ----------------------------------------------------------------------
        for key, label in (("disk_bytes", "allocated"), ("disk_apparent_bytes", "apparent")):
            grown = after[key] - before[key]
            print(f"data folder, {label}: {mib(before[key])} without relations, {mib(after[key])} "
                  f"with; +{mib(grown)} = {grown / ends:.1f} bytes per edge end, "
                  f"{grown / relations:.1f} per relation")
        parts = sorted((p for p in set(before_parts) | set(after_parts)
                        if after_parts.get(p, 0) != before_parts.get(p, 0)),
                       key=lambda p: -(after_parts.get(p, 0) - before_parts.get(p, 0)))
        wal = "write-ahead log"
        grown = (after["disk_bytes"] - after_parts.get(wal, 0)) - (
            before["disk_bytes"] - before_parts.get(wal, 0))
        print(f"data folder, allocated, less the write-ahead log: +{mib(grown)} = "
              f"{grown / ends:.1f} bytes per edge end, {grown / relations:.1f} per relation")
        print("parts that changed, allocated, without -> with (bytes per edge end): " + "; ".join(
            f"{p} {mib(before_parts.get(p, 0))} -> {mib(after_parts.get(p, 0))} "
            f"({(after_parts.get(p, 0) - before_parts.get(p, 0)) / ends:+.1f})" for p in parts))
        js = [len(json.dumps(edge_fields(edges[mid]))) for mid in ids]
        only = [len(json.dumps([e.to_dict() for e in edges[mid]])) for mid in ids]
        print(f"edge payload as JSON (edge_fields: edges and edge_ids): {np.mean(js):,.0f} bytes per "
              f"memory, {sum(js) / ends:.1f} per edge end, {sum(js) / relations:.1f} per relation; "
              f"the edges list alone {sum(only) / ends:.1f} per edge end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
