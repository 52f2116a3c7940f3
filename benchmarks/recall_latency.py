"""Recall latency through gRPC at scale, on the embedded store, without the query embedding.

Loads N memories (default 100,000; precomputed 384-d vectors around 1,000 centres, ten-word
texts) into Qdrant Edge, builds the vector indexes as the server's background task does, then
serves the store over gRPC and times Recall calls that pass their query vector (so no model runs)
and a two-word keyword query: hybrid candidates in all five zones, rescoring, zone order and the
reinforcement. Reports p50 / p90 through gRPC with the default settings (reinforcement journaled
and written behind) and, in-process, the same recall three ways in one run: writing the
reinforcement through (``reinforce_flush_ms`` 0), journaled and written behind within 50 ms, and
not reinforcing; and beside them the raw engine doing the
same work with no service around it (the five zone queries in one batch, the four rescoring
queries over their union, the payloads of the ten best, ten payload writes), and a table of a
recall's stages through gRPC beside that raw engine (the service's own stages, the protobuf
conversion and the transport). Each way runs
twice, in the order A B C D then D C B A, with half the calls each time, so drift on the noisy
machine falls on all alike; each run is long enough that a write-behind flusher's lag stays
inside it. Last, the archive's cost: the same recalls (not reinforced, so the state stays put) with
none of the memories archived and with a fifth of them archived, each state once with the
default deep recall and once with ``deep=False`` (what a recall costs when it does not need the
archive); the states run archived, none, none, archived, and the indexes are built after each
flip, because the engine keeps points whose payload changed outside its indexes until then.

    python benchmarks/recall_latency.py [--memories 100000] [--calls 300] [--archive-only]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np
import qdrant_edge as qe
from celestial_client import AsyncCelestialClient
from celestial_client.v1 import memory_pb2 as pb
from celestial_memory.api.grpc import converters as cv
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.clock import ManualClock
from celestial_memory.domain.requests import RecallQuery
from celestial_memory.domain.selection import Selection
from celestial_memory.domain.zones import Zone
from celestial_memory.memory.service import MemoryService

sys.path.insert(0, str(Path(__file__).parent))
from grpc_latency import stage_seconds
from rebalance import DIM, NOISE, T0, TENANT, VOCAB, open_service, populate


def queries(rng: np.random.Generator, centres: np.ndarray, n: int) -> list[tuple[list[float], str]]:
    q = centres[rng.integers(0, len(centres), n)] + NOISE * rng.standard_normal((n, DIM))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    words = [f"{VOCAB[a]} {VOCAB[b]}" for a, b in rng.integers(0, len(VOCAB), (n, 2))]
    return list(zip(q.tolist(), words, strict=True))


def in_process(
    svc: MemoryService, qs: list[tuple[list[float], str]], reinforce: bool = True
) -> list[float]:
    times = []
    for vec, text in qs:
        t = time.perf_counter()
        svc.recall(TENANT, RecallQuery(query=text, query_vector=vec, limit=10, reinforce=reinforce))
        times.append((time.perf_counter() - t) * 1000)
    return times


STAGES = ("zone queries", "rescoring", "payloads", "writes")


def raw_engine(
    svc: MemoryService, qs: list[tuple[list[float], str]],
    stages: dict[str, list[float]] | None = None,
) -> list[float]:
    """The engine's share of a recall: the same requests straight to Qdrant Edge, with the
    query's keyword vector made beforehand (see the module docstring). Each stage's time goes
    to ``stages`` when given."""
    shard = svc.store.engine._memories  # the benchmark's own look inside the embedded engine
    tenant = qe.FieldCondition("tenant", match=qe.MatchValue(TENANT))
    quantized = qe.SearchParams(hnsw_ef=48, quantization=qe.QuantizationSearchParams(
        rescore=True, oversampling=2.0))
    exact = qe.SearchParams(quantization=qe.QuantizationSearchParams(ignore=True))
    prepared = [(vec, svc.retrieval.keywords.query(text)) for vec, text in qs]
    times = []
    for vec, kw in prepared:
        t = time.perf_counter()
        sparse = qe.SparseVector(kw.indices, kw.values)
        dense = qe.Query.Nearest(vec, using="dense")
        words = [qe.Query.Nearest(sparse, using=u) for u in ("keywords", "keywords_context")]
        prefetches = [qe.Prefetch(limit=30, query=dense, params=quantized),
                      *(qe.Prefetch(limit=30, query=w) for w in words)]
        batches = shard.query_batch(qe.QueryBatchRequest([
            qe.QueryRequest(limit=30, prefetches=prefetches, query=qe.Fusion.Rrf(k=60),
                            with_payload=False, filter=qe.Filter(must=[
                                tenant, qe.FieldCondition("zone", match=qe.MatchValue(z))]))
            for z in range(5)
        ]))
        ids = list(dict.fromkeys(p.id for b in batches for p in b))
        t1 = time.perf_counter()
        f = qe.Filter(must=[tenant, qe.HasIdCondition(set(ids))])
        rescored = shard.query_batch(qe.QueryBatchRequest([
            qe.QueryRequest(limit=len(ids), query=q, filter=f, with_payload=False, params=exact)
            for q in (dense, qe.Query.Nearest(vec, using="dense_context"), *words)
        ]))
        scores = {p.id: p.score for p in rescored[0]}  # the service weighs all four signals
        best = sorted(scores, key=scores.__getitem__, reverse=True)[:10]
        t2 = time.perf_counter()
        records = shard.retrieve(best, with_payload=True, with_vector=False)
        t3 = time.perf_counter()
        for r in records:
            p = r.payload or {}
            fields = {k: p[k] for k in ("zone", "score", "context_score", "drop_core",
                                        "drop_inner", "drop_outer", "drop_belt")}
            shard.update(qe.UpdateOperation.set_payload([r.id], {
                **fields, "recall_count": p["recall_count"] + 1, "last_recalled_at": T0,
                "written_at": T0}))
        t4 = time.perf_counter()
        for stage, a, b in zip(STAGES, (t, t1, t2, t3), (t1, t2, t3, t4), strict=True):
            if stages is not None:
                stages.setdefault(stage, []).append((b - a) * 1000)
        times.append((t4 - t) * 1000)
    return times


def compare_modes(path: Path, qs: list[tuple[list[float], str]]) -> dict[str, list[float]]:
    """Write-through, write-behind, no reinforcement, raw engine (see the module docstring)."""
    modes = {"write-through": (0.0, True), "journaled write-behind (50 ms)": (50.0, True),
             "no reinforcement": (0.0, False), "raw engine": (0.0, False)}
    times: dict[str, list[float]] = {m: [] for m in modes}
    stages: dict[str, list[float]] = {}
    # Each way gets its own queries: a memory written once is cheaper to write again.
    own = {m: qs[i::len(modes)] for i, m in enumerate(modes)}
    for second, order in ((False, list(modes)), (True, list(modes)[::-1])):
        for mode in order:
            half = len(own[mode]) // 2
            chunk = own[mode][half:] if second else own[mode][:half]
            flush_ms, reinforce = modes[mode]
            svc = open_service(path, ManualClock(T0), reinforce_flush_ms=flush_ms,
                               optimize_interval_s=0)
            for warm, calls in ((True, chunk[:5]), (False, chunk)):  # warm after the reopen
                ts = (raw_engine(svc, calls, None if warm else stages) if mode == "raw engine"
                      else in_process(svc, calls, reinforce))
                if not warm:
                    times[mode] += ts
            svc.close()
    for mode, ts in times.items():
        print(summary(f"in-process, {mode}", ts))
    print("raw engine by stage, p50: " + ", ".join(
        f"{stage} {statistics.median(ts):.2f} ms" for stage, ts in stages.items()))
    return times


async def _client_calls(target: str, qs: list[tuple[list[float], str]]) -> list[float]:
    times = []
    async with AsyncCelestialClient(target, tenant=TENANT) as c:
        for vec, text in qs:
            t = time.perf_counter()
            await c.recall(text, 10, query_vector=vec)
            times.append((time.perf_counter() - t) * 1000)
    return times


def _client_process(target: str, qs: list[tuple[list[float], str]], out: Connection) -> None:
    out.send(asyncio.run(_client_calls(target, qs)))


async def through_grpc(
    svc: MemoryService, qs: list[tuple[list[float], str]]
) -> tuple[list[float], list[float], dict[str, float]]:
    """Timed by a client in its own process (as callers are: they do not share the server's
    interpreter lock), then by one in the server's process; half of the calls each. Also the
    service's own stages over the first half, in milliseconds per recall (mean), and what
    converting a recall's results to protobuf costs ("conversion")."""
    srv = MemoryServer(svc, "127.0.0.1:0")
    await srv.start()
    target, half = f"127.0.0.1:{srv.port}", len(qs) // 2
    try:
        receive, send = multiprocessing.get_context("spawn").Pipe(duplex=False)
        proc = multiprocessing.get_context("spawn").Process(
            target=_client_process, args=(target, qs[:half], send))
        before = stage_seconds()
        proc.start()
        own_process = await asyncio.to_thread(receive.recv)
        await asyncio.to_thread(proc.join)
        after = stage_seconds()
        stages = {k: (v - before.get(k, 0.0)) * 1000 / half for k, v in after.items()}
        same_process = await _client_calls(target, qs[half:])
        stages["conversion"] = statistics.median(
            await asyncio.to_thread(conversion, svc, qs[half:half + 100]))
    finally:
        await srv.stop(0)  # closes the service and its store
    return own_process, same_process, stages


def conversion(svc: MemoryService, qs: list[tuple[list[float], str]]) -> list[float]:
    """Milliseconds to convert each recall's results to the protobuf answer, as Recall does."""
    out = []
    for vec, text in qs:
        rs = svc.recall(TENANT, RecallQuery(query=text, query_vector=vec, limit=10,
                                            reinforce=False))
        t = time.perf_counter()
        pb.RecallResponse(results=[cv.recall_result_to_pb(r, svc.breakdown(r.memory),
                                                          svc.next_move(r.memory))
                                   for r in rs]).SerializeToString()
        out.append((time.perf_counter() - t) * 1000)
    return out


def stage_table(grpc_ms: list[float], stages: dict[str, float],
                modes: dict[str, list[float]]) -> None:
    """A recall through gRPC by stage beside the raw engine doing the same requests."""
    inproc = statistics.median(modes["journaled write-behind (50 ms)"])
    raw = statistics.median(modes["raw engine"])
    grpc_p50 = statistics.median(grpc_ms)
    conv = stages.pop("conversion")
    print("\na recall's stages, ms per recall (the service's stages: mean over the gRPC calls "
          "of a client in its own process)")
    for k, v in sorted(stages.items(), key=lambda kv: -kv[1]):
        print(f"  {k:52s} {v:7.3f}")
    for name, ms in (("recall in-process, journaled write-behind (p50)", inproc),
                     ("protobuf conversion (p50)", conv),
                     ("transport (gRPC p50 - in-process p50 - conversion)",
                      grpc_p50 - inproc - conv),
                     ("recall through gRPC, client in its own process (p50)", grpc_p50),
                     ("raw engine, the same requests (p50)", raw)):
        print(f"  {name:52s} {ms:7.3f}")
    print(f"through gRPC / raw engine, p50: {grpc_p50 / raw:.2f}")


def archive_overhead(path: Path, qs: list[tuple[list[float], str]]) -> None:
    """Recall p50 with a fifth of the memories in the archive against none (see the module
    docstring), each state followed by an index build so neither is timed over points that the
    flip left unindexed; and how many recalls searched the archive under the default gate."""
    svc = open_service(path, ManualClock(T0), optimize_interval_s=0)
    total = svc.stats(TENANT).total
    live = svc.store.members(TENANT, Selection())
    pick = np.random.default_rng(11).permutation(len(live.ids))[: total // 5]
    ids, zones = [live.ids[i] for i in pick], live.zone[pick]
    deep = 0

    def timed(calls: list[tuple[list[float], str]], use_deep: bool | None) -> list[float]:
        nonlocal deep
        out = []
        for vec, text in calls:
            q = RecallQuery(query=text, query_vector=vec, limit=10, reinforce=False,
                            deep=use_deep)
            t = time.perf_counter()
            got = svc.recall(TENANT, q)
            out.append((time.perf_counter() - t) * 1000)
            deep += use_deep is None and any(r.archived for r in got)
        return out

    def build(state: str) -> None:
        t = time.perf_counter()
        svc.store.optimize(min_new=0)
        print(f"index build after {state}: {time.perf_counter() - t:.1f} s")

    ways = [("none", None), ("none", False), ("archived", None), ("archived", False)]
    times: dict[tuple[str, bool | None], list[float]] = {w: [] for w in ways}
    half = len(qs) // 2
    for state, order, calls in (("archived", ways[2:], qs[:half]),
                                ("none", ways[:2][::-1], qs[:half]),
                                ("none", ways[:2], qs[half:]),
                                ("archived", ways[2:][::-1], qs[half:])):
        archived = svc.stats(TENANT).archived > 0
        if state == "archived" and not archived:
            svc.store.archive(ids, T0)
            build(f"archiving {len(ids):,}")
        elif state == "none" and archived:
            for z in np.unique(zones):
                svc.store.set_zone(TENANT, Zone(int(z)),
                                   ids=[i for i, x in zip(ids, zones, strict=True) if x == z])
            build("restoring them")
        for way in order:
            timed(calls[:5], way[1])
            times[way] += timed(calls, way[1])
    svc.close()
    for (state, use_deep), ts in times.items():
        label = ("no archive" if state == "none" else f"{len(ids):,} archived") + (
            ", deep=False" if use_deep is False else ", deep recall (default)")
        print(summary(f"in-process, not reinforced, {label}", ts))
    p50 = {w: statistics.median(ts) for w, ts in times.items()}
    print(f"p50 archived / no archive: deep=False (the archive not needed) "
          f"{p50[ways[3]] / p50[ways[1]]:.3f}, deep recall (default) "
          f"{p50[ways[2]] / p50[ways[0]]:.3f}; default recalls that returned an archived "
          f"memory: {deep} of {len(times[ways[2]])}")


def summary(label: str, times: list[float]) -> str:
    s = sorted(times)
    return (f"{label}: p50 {statistics.median(s):.2f} ms, p90 {s[int(0.9 * len(s))]:.2f} ms "
            f"({len(s)} calls)")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--archive-only", action="store_true",
                    help="load, build the indexes and time only the archive's cost")
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((1000, DIM))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    with tempfile.TemporaryDirectory() as tmp:
        svc = open_service(Path(tmp), ManualClock(T0))
        svc.settings.optimize_interval_s = 0  # built once below, timed
        t = time.perf_counter()
        populate(svc, args.memories, rng, centres)
        print(f"loaded {args.memories:,} memories in {time.perf_counter() - t:.1f} s")
        print(summary("in-process before the index build", in_process(svc, queries(rng, centres, 30))))
        t = time.perf_counter()
        assert svc.store.optimize(), "nothing to build"
        print(f"vector indexes built in {time.perf_counter() - t:.1f} s")
        if args.archive_only:
            svc.close()
        else:
            own, same, stages = asyncio.run(
                through_grpc(svc, queries(rng, centres, 2 * args.calls)))
            print(summary("through gRPC, client in its own process", own))
            print(summary("through gRPC, client in the server's process", same))
            modes = compare_modes(Path(tmp), queries(rng, centres, 4 * args.calls))
            stage_table(own, stages, modes)
        archive_overhead(Path(tmp), queries(rng, centres, 2 * args.calls))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
