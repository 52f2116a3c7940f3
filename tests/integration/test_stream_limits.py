"""Streams of every method are bounded per caller and in all: one key holding hundreds of health
Watch streams (or Exports) gets its share and no more, and whatever the streams, Stats and
Store still answer and health stays SERVING. Without keys every loopback address is one
caller."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import uuid
from pathlib import Path

import grpc
import pytest
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from celestial_memory.access.keys import create_key
from celestial_memory.api.grpc.stream_limit import LOOPBACK, peer_caller
from celestial_memory.clock import ManualClock
from celestial_memory.domain.models import IndexVectors, Memory, Sparse
from celestial_memory.domain.zones import Zone
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.conftest import unit_vectors
from tests.integration.conftest import running_server
from tests.rss import peak_rss_growth


def _watches(channel: grpc.aio.Channel, n: int,
             md: tuple[tuple[str, str], ...] = ()) -> list[grpc.aio.Call]:
    health = health_pb2_grpc.HealthStub(channel)
    return [health.Watch(health_pb2.HealthCheckRequest(), metadata=md) for _ in range(n)]


async def _answered(calls: list[grpc.aio.Call]) -> list[grpc.aio.Call]:
    for c in calls:  # each answered: its first status, or its refusal
        with contextlib.suppress(grpc.aio.AioRpcError, StopAsyncIteration):
            await asyncio.wait_for(c.read(), 30)
    return calls


async def _open_watches(channel: grpc.aio.Channel, n: int,
                        md: tuple[tuple[str, str], ...] = ()) -> list[grpc.aio.Call]:
    return await _answered(_watches(channel, n, md))


async def _close(channels: list[grpc.aio.Channel]) -> None:
    for c in channels:
        await c.close()


async def _refused(calls: list[grpc.aio.Call]) -> int:
    n = 0
    for c in calls:
        if c.done() and await c.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
            n += 1
    return n


async def _unary_still_answer(channel: grpc.aio.Channel,
                              md: tuple[tuple[str, str], ...] = ()) -> None:
    stub = pb_grpc.MemoryServiceStub(channel)
    await stub.Store(pb.StoreRequest(tenant="a", content="still here"), metadata=md, timeout=60)
    assert (await stub.Stats(pb.StatsRequest(tenant="a"), metadata=md, timeout=60)).total >= 1
    check = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
    assert check.status == health_pb2.HealthCheckResponse.SERVING


async def test_one_key_holding_hundreds_of_watches_gets_its_share(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    keys = tmp_path / "keys.json"
    record, greedy = create_key(keys, "greedy", "read", ["a"])
    _, other = create_key(keys, "other", "write", ["a"])
    connections: list[grpc.aio.Channel] = []
    async with (
        running_server(tmp_path / "data", embedder, clock, api_keys_file=keys) as srv,
        grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as ch,
        contextlib.AsyncExitStack() as closing,
    ):
        closing.push_async_callback(_close, connections)
        md = (("authorization", f"Bearer {greedy}"),)
        share = srv.service.settings.max_streams_per_caller
        # 512 at once over connections of 50 streams each, under the server's HTTP/2 limit
        # per connection: over one connection, how many streams it refuses itself
        # (UNAVAILABLE) before they reach the limiter depends on the machine's load. A
        # connection of its own each: channels alike would share one.
        per_connection = srv.service.settings.max_streams_per_connection // 2
        sizes = [min(per_connection, 512 - i) for i in range(0, 512, per_connection)]
        connections += [grpc.aio.insecure_channel(
            f"127.0.0.1:{srv.port}", options=[("grpc.use_local_subchannel_pool", 1)])
            for _ in sizes]
        calls = await _answered([c for conn, n in zip(connections, sizes, strict=True)
                                 for c in _watches(conn, n, md)])
        # The server holds the key's share and no more; every other one it refused itself,
        # as one caller's streams beyond its share (not as the server's streams in all).
        assert len(calls) == 512 and srv.streams.open == {record.id: share}
        refused = [c for c in calls if c.done()]
        assert len(refused) == 512 - share
        assert {await c.code() for c in refused} == {grpc.StatusCode.RESOURCE_EXHAUSTED}
        details = {await c.details() for c in refused}
        assert details == {f"{share} streams are open already for this caller; close one first"}
        exports = [pb_grpc.MemoryServiceStub(ch).Export(pb.ExportRequest(tenant="a"), metadata=md)]
        with pytest.raises(grpc.aio.AioRpcError) as err:
            async for _ in exports[0]:
                pass
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED  # every method counts
        # Another key is another caller: its own share, and its unary calls answer.
        await _unary_still_answer(ch, (("authorization", f"Bearer {other}"),))
        mine = await _open_watches(ch, 2, (("authorization", f"Bearer {other}"),))
        assert await _refused(mine) == 0
        for c in calls + mine:
            c.cancel()


async def test_without_keys_streams_in_all_leave_slots_for_unary_calls(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    async with (
        running_server(tmp_path, embedder, clock, max_concurrent_rpcs=12,
                       max_streams_per_caller=100) as srv,
        grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as ch,
    ):
        calls = await _open_watches(ch, 40)
        assert srv.streams.open == {"loopback": 6}  # half the call slots, then refused
        assert await _refused(calls) == 40 - 6
        await _unary_still_answer(ch)
        for c in calls:
            c.cancel()


def test_every_loopback_address_is_one_caller() -> None:
    assert {peer_caller(p) for p in ("ipv4:127.0.0.1:5000", "ipv4:127.0.0.34:61000",
                                      "ipv6:[::1]:443", "ipv4:127.255.0.9:1")} == {LOOPBACK}
    assert peer_caller("ipv4:10.1.2.3:5000") == "10.1.2.3"
    assert peer_caller("ipv6:[2001:db8::1]:5000") == "2001:db8::1"
    assert peer_caller("unix:/tmp/socket") == "unix:/tmp/socket"


async def test_exports_left_unread_hold_a_page_each_not_the_tenant(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    """Sixteen Exports of a tenant of 36 MB, each read once and then left: the server holds
    about a page (64 memories) for each, and lets go of it when the caller cancels."""
    async with (
        running_server(tmp_path, embedder, clock) as srv,
        grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}",
                                  options=[("grpc.max_receive_message_length", 8 << 20)]) as ch,
    ):
        stub = pb_grpc.MemoryServiceStub(ch)
        # 1,200 memories of 30 KB, written straight to the store: what is measured is their
        # export, and storing them through StoreBatch took a minute and a half (their keywords).
        vectors = unit_vectors(1200, seed=4)
        filler = "lorem ipsum dolor sit amet " * 1100  # about 30 KB
        now = clock.now()
        for start in range(0, 1200, 200):
            srv.service.store.upsert([Memory(
                id=str(uuid.uuid4()), tenant="big", content=f"{i} {filler}"[:30_000],
                zone=Zone.OUTER, score=0.0, importance=0.5, recall_count=0, created_at=now,
                last_recalled_at=now, vector=vectors[i], written_at=now,
                index=IndexVectors(vectors[i], Sparse([], []), Sparse([], [])))
                for i in range(start, start + 200)])
        assert (await stub.Stats(pb.StatsRequest(tenant="big"))).total == 1200
        gc.collect()
        with peak_rss_growth() as growth:
            exports = [stub.Export(pb.ExportRequest(tenant="big")) for _ in range(16)]
            for e in exports:
                await asyncio.wait_for(e.read(), 60)
            await asyncio.sleep(2)  # the server fills what flow control lets it
        held = growth[0]
        for e in exports:
            e.cancel()
        while srv.streams.open:  # each cancelled stream gives its slot back
            await asyncio.sleep(0.05)
        assert held < 120 * 2**20, f"{held / 2**20:.0f} MB held by 16 unread exports"
        await _unary_still_answer(ch)
