"""The turn policy is kept: it survives a graceful restart and a kill -9 (once its save behind
has run), Export carries it and Import brings it into another tenant, and an Import whose
policy is damaged or hostile is refused by its field before anything is written, the server
serving on. (What each decision is: test_observe.py.)"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.clock import ManualClock
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder

from tests.integration.conftest import running_server, stub_over
from tests.integration.test_observe import FACT, PLAIN, field_of, refused
from tests.processes import free_port, kill, start, stop

Stub = pb_grpc.MemoryServiceStub
T = "keep"
TURNS = [FACT, "ok thanks", "What is my wife's name?", *PLAIN, "Good morning!",
         "지난번에 얘기했던 여권 만료일이 언제였지?"]


def snapshot(p: pb.GetPolicyResponse) -> pb.GetPolicyResponse:
    """Everything GetPolicy says but when it was saved."""
    out = pb.GetPolicyResponse()
    out.CopyFrom(p)
    out.ClearField("saved_at")
    return out


def read(stub: Stub, tenant: str = T) -> pb.GetPolicyResponse:
    return stub.GetPolicy(pb.GetPolicyRequest(tenant=tenant, last=256), timeout=60)


def turns(stub: Stub, texts: list[str], tenant: str = T) -> list[pb.ObserveResponse]:
    return [stub.Observe(pb.ObserveRequest(tenant=tenant, text=t, session_id=f"s{i % 3}"),
                         timeout=120) for i, t in enumerate(texts)]


def rewards_some(stub: Stub, observed: list[pb.ObserveResponse]) -> None:
    """A SKIP restored (penalised) and a vote on a SAVE: rewards to carry."""
    skipped = next(o for o in observed if o.decision.action == pb.TURN_ACTION_SKIP)
    stub.Restore(pb.RestoreRequest(tenant=T, id=skipped.memory.id), timeout=60)
    saved = next(o for o in observed if o.decision.action == pb.TURN_ACTION_SAVE)
    stub.Feedback(pb.FeedbackRequest(tenant=T, id=saved.memory.id,
                                     verdict=pb.VERDICT_HELPFUL), timeout=60)


@pytest.fixture
def channel() -> Iterator[list[grpc.Channel]]:
    """Channels a test opens, closed whatever its outcome."""
    opened: list[grpc.Channel] = []
    yield opened
    for ch in opened:
        ch.close()


def connect(opened: list[grpc.Channel], port: int) -> Stub:
    ch = grpc.insecure_channel(f"127.0.0.1:{port}")
    opened.append(ch)
    return pb_grpc.MemoryServiceStub(ch)


def test_the_policy_survives_a_restart_and_a_kill(
        tmp_path: Path, channel: list[grpc.Channel]) -> None:
    data, port = tmp_path / "data", free_port()
    proc = start(data, port)
    s = connect(channel, port)
    observed = turns(s, TURNS)
    rewards_some(s, observed)
    before = read(s)
    assert sum(before.decisions.values()) == len(TURNS) and before.rewards >= 2
    stop(proc)  # graceful: the policy is saved on close

    proc = start(data, port)
    s = connect(channel, port)
    assert snapshot(read(s)) == snapshot(before)
    # Decision ids go on from the saved policy's.
    more = turns(s, ["Thanks!", *PLAIN[:2], "I usually go hiking on Saturday mornings"])
    assert more[0].decision.id == len(TURNS) + 1
    s.Feedback(pb.FeedbackRequest(tenant=T, id=more[-1].memory.id,
                                  verdict=pb.VERDICT_NOT_HELPFUL), timeout=60)
    after = read(s)
    done = time.time()
    # Saved behind (CELESTIAL_POLICY_SAVE_S, 1 s by default): wait for a save after the last
    # change, then kill -9, which saves nothing more.
    for _ in range(600):
        p = read(s)
        if p.HasField("saved_at") and p.saved_at.ToDatetime().timestamp() >= done:
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the policy was not saved after its last change")
    kill(proc)

    proc = start(data, port)
    s = connect(channel, port)
    assert snapshot(read(s)) == snapshot(after)
    assert sum(after.decisions.values()) == len(TURNS) + 4
    stop(proc)


# -- Export and Import ----------------------------------------------------------------------


@pytest.fixture
async def server(tmp_path: Path, embedder: SentenceTransformerEmbedder,
                 clock: ManualClock) -> AsyncIterator[MemoryServer]:
    # Messages up to 8 MiB, so that the policy's own limit (4 MiB) is what refuses a 5 MB one.
    async with running_server(tmp_path, embedder, clock, max_message_bytes=8 << 20) as srv:
        yield srv


async def exported(stub: Stub, tenant: str) -> list[pb.ExportedMemory]:
    return [e async for e in stub.Export(pb.ExportRequest(tenant=tenant))]


def into(records: list[pb.ExportedMemory], tenant: str, state: str | None = None,
         ) -> list[pb.ExportedMemory]:
    """The export as an import into ``tenant`` (with another policy state, when given), under
    new ids (a server's ids are its tenants' together)."""
    out = [pb.ExportedMemory() for _ in records]
    for o, r in zip(out, records, strict=True):
        o.CopyFrom(r)
        o.tenant, o.memory.id = "", str(uuid.uuid4())
        o.memory.ClearField("relations")
    out[0].tenant = tenant
    if state is not None:
        out[0].turn_policy.state = state
    return out


async def test_export_and_import_carry_the_policy_to_another_tenant(
        server: MemoryServer, tmp_path: Path, embedder: SentenceTransformerEmbedder,
        clock: ManualClock) -> None:
    async with stub_over("grpc", server) as s, \
            running_server(tmp_path / "other", embedder, clock) as other, \
            stub_over("grpc", other) as o:
        observed = [await s.Observe(pb.ObserveRequest(tenant=T, text=t, session_id=f"s{i % 3}"))
                    for i, t in enumerate(TURNS)]
        skipped = [o for o in observed if o.decision.action == pb.TURN_ACTION_SKIP]
        await s.Restore(pb.RestoreRequest(tenant=T, id=skipped[0].memory.id))
        source = await s.GetPolicy(pb.GetPolicyRequest(tenant=T, last=256))
        records = await exported(s, T)
        assert records[0].turn_policy.state and not any(r.HasField("turn_policy")
                                                        for r in records[1:])
        assert len(records) == len(TURNS)  # the skipped turns too, from the archive
        records[0].tenant = "copy"
        await o.Import(iter(records))
        copy = await o.GetPolicy(pb.GetPolicyRequest(tenant="copy", last=256))
        source.ClearField("saved_at")
        assert copy.HasField("saved_at")  # saved at once
        copy.ClearField("saved_at")
        assert copy == source
        # The copy goes on learning from its memories: its other SKIP, restored, is penalised.
        await o.Restore(pb.RestoreRequest(tenant="copy", id=skipped[1].memory.id))
        after = await o.GetPolicy(pb.GetPolicyRequest(tenant="copy"))
        assert after.rewards == source.rewards + 1
        assert (await s.GetPolicy(pb.GetPolicyRequest(tenant=T))).rewards == source.rewards
        ids = [(await x.Observe(pb.ObserveRequest(tenant=t, text="ok thanks"))).decision.id
               for x, t in ((o, "copy"), (s, T))]
        assert ids == [len(TURNS) + 1] * 2


async def refused_import(stub: Stub, records: list[pb.ExportedMemory]) -> grpc.aio.AioRpcError:
    """The refusal of an Import. Its first message is answered before the rest is sent: a
    write racing a call the server has finished fails on the client side as INTERNAL ("Internal
    error from Core"), hiding the server's code (see test_validation.py)."""
    call: Any = None

    async def stream() -> AsyncIterator[pb.ExportedMemory]:
        yield records[0]
        for _ in range(300):  # a server that reads on (a regression) gets the rest
            if call is not None and call.done():
                return
            await asyncio.sleep(0.01)
        for r in records[1:]:
            yield r

    call = stub.Import(stream())
    return await refused(call)


def damaged(good: str) -> dict[str, str]:
    """Import states that are not a policy this server may take."""
    state = json.loads(good)

    def changed(**at: Any) -> str:
        d = json.loads(good)
        for path, value in at.items():
            *keys, last = path.split("__")
            node = d
            for k in keys:
                node = node[int(k)] if isinstance(node, list) else node[k]
            node[int(last) if isinstance(node, list) else last] = value
        return json.dumps(d)

    dim = state["bandit"]["dim"]
    k = len(state["bandit"]["A"])
    eye = [[float(i == j) for j in range(dim)] for i in range(dim)]
    scored = next(i for i, p in enumerate(state["pending"]) if p["decision"]["trace"]["scores"])
    return {
        "not JSON": "{turn policy",
        "a JSON list": "[1, 2, 3]",
        "JSON of the wrong shape": json.dumps({"version": state["version"], "hello": "world"}),
        "another version": changed(version=99),
        "a matrix of the wrong size": changed(bandit__A=[[[1.0, 0.0], [0.0, 1.0]]] * k),
        "a matrix with NaN": changed(bandit__A=[[[float("nan")] * dim] * dim] * k),
        "a singular matrix": changed(bandit__A=[[[0.0] * dim] * dim] * k),
        "a matrix past its bound": changed(bandit__A=[[[1e9 * v for v in row] for row in eye]] * k),
        "a huge b": changed(bandit__b=[[1e300] * dim] * k),
        "a decision without its features": changed(**{
            f"pending__{scored}__decision__trace__features": {}}),
        "features out of range": changed(**{
            f"pending__{scored}__decision__trace__features": {
                n: 1e300 for n in state["pending"][scored]["decision"]["trace"]["features"]}}),
        "counts without their actions": changed(counters__decisions={}),
        "ids that go back": changed(next_id=1),
        "deep nesting": "[" * 100_000 + "]" * 100_000,
        "5 MB": json.dumps({"version": 1, "pad": "x" * 5_000_000}),
    }


async def test_a_damaged_or_hostile_policy_is_refused_before_anything_is_written(
        server: MemoryServer) -> None:
    async with stub_over("grpc", server) as s:
        for i, t in enumerate(TURNS):
            await s.Observe(pb.ObserveRequest(tenant=T, text=t, session_id=f"s{i % 3}"))
        records = await exported(s, T)
        good = records[0].turn_policy.state
        for name, state in damaged(good).items():
            err = await refused_import(s, into(records, "bad", state))
            assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, (name, err)
            assert field_of(err) == "turn_policy.state", (name, err.details())
            stats = await s.Stats(pb.StatsRequest(tenant="bad"))
            assert (stats.total, stats.archived) == (0, 0), name  # nothing written
            assert sum((await s.GetPolicy(pb.GetPolicyRequest(tenant="bad"))
                        ).decisions.values()) == 0, name
        # Settings are the server's: an imported state that widens its own is held to them.
        wide = json.loads(good)
        wide["config"]["bandit"].update(epsilon=1.0, max_norm=1e12, alpha=1e6)
        wide["bandit"]["config"].update(epsilon=1.0, max_norm=1e12, alpha=1e6)
        await s.Import(iter(into(records, "wide", json.dumps(wide))))
        mine = server.service.observing.policies.of(T).config
        assert server.service.observing.policies.of("wide").config == mine
        held = await s.GetPolicy(pb.GetPolicyRequest(tenant="wide"))
        assert held.exploration == mine.bandit.epsilon
        # Still serving, and each tenant's policy still decides.
        for tenant in (T, "wide"):
            d = (await s.Observe(pb.ObserveRequest(tenant=tenant, text=PLAIN[3]))).decision
            assert d.trace.phase == 2 and max(map(abs, d.trace.scores.values())) < 100
