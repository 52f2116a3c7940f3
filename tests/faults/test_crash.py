"""kill -9 in the middle of writes, a rebalance and an import, on the embedded store: after a
restart every acknowledged memory is there, every memory a capacity eviction moved has its
event in the ledger, no import left a half-written memory, and the next rebalance runs.

Invariant for evictions: capacity pushes a memory outward of the zone its score earns, and only
capacity does (a score move puts it where its score says), so a memory sitting outward of its
score's zone must have a capacity event moving it there. The ledger is written before the zone.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc

from tests.processes import free_port, start, stop

THRESHOLDS = (0.50, 0.30, 0.10, -0.10)
DIM = 384
Stub = pb_grpc.MemoryServiceStub
# Each start of a fresh data folder would export the encoder again (conftest.py).
pytestmark = pytest.mark.usefixtures("shared_encoder")


def _stub(port: int) -> tuple[grpc.Channel, pb_grpc.MemoryServiceStub]:
    ch = grpc.insecure_channel(f"127.0.0.1:{port}")
    return ch, pb_grpc.MemoryServiceStub(ch)


def _score_zone(score: float) -> int:
    """The proto zone (CORE = 1 ... CLOUD = 5) a score earns."""
    return 1 + sum(score < t for t in THRESHOLDS)


def _vectors(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _requests(tenant: str, start_at: int, n: int) -> Iterator[pb.StoreRequest]:
    for i, v in enumerate(_vectors(n, start_at), start_at):
        yield pb.StoreRequest(tenant=tenant, content=f"note {i}", importance=0.5,
                              vector=v.tolist())


def _export(stub: pb_grpc.MemoryServiceStub, tenant: str) -> dict[str, pb.ExportedMemory]:
    return {e.memory.id: e for e in stub.Export(pb.ExportRequest(tenant=tenant), timeout=120)}


def _check_evictions(stub: pb_grpc.MemoryServiceStub, tenant: str) -> int:
    """Every memory outward of its score's zone has a capacity event to where it is; returns
    how many such memories there are."""
    memories = _export(stub, tenant)
    last_move: dict[str, int] = {}
    seen: set[str] = set()
    req = pb.LedgerRequest(tenant=tenant, limit=10_000)
    while True:  # pages by an inclusive ``since``; events of one batch share a time
        events = stub.Ledger(req, timeout=60).events
        for e in events:  # oldest first
            if e.id not in seen and e.reason == "capacity":
                last_move[e.memory_id] = e.to_zone
            seen.add(e.id)
        if len(events) < req.limit:
            break
        assert events[0].at != events[-1].at, "one time's events fill a whole page"
        req.since.CopyFrom(events[-1].at)
    evicted = [m for m in memories.values() if m.memory.zone > _score_zone(m.memory.score)]
    missing = [m.memory.id for m in evicted if last_move.get(m.memory.id) != m.memory.zone]
    assert not missing, f"{len(missing)} of {len(evicted)} evicted memories have no event"
    return len(evicted)


@contextlib.contextmanager
def _serving(data_dir: Path, port: int, **env: str) -> Iterator[Stub]:
    """A server process on ``data_dir`` and a stub to it; the process is killed on exit."""
    proc = start(data_dir, port, **env)
    try:
        ch, stub = _stub(port)
        with ch:
            yield stub
    finally:
        proc.kill()
        proc.wait()


def _killed_during(proc: subprocess.Popen[bytes], port: int, call: Callable[[Stub], Any],
                   after_s: float) -> None:
    """Make ``call`` from another thread, kill -9 the server ``after_s`` later, and check the
    call had not finished (else the test would show nothing about a crash)."""
    done = threading.Event()

    def run() -> None:
        ch, stub = _stub(port)
        with ch:
            try:
                call(stub)
                done.set()
            except grpc.RpcError:
                pass

    runner = threading.Thread(target=run)
    runner.start()
    time.sleep(after_s)
    proc.kill()
    proc.wait()
    runner.join(30)
    assert not done.is_set(), "the call finished before the kill: give it more to do"


def _rebalance_runs(stub: pb_grpc.MemoryServiceStub, tenant: str) -> None:
    started = time.monotonic()
    stub.Rebalance(pb.RebalanceRequest(tenant=tenant), timeout=60)  # not blocked by a lease
    assert time.monotonic() - started < 30


def test_kill_during_writes_that_overflow_zones(tmp_path: Path) -> None:
    port = free_port()
    caps = json.dumps([2, 5, 40, 0, 0])
    proc = start(tmp_path, port, CELESTIAL_ZONE_CAPACITIES=caps)
    acked: list[str] = []
    stop = threading.Event()

    def write() -> None:
        ch, stub = _stub(port)
        n = 0
        with ch:
            while not stop.is_set():
                try:
                    reply = stub.StoreBatch(_requests("w", n, 200), timeout=30)
                    acked.extend(reply.ids)
                    one = stub.Store(next(_requests("w", n + 200, 1)), timeout=30)
                    acked.append(one.memory.id)
                except grpc.RpcError:
                    return
                n += 201

    writer = threading.Thread(target=write)
    writer.start()
    time.sleep(6)
    proc.kill()
    proc.wait()
    stop.set()
    writer.join(30)
    assert len(acked) > 400, "the writer should have been acknowledged several batches"

    with _serving(tmp_path, port, CELESTIAL_ZONE_CAPACITIES=caps) as stub:
        present = _export(stub, "w")
        assert set(acked) <= set(present), f"{len(set(acked) - set(present))} acked lost"
        assert _check_evictions(stub, "w") > 0
        _rebalance_runs(stub, "w")


def test_kill_during_a_rebalance_with_capacity_evictions(tmp_path: Path) -> None:
    port = free_port()
    unbounded = json.dumps([0, 0, 0, 0, 0])
    # Unbounded zones: nothing is evicted yet.
    with _serving(tmp_path, port, CELESTIAL_ZONE_CAPACITIES=unbounded) as stub:
        # Under 10,000 evictions: they share one time, and the ledger pages by time.
        for start_at in range(0, 9900, 3300):
            stub.StoreBatch(_requests("r", start_at, 3300), timeout=120)
        before = _export(stub, "r")

    # Smaller capacities: the next rebalance evicts thousands. It is killed while it runs.
    caps = json.dumps([2, 5, 30, 0, 0])
    proc = start(tmp_path, port, CELESTIAL_ZONE_CAPACITIES=caps)
    # It takes about 1 s here, the evictions last (a Ledger call would wait for it to end).
    _killed_during(proc, port, lambda stub: stub.Rebalance(
        pb.RebalanceRequest(tenant="r", full=True), timeout=120), after_s=0.55)

    with _serving(tmp_path, port, CELESTIAL_ZONE_CAPACITIES=caps) as stub:
        assert set(_export(stub, "r")) == set(before)
        _check_evictions(stub, "r")
        _rebalance_runs(stub, "r")  # the killed rebalance's lease does not block this one
        assert _check_evictions(stub, "r") > 9800  # and it finished the evictions


def test_kill_during_an_import(tmp_path: Path) -> None:
    port = free_port()
    with _serving(tmp_path / "source", port) as stub:
        for start_at in range(0, 10_000, 2500):
            stub.StoreBatch(_requests("i", start_at, 2500), timeout=120)
        source = _export(stub, "i")
        for e in source.values():
            e.tenant = "i"  # the tenant an import writes to

    target = tmp_path / "target"
    proc = start(target, port)
    _killed_during(proc, port, lambda stub: stub.Import(iter(source.values()), timeout=120),
                   after_s=0.8)

    with _serving(target, port) as stub:
        present = _export(stub, "i")
        print(f"{len(present)} of {len(source)} imported before the kill")
        assert 0 < len(present) < len(source)
        for mid, e in present.items():  # nothing half-written
            s = source[mid].memory
            assert (e.memory.content, e.memory.importance) == (s.content, s.importance)
            assert np.allclose(e.vector, source[mid].vector, atol=1e-6)
        # Sending the whole import again completes it: what is there already is skipped.
        again = stub.Import(iter(source.values()), timeout=300)
        assert (again.imported, again.skipped) == (len(source) - len(present), len(present))
        assert stub.Stats(pb.StatsRequest(tenant="i")).total == len(source)


def test_kill_right_after_recalls_loses_no_reinforcement(tmp_path: Path) -> None:
    """Reinforcement is written behind (journaled): every recall acknowledged before a kill -9
    counts after the restart. The kill follows the last answer at once, inside the flush bound."""
    port = free_port()
    proc = start(tmp_path, port, CELESTIAL_REINFORCE_FLUSH_MS="100")
    vectors = _vectors(20, 77)
    ch, stub = _stub(port)
    returned: dict[str, int] = {}
    with ch:
        ids = list(stub.StoreBatch(iter([
            pb.StoreRequest(tenant="k", content=f"fact {i}", vector=v.tolist())
            for i, v in enumerate(vectors)]), timeout=60).ids)
        for i in range(300):
            v = vectors[i % 7 if i % 3 else i % 20]
            (r,) = stub.Recall(pb.RecallRequest(tenant="k", query_vector=v.tolist(), limit=1,
                                                min_relevance=0.5), timeout=30).results
            returned[r.memory.id] = returned.get(r.memory.id, 0) + 1
        proc.kill()
    proc.wait()

    # The restarted server is checked, then serves the second part (a start fewer).
    proc = start(tmp_path, port, CELESTIAL_REINFORCE_FLUSH_MS="100")
    ch, stub = _stub(port)
    with ch:
        counts = {i: stub.Get(pb.GetRequest(tenant="k", id=i)).memory.recall_count for i in ids}
        assert counts == {i: returned.get(i, 0) for i in ids}

        # Then a graceful stop right after more recalls: they count after the next start too.
        for i in range(60):
            (r,) = stub.Recall(pb.RecallRequest(tenant="k", query_vector=vectors[i % 20].tolist(),
                                                limit=1, min_relevance=0.5), timeout=30).results
            returned[r.memory.id] = returned.get(r.memory.id, 0) + 1
    stop(proc)
    with _serving(tmp_path, port) as stub:
        counts = {i: stub.Get(pb.GetRequest(tenant="k", id=i)).memory.recall_count for i in ids}
        assert counts == {i: returned.get(i, 0) for i in ids}
        assert sum(counts.values()) == 360
