"""Sharing turn policies between nodes over the wire (api/grpc/gossip.py, sharing/node.py):
real servers on loopback, and fake peers (a bare PolicySharingService server) where a test needs a
peer that records what it is sent, or one that lies. Rounds are driven by the test
(``server.gossip.round()``), the background rounds set an hour apart."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from celestial_client import CelestialClient, PolicyStatus
from celestial_client.cli.output import as_json
from celestial_client.cli.policy import show_policy
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from celestial_memory.access.keys import create_key
from celestial_memory.api.grpc.gossip import update_to_pb
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.observability import metrics
from celestial_memory.sharing import PolicyUpdate, of

from tests.certs import CertificateAuthority
from tests.processes import free_port
from tests.unit.test_sharing import TENANT, TURNS, WORDS, trained

HOUR = 3600.0


def sharing(ports: list[int], me: int, **more: Any) -> dict[str, Any]:
    """Settings of the node on ``ports[me]`` sharing with the others."""
    return {"policy_peers": [f"127.0.0.1:{p}" for p in ports],
            "policy_share_address": f"127.0.0.1:{ports[me]}",
            "policy_share_interval_s": HOUR, "policy_share_fanout": len(ports), **more}


@asynccontextmanager
async def node(tmp: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock,
               port: int, seed: int | None = None, **settings: Any) -> AsyncIterator[MemoryServer]:
    """A server on ``port`` whose tenant's policy was trained with ``seed`` (None: untrained)."""
    fields: dict[str, Any] = {"rebalance_interval_s": 0, "grace_seconds": 1, **settings}
    service = build_service(Settings(data_dir=tmp, **fields), embedder=embedder, clock=clock)
    srv = MemoryServer(service, f"127.0.0.1:{port}")
    await srv.start()
    try:
        if seed is not None:
            state = json.dumps(trained(seed=seed).to_dict())
            srv.service.observing.policies.restore(TENANT, state, replace=True)
        yield srv
    finally:
        await srv.stop()


class FakePeer(pb_grpc.PolicySharingServiceServicer):
    """A peer that records every request and answers ``answer()`` (None: no update)."""

    def __init__(self, address: str, answer: Callable[[], pb.SharedPolicy | None]) -> None:
        self.address, self.answer = address, answer
        self.requests: list[bytes] = []

    async def ExchangePolicy(self, request: pb.ExchangePolicyRequest,
                             context: Any) -> pb.ExchangePolicyResponse:
        self.requests.append(request.SerializeToString())
        out = pb.ExchangePolicyResponse(node=self.address)
        if (u := self.answer()) is not None:
            out.update.CopyFrom(u)
        return out


@asynccontextmanager
async def fake_peer(port: int, answer: Callable[[], pb.SharedPolicy | None],
                    delay_s: float = 0.0) -> AsyncIterator[FakePeer]:
    peer = FakePeer(f"127.0.0.1:{port}", answer)
    if delay_s:  # a slow peer: answers after ``delay_s``
        inner = peer.ExchangePolicy

        async def slow(request: Any, context: Any) -> pb.ExchangePolicyResponse:
            await asyncio.sleep(delay_s)
            return await inner(request, context)

        peer.ExchangePolicy = slow  # type: ignore[method-assign]
    server = grpc.aio.server()
    pb_grpc.add_PolicySharingServiceServicer_to_server(peer, server)
    server.add_insecure_port(peer.address)
    await server.start()
    try:
        yield peer
    finally:
        await server.stop(0)


async def exchange(port: int, request: pb.ExchangePolicyRequest,
                   key: str | None = None) -> pb.ExchangePolicyResponse:
    metadata = (("authorization", f"Bearer {key}"),) if key else ()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        answer: pb.ExchangePolicyResponse = await pb_grpc.PolicySharingServiceStub(
            channel).ExchangePolicy(request, timeout=30, metadata=metadata)
        return answer


async def status(srv: MemoryServer) -> pb.PolicySharingStatus:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as channel:
        answer = await pb_grpc.MemoryServiceStub(channel).GetPolicy(
            pb.GetPolicyRequest(tenant=TENANT), timeout=30)
    return answer.sharing


def peer_of(s: pb.PolicySharingStatus, port: int) -> pb.PeerSharingStatus:
    return next(p for p in s.peers if p.peer == f"127.0.0.1:{port}")


def honest(seed: int) -> pb.SharedPolicy:
    return update_to_pb(of(trained(seed=seed)))


async def test_three_nodes_exchange_merge_and_report_it(
        tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock) -> None:
    ports = [free_port() for _ in range(3)]
    cfg = {"policy_share_byzantine": 0}  # three updates: Krum tolerates none among them
    async with node(tmp_path / "a", embedder, clock, ports[0], 1, **sharing(ports, 0, **cfg)) as a, \
            node(tmp_path / "b", embedder, clock, ports[1], 2, **sharing(ports, 1, **cfg)) as b, \
            node(tmp_path / "c", embedder, clock, ports[2], 3, **sharing(ports, 2, **cfg)) as c:
        before = a.service.observing.policies.of(TENANT).bandit.theta().copy()
        assert a.gossip is not None
        await a.gossip.round()  # first: its peers have released nothing yet
        s = await status(a)
        assert s.rounds == 1 and s.merges == 0 and "waiting" in s.waiting
        for srv in (b, c, a):
            assert srv.gossip is not None
            await srv.gossip.round()
        s = await status(a)
        assert s.rounds == 2 and s.released == 2 and s.epsilon == 0.0 and s.noise == 0.0
        assert {p.peer for p in s.peers} == {f"127.0.0.1:{p}" for p in ports[1:]}
        # a took b's and c's (from their calls and their answers to a's): it merged.
        assert all(p.exchanged >= 1 and not p.refused for p in s.peers), s
        assert s.merges == 1 and s.waiting == ""
        assert not np.allclose(a.service.observing.policies.of(TENANT).bandit.theta(), before)


async def test_what_travels_holds_no_text_tenant_or_key(
        tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock) -> None:
    port, fake_port = free_port(), free_port()
    keys = tmp_path / "keys.json"
    peer_key = create_key(keys, "node-b", "peer", ["*"])[1]
    admin = create_key(keys, "ops", "admin", ["*"])[1]
    async with fake_peer(fake_port, lambda: honest(5)) as fake, \
            node(tmp_path / "a", embedder, clock, port, 1, api_keys_file=keys,
                 policy_peer_key=peer_key, **sharing([port, fake_port], 0)) as a:
        # The tenant's own turns, with words no rule or feature name holds.
        stub_channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        stub = pb_grpc.MemoryServiceStub(stub_channel)
        for text in TURNS:
            await stub.Observe(pb.ObserveRequest(tenant=TENANT, text=text, session_id="s"),
                               metadata=(("authorization", f"Bearer {admin}"),), timeout=60)
        await stub_channel.close()
        assert a.gossip is not None
        await a.gossip.round()  # a's call to the fake peer
        answer = await exchange(port, pb.ExchangePolicyRequest(
            node=fake.address, update=honest(5)), key=peer_key)  # the fake peer's call to a
        sent = [*fake.requests, answer.SerializeToString()]
        assert len(sent) == 2 and all(len(m) > 1000 for m in sent)  # updates did travel
        for message in sent:
            # The key's id and its secret, whole: the secret is URL-safe base64, whose "_" must
            # not cut it into pieces short enough to turn up in any update's bytes by chance.
            for secret in [*WORDS, TENANT, peer_key, admin, *peer_key.split("_", 2)[1:]]:
                assert secret.encode() not in message and secret.lower().encode() not in message


async def test_only_a_peer_key_may_exchange_and_a_peer_key_may_do_nothing_else(
        tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock) -> None:
    port, other = free_port(), free_port()
    keys = tmp_path / "keys.json"
    peer_key = create_key(keys, "node-b", "peer", ["*"])[1]
    admin = create_key(keys, "ops", "admin", ["*"])[1]
    second_peer = create_key(keys, "node-c", "peer", ["*"])[1]
    request = pb.ExchangePolicyRequest(node=f"127.0.0.1:{other}", update=honest(5))
    async with node(tmp_path, embedder, clock, port, 1, api_keys_file=keys,
                    **sharing([port, other], 0)) as a:
        for key, code in ((None, grpc.StatusCode.UNAUTHENTICATED),
                          ("cm_nothing_wrong", grpc.StatusCode.UNAUTHENTICATED),
                          (admin, grpc.StatusCode.PERMISSION_DENIED)):
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await exchange(port, request, key)
            assert e.value.code() == code
        await exchange(port, request, peer_key)
        # The key is bound to the peer it first named: another key for it is refused.
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await exchange(port, request, second_peer)
        assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await pb_grpc.MemoryServiceStub(channel).GetPolicy(
                    pb.GetPolicyRequest(tenant=TENANT),
                    metadata=(("authorization", f"Bearer {peer_key}"),), timeout=30)
            assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert a.sharing is not None
        assert a.sharing.status().peers[0].refused == {"another_key": 1}


async def test_another_rule_hash_and_a_damaged_update_are_refused_and_counted(
        tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock) -> None:
    port, fake_port = free_port(), free_port()
    other_rules = pb.SharedPolicy(fingerprint="0" * 64, parameters=honest(5).parameters,
                                  counts=honest(5).counts)
    async with fake_peer(fake_port, lambda: other_rules), \
            node(tmp_path, embedder, clock, port, 1, **sharing([port, fake_port], 0)) as a:
        before = a.service.observing.policies.of(TENANT).bandit.theta().copy()
        assert a.gossip is not None
        await a.gossip.round()  # the fake's answer: another fingerprint
        with pytest.raises(grpc.aio.AioRpcError) as e:  # its call: the same
            await exchange(port, pb.ExchangePolicyRequest(node=f"127.0.0.1:{fake_port}",
                                                          update=other_rules))
        assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "other rules" in (e.value.details() or "")
        damaged = pb.SharedPolicy(fingerprint=honest(5).fingerprint, parameters=[1.0, 2.0],
                                  counts=[1.0, 1.0])
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await exchange(port, pb.ExchangePolicyRequest(node=f"127.0.0.1:{fake_port}",
                                                          update=damaged))
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        p = peer_of(await status(a), fake_port)
        assert dict(p.refused) == {"fingerprint": 2, "damaged": 1} and p.exchanged == 0
        assert "2 values" in p.last_error  # the last refusal: the damaged one
        # Nothing refused reached the policy.
        assert np.allclose(a.service.observing.policies.of(TENANT).bandit.theta(), before)


async def test_a_flood_from_one_peer_and_from_strangers_is_bounded(
        tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock) -> None:
    port, peer = free_port(), free_port()
    async with node(tmp_path, embedder, clock, port, 1, **sharing([port, peer], 0)) as a:
        assert a.sharing is not None
        request = pb.ExchangePolicyRequest(node=f"127.0.0.1:{peer}", update=honest(5))
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = pb_grpc.PolicySharingServiceStub(channel).ExchangePolicy
            codes = []
            for _ in range(20):
                try:
                    await call(request, timeout=30)
                    codes.append("ok")
                except grpc.aio.AioRpcError as e:
                    codes.append(e.code().name)
            assert codes[:2] == ["ok", "ok"] and set(codes[2:]) == {"RESOURCE_EXHAUSTED"}
            unlisted = metrics.REGISTRY.get_sample_value("celestial_policy_exchanges_total",
                                                         {"outcome": "unlisted"}) or 0.0
            strangers = [pb.ExchangePolicyRequest(node=f"10.0.{i // 250}.{i % 250}:1",
                                                  update=request.update) for i in range(200)]
            for r in strangers:
                with pytest.raises(grpc.aio.AioRpcError) as e:
                    await call(r, timeout=30)
                assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
        s = a.sharing.status()
        # One entry per listed peer and one for every stranger together: what is held is
        # bounded by the operator's list, whoever calls.
        assert [p.peer for p in s.peers] == [f"127.0.0.1:{peer}", "(not a listed peer)"]
        assert s.peers[0].exchanged == 2 and s.peers[0].refused == {"too_often": 18}
        assert s.peers[1].refused == {"unlisted": 200}
        assert len(a.sharing._peers) == 1
        assert metrics.REGISTRY.get_sample_value("celestial_policy_exchanges_total",
                                                 {"outcome": "unlisted"}) == unlisted + 200


async def test_a_down_or_slow_peer_blocks_neither_the_round_nor_the_node(
        tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock) -> None:
    port, down, slow, good = free_port(), free_port(), free_port(), free_port()
    interval = 4.0  # each call bounded by 2 s
    settings = {**sharing([port, down, slow, good], 0), "policy_share_interval_s": HOUR}
    async with fake_peer(slow, lambda: honest(6), delay_s=30.0), \
            fake_peer(good, lambda: honest(7)), \
            node(tmp_path, embedder, clock, port, 1, **settings) as a:
        assert a.gossip is not None and a.sharing is not None
        a.gossip._limit = interval / 2
        started = time.monotonic()
        round_ = asyncio.create_task(a.gossip.round())
        # Meanwhile the node answers its callers.
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            await pb_grpc.MemoryServiceStub(channel).Stats(pb.StatsRequest(tenant=TENANT),
                                                          timeout=30)
        await round_
        assert time.monotonic() - started < 25  # not the slow peer's 30 s
        s = {p.peer: p for p in a.sharing.status().peers}
        assert s[f"127.0.0.1:{good}"].exchanged == 1
        assert s[f"127.0.0.1:{down}"].refused == {"unavailable": 1}
        assert s[f"127.0.0.1:{slow}"].refused == {"deadline_exceeded": 1}


async def test_a_peer_killed_and_restarted_rejoins(
        tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock) -> None:
    ports = [free_port(), free_port()]
    cfg = {"policy_share_byzantine": 0}
    async with node(tmp_path / "a", embedder, clock, ports[0], 1,
                    **sharing(ports, 0, **cfg)) as a:
        assert a.gossip is not None and a.sharing is not None
        async with node(tmp_path / "b", embedder, clock, ports[1], 2,
                        **sharing(ports, 1, **cfg)) as b:
            assert b.gossip is not None
            await b.gossip.round()
            await a.gossip.round()
        took = a.sharing.status().peers[0].exchanged
        assert took == 2  # b's call, and b's answer to a's
        await a.gossip.round()  # b is gone: a partition, as far as a can tell
        gone = a.sharing.status().peers[0]
        assert gone.exchanged == took and gone.refused == {"unavailable": 1} and gone.last_error
        async with node(tmp_path / "b", embedder, clock, ports[1], None,
                        **sharing(ports, 1, **cfg)) as b:
            # b restarted on its data (its policy saved): it rejoins at the next rounds.
            assert b.gossip is not None and b.sharing is not None
            await b.gossip.round()
            assert a.sharing.status().peers[0].exchanged == took + 1  # b's call
            # a's channel to b tries again within its backoff (200 ms at first): a's rounds
            # reach b once it has (a bounded wait, not a timing).
            for _ in range(100):
                await a.gossip.round()
                if a.sharing.status().peers[0].last_error == "":
                    break
                await asyncio.sleep(0.1)
            back = a.sharing.status().peers[0]
            assert back.exchanged >= took + 2 and back.last_error == ""
            assert b.sharing.status().peers[0].exchanged >= 1  # a's update reached b


async def test_krum_keeps_a_bad_peer_out_where_a_mean_takes_it_in(
        tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock) -> None:
    """One real node and four fake peers: four honest, or three honest and one sending a random
    vector of an honest update's norm."""
    ports = [free_port() for _ in range(5)]
    u = of(trained(seed=8))
    noise = np.random.default_rng(0).normal(size=u.vector.size)
    bad = update_to_pb(PolicyUpdate(u.fingerprint, noise / np.linalg.norm(noise)
                                    * np.linalg.norm(u.vector), u.counts))
    honest_ones = [honest(s) for s in (5, 6, 7)]
    after = []
    for run, (aggregation, fourth) in enumerate((("multi-krum", honest(8)),
                                                 ("multi-krum", bad), ("mean", bad))):
        async with fake_peer(ports[1], lambda: honest_ones[0]), \
                fake_peer(ports[2], lambda: honest_ones[1]), \
                fake_peer(ports[3], lambda: honest_ones[2]), \
                fake_peer(ports[4], lambda f=fourth: f), \
                node(tmp_path / str(run), embedder, clock, ports[0], 1,
                     policy_share_aggregation=aggregation, **sharing(ports, 0)) as a:
            assert a.gossip is not None
            await a.gossip.round()
            assert (await status(a)).merges == 1
            after.append(of(a.service.observing.policies.of(TENANT)).vector)
    all_honest, krum, mean = after
    # With Krum the node ends where three honest peers take it (the fourth honest one's
    # absence is the difference); with a mean the bad one drags it many times further.
    assert np.linalg.norm(krum - all_honest) < 0.1
    assert np.linalg.norm(mean - all_honest) > 5 * np.linalg.norm(krum - all_honest)


async def test_noise_spends_privacy_counted_across_a_restart_until_the_budget_stops_it(
        tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock) -> None:
    port, fake_port = free_port(), free_port()
    noisy = {**sharing([port, fake_port], 0), "policy_share_noise": 4.0,
             "policy_share_epsilon": 5.0}

    def learn(srv: MemoryServer, seed: int) -> None:
        """The node learnt something since its last release (a new one is due)."""
        state = json.dumps(trained(seed=seed, turns=40 + seed).to_dict())
        srv.service.observing.policies.restore(TENANT, state, replace=True)

    async with fake_peer(fake_port, lambda: honest(5)) as fake:
        async with node(tmp_path, embedder, clock, port, 1, **noisy) as a:
            assert a.gossip is not None
            await a.gossip.round()
            learn(a, 2)
            await a.gossip.round()
            first = await status(a)
            assert first.released == 2 and 0 < first.epsilon < 5.0 and first.noise == 4.0
            sent = pb.ExchangePolicyRequest.FromString(fake.requests[-1]).update
            assert list(sent.counts) == [100.0, 100.0]  # the public count, not the node's
        async with node(tmp_path, embedder, clock, port, None, **noisy) as a:
            assert a.gossip is not None
            before = len(fake.requests)
            for seed in range(3, 23):
                learn(a, seed)
                await a.gossip.round()
            s = await status(a)
            assert s.budget_spent and s.epsilon <= 5.0 and s.released > 2  # counted on
            assert s.epsilon_budget == 5.0
            # Spent: the node still asks, but sends nothing more.
            last = pb.ExchangePolicyRequest.FromString(fake.requests[-1])
            assert not last.HasField("update") and len(fake.requests) == before + 20


async def test_peers_dial_over_mtls_and_a_certificate_may_stand_for_the_peer_key(
        tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock) -> None:
    ca = CertificateAuthority(tmp_path / "pki")
    server = ca.issue("server", "localhost", server=True)
    node_b = ca.issue("node-b", "node-b", server=False)
    keys = tmp_path / "keys.json"
    create_key(keys, "node-b", "peer", [], subject="node-b")  # no secret sent: the certificate
    pa, pb_, pc = free_port(), free_port(), free_port()
    a_name, b_name, c_name = f"localhost:{pa}", f"127.0.0.1:{pb_}", f"127.0.0.1:{pc}"
    async with node(tmp_path / "a", embedder, clock, pa, 1, tls_cert=server.cert,
                    tls_key=server.key, tls_client_ca=ca.cert, api_keys_file=keys,
                    policy_peers=[b_name, c_name], policy_share_address=a_name,
                    policy_share_interval_s=HOUR) as a, \
            node(tmp_path / "b", embedder, clock, pb_, 2, policy_peers=[a_name],
                 policy_share_address=b_name, policy_share_interval_s=HOUR,
                 policy_peer_ca=ca.cert, policy_peer_cert=node_b.cert,
                 policy_peer_cert_key=node_b.key) as b, \
            node(tmp_path / "c", embedder, clock, pc, 3, policy_peers=[a_name],
                 policy_share_address=c_name, policy_share_interval_s=HOUR,
                 policy_peer_ca=ca.cert) as c:  # TLS, but no certificate and no key
        assert a.sharing is not None and b.gossip is not None and c.gossip is not None
        await b.gossip.round()
        await c.gossip.round()
        took = {p.peer: p for p in a.sharing.status().peers}
        assert took[b_name].exchanged == 1
        assert took[c_name].exchanged == 0
        assert c.sharing is not None
        refused = c.sharing.status().peers[0]
        assert refused.exchanged == 0 and refused.refused == {"unavailable": 1}


async def test_the_client_and_the_command_line_show_the_sharing_status(
        tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock) -> None:
    port, down = free_port(), free_port()
    async with node(tmp_path, embedder, clock, port, 1, **sharing([port, down], 0)) as a:
        assert a.gossip is not None
        await a.gossip.round()

        def read() -> tuple[PolicyStatus, str, str]:
            with CelestialClient(f"127.0.0.1:{port}", tenant=TENANT, timeout=30) as c:
                return c.policy(), show_policy(c.policy()), as_json({"policy": c.policy()})

        status_, shown, printed = await asyncio.to_thread(read)
    s = status_.sharing
    assert s is not None and s.rounds == 1 and s.released == 1 and "waiting" in s.waiting
    assert [(p.peer, p.exchanged, p.refused) for p in s.peers] == [
        (f"127.0.0.1:{down}", 0, {"unavailable": 1})]
    assert "sharing      1 rounds, 0 merged, 1 updates sent; noise 0" in shown
    assert f"127.0.0.1:{down}" in shown and "unavailable 1" in shown
    doc = json.loads(printed)["policy"]["sharing"]
    assert doc["peers"][0]["refused"] == {"unavailable": 1} and doc["epsilon"] == 0.0


async def test_a_peer_key_made_for_an_address_speaks_for_that_peer_alone(
        tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock) -> None:
    port, b, c = free_port(), free_port(), free_port()
    keys = tmp_path / "keys.json"
    for_c = create_key(keys, "node-c", "peer", [f"127.0.0.1:{c}"])[1]
    async with node(tmp_path, embedder, clock, port, 1, api_keys_file=keys,
                    **sharing([port, b, c], 0)) as a:
        assert a.sharing is not None
        # c's key naming b first (no first come, first served): refused, and b's place free.
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await exchange(port, pb.ExchangePolicyRequest(node=f"127.0.0.1:{b}",
                                                          update=honest(5)), for_c)
        assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
        await exchange(port, pb.ExchangePolicyRequest(node=f"127.0.0.1:{c}", update=honest(6)),
                       for_c)
        took = {p.peer: p for p in a.sharing.status().peers}
        assert took[f"127.0.0.1:{b}"].exchanged == 0 and took[f"127.0.0.1:{c}"].exchanged == 1


async def test_tenants_only_read_neither_take_part_nor_inflate_the_nodes_evidence(
        tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock) -> None:
    ports = [free_port() for _ in range(3)]
    cfg = {"policy_share_byzantine": 0}
    async with node(tmp_path / "a", embedder, clock, ports[0], 1, **sharing(ports, 0, **cfg)) as a, \
            node(tmp_path / "b", embedder, clock, ports[1], 2, **sharing(ports, 1, **cfg)) as b, \
            node(tmp_path / "c", embedder, clock, ports[2], 3, **sharing(ports, 2, **cfg)) as c:
        assert a.sharing is not None
        before = a.sharing._pooled().counts
        async with grpc.aio.insecure_channel(f"127.0.0.1:{ports[0]}") as channel:
            stub = pb_grpc.MemoryServiceStub(channel)
            for i in range(20):  # reads of tenants that never decided anything
                await stub.GetPolicy(pb.GetPolicyRequest(tenant=f"phantom-{i}"), timeout=30)
        for _ in range(4):
            for srv in (b, c, a):
                assert srv.gossip is not None
                await srv.gossip.round()
        assert (await status(a)).merges >= 3
        after = a.sharing._pooled().counts
        # One tenant's evidence, moved toward its peers' typical one: never twenty copies of it.
        assert max(after) <= max(max(before), 1.0) * 2
        keeper = a.service.observing.policies
        assert not any(keeper.of("phantom-3").counters.decisions.values())
        assert keeper.saved_at("phantom-3") is None  # nothing merged into it, nothing saved


async def test_noise_spends_nothing_more_while_the_node_learns_nothing(
        tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock) -> None:
    port, down = free_port(), free_port()
    async with node(tmp_path, embedder, clock, port, 1, policy_share_noise=4.0,
                    policy_share_epsilon=5.0, **sharing([port, down], 0)) as a:
        assert a.gossip is not None and a.sharing is not None
        for _ in range(10):
            await a.gossip.round()
        s = a.sharing.status()
        assert s.rounds == 10 and s.released == 1 and not s.budget_spent
