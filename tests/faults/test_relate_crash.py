"""kill -9 in a loop of Relate calls, 10 times, on the embedded store: after the last restart
every relation is known at both of its ends, and every Relate that was acknowledged is there.
A Relate writes its two ends as separate engine operations; the intent it writes first is what
the restarted server finishes (store/graph_store.py)."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import grpc
import pytest
from celestial_client.v1 import memory_pb2 as pb

from tests.faults.test_crash import _export, _serving, _stub, _vectors
from tests.processes import START_S, free_port, kill, start

T = "rel"
KILLS = 10  # each a server start (seconds on a loaded machine): the suite's longest test
RELATE_S = 30.0  # a bound on one Relate (it takes milliseconds)
# Each start of a fresh data folder would export the encoder again (conftest.py).
pytestmark = pytest.mark.usefixtures("shared_encoder")


def _relate_until_killed(port: int, ids: list[str], seed: int,
                         acked: set[tuple[str, str, str]], relating: threading.Event) -> None:
    rng = random.Random(seed)
    ch, stub = _stub(port)
    with ch:
        while True:
            a, b = rng.sample(ids, 2)
            name = rng.choice(["about", "before", "cites"])
            try:
                stub.Relate(pb.RelateRequest(tenant=T, from_id=a, to_id=b, relation=name,
                                             weight=rng.random()), timeout=RELATE_S)
            except grpc.RpcError:
                return  # the server is gone
            acked.add((a, b, name))
            relating.set()


# Each of the KILLS + 2 starts is bounded by START_S, and a loaded machine's start takes far
# longer than the suite's default allows for all of them.
@pytest.mark.timeout((KILLS + 2) * (START_S + RELATE_S))
def test_kill_during_relates_leaves_no_relation_at_one_end_only(tmp_path: Path) -> None:
    port = free_port()
    proc = start(tmp_path, port)
    ch, stub = _stub(port)
    with ch:
        ids = list(stub.StoreBatch(iter([
            pb.StoreRequest(tenant=T, content=f"point {i}", vector=v.tolist())
            for i, v in enumerate(_vectors(24, 5))]), timeout=START_S).ids)
    acked: set[tuple[str, str, str]] = set()
    rng = random.Random(11)
    for k in range(KILLS):
        if k:
            proc = start(tmp_path, port)
        relating = threading.Event()
        worker = threading.Thread(target=_relate_until_killed,
                                  args=(port, ids, k, acked, relating))
        worker.start()
        try:
            # Killed among Relates however slow the machine: once one was answered, then at a
            # random point of the calls that follow.
            assert relating.wait(RELATE_S), "no Relate was answered"
            threading.Event().wait(rng.uniform(0.0, 0.6))
        finally:
            kill(proc)
            worker.join(RELATE_S)

    with _serving(tmp_path, port) as stub:
        memories = _export(stub, T)
    ends = {(mid, r.id, r.relation, r.outgoing)
            for mid, e in memories.items() for r in e.memory.relations}
    one_sided = [x for x in ends if (x[1], x[0], x[2], not x[3]) not in ends]
    assert one_sided == []
    missing = [x for x in acked if (x[0], x[1], x[2], True) not in ends]
    assert missing == []
