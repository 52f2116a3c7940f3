"""Sharing between nodes over the wire (docs/sharing.md): the PolicySharingService a node
answers, and the gossip rounds in which it dials its peers. The node's side of it, what is
sent, taken and merged, is sharing/node.py's.

Each round the node releases its update, dials ``policy_share_fanout`` of its peers at random,
all at once, each call bounded by ``min(5 s, interval / 2)``, and then merges in a worker
thread: a peer that is down or slow costs its own call's deadline and nothing else, neither
the node's requests nor its other peers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from typing import Any

import grpc
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from celestial_memory.access.roles import CALLER
from celestial_memory.api.grpc import converters as cv
from celestial_memory.api.grpc.status import mapped
from celestial_memory.config import Settings
from celestial_memory.errors import CelestialError, FailedPrecondition
from celestial_memory.sharing.node import SharingNode, SharingStatus
from celestial_memory.sharing.update import PolicyUpdate

log = logging.getLogger(__name__)
Context = grpc.aio.ServicerContext[Any, Any]
CALL_LIMIT_S = 5.0


def update_to_pb(u: PolicyUpdate) -> pb.SharedPolicy:
    return pb.SharedPolicy(fingerprint=u.fingerprint, parameters=u.vector.tolist(),
                           counts=list(u.counts))


def status_to_pb(s: SharingStatus) -> pb.PolicySharingStatus:
    out = pb.PolicySharingStatus(
        rounds=s.rounds, merges=s.merges, waiting=s.waiting, noise=s.noise,
        released=s.released, epsilon=s.epsilon, delta=s.delta,
        epsilon_budget=s.epsilon_budget, budget_spent=s.budget_spent)
    for p in s.peers:
        peer = out.peers.add(peer=p.peer, exchanged=p.exchanged, refused=p.refused,
                             last_error=p.last_error)
        if p.last_at is not None:
            peer.last_at.CopyFrom(cv.ts_to_pb(p.last_at))
    return out


class SharingServicer(pb_grpc.PolicySharingServiceServicer):
    """ExchangePolicy: the caller's update taken, this node's round update answered."""

    def __init__(self, node: SharingNode | None) -> None:
        self._node = node

    @mapped
    async def ExchangePolicy(self, request: pb.ExchangePolicyRequest,
                             context: Context) -> pb.ExchangePolicyResponse:
        node = self._node
        if node is None:
            raise FailedPrecondition("policy sharing is off on this node (CELESTIAL_POLICY_PEERS "
                                     "is empty)")
        caller = CALLER.get()
        node.called(request.node, caller.key_id or None, caller.tenants)
        if request.HasField("update"):
            u = request.update
            node.take(request.node, u.fingerprint, u.parameters, u.counts)
        answer = pb.ExchangePolicyResponse(node=node.address)
        if (sent := node.current()) is not None:
            answer.update.CopyFrom(update_to_pb(sent))
        return answer


class Gossip:
    """The rounds: ``run`` until cancelled; ``close`` releases the channels."""

    def __init__(self, node: SharingNode, settings: Settings) -> None:
        self._node, self._settings = node, settings
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._limit = min(CALL_LIMIT_S, settings.policy_share_interval_s / 2)
        key = settings.policy_peer_key
        self._metadata = (("authorization", f"Bearer {key.get_secret_value()}"),) if key else ()
        self._random = random.Random()
        self._credentials: grpc.ChannelCredentials | None = None
        if settings.policy_peer_ca is not None:  # read now: a missing file stops the start
            try:
                files = [None if p is None else p.read_bytes() for p in (
                    settings.policy_peer_ca, settings.policy_peer_cert_key,
                    settings.policy_peer_cert)]
            except OSError as e:
                raise FailedPrecondition(f"policy sharing's TLS files: {e}") from None
            self._credentials = grpc.ssl_channel_credentials(*files)

    def _channel(self, address: str) -> grpc.aio.Channel:
        channel = self._channels.get(address)
        if channel is None:
            s = self._settings
            # A peer back after a restart or a partition is tried again within half a round,
            # not after gRPC's default backoff of up to two minutes.
            backoff_ms = int(min(s.policy_share_interval_s / 2, 30.0) * 1000)
            options = [("grpc.initial_reconnect_backoff_ms", min(200, backoff_ms)),
                       ("grpc.min_reconnect_backoff_ms", min(200, backoff_ms)),
                       ("grpc.max_reconnect_backoff_ms", backoff_ms)]
            if self._credentials is not None:
                channel = grpc.aio.secure_channel(address, self._credentials, options)
            else:
                channel = grpc.aio.insecure_channel(address, options)
            self._channels[address] = channel
        return channel

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self._settings.policy_share_interval_s)
            try:
                await self.round()
            except Exception as e:  # the next round tries again
                log.exception("policy sharing round failed")
                self._node.round_failed(f"{type(e).__name__}: {e}")

    async def round(self) -> None:
        sent = await asyncio.to_thread(self._node.release)
        peers = list(self._node.peers)
        chosen = self._random.sample(peers, min(self._settings.policy_share_fanout, len(peers)))
        await asyncio.gather(*(self._exchange(a, sent) for a in chosen))
        await asyncio.to_thread(self._node.merge_round)

    async def _exchange(self, address: str, sent: PolicyUpdate | None) -> None:
        request = pb.ExchangePolicyRequest(node=self._node.address)
        if sent is not None:
            request.update.CopyFrom(update_to_pb(sent))
        stub = pb_grpc.PolicySharingServiceStub(self._channel(address))  # type: ignore[no-untyped-call]
        try:
            answer = await stub.ExchangePolicy(request, timeout=self._limit,
                                               metadata=self._metadata)
        except grpc.aio.AioRpcError as e:
            code = e.code().name.lower()
            self._node.failed(address, code, f"{code}: {e.details()}")
            log.debug("policy sharing: %s answered %s", address, code)
            return
        if answer.HasField("update"):
            u = answer.update
            with contextlib.suppress(CelestialError):  # counted and logged by the node
                self._node.take(address, u.fingerprint, u.parameters, u.counts)

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close(None)
        self._channels.clear()
