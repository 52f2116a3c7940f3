"""Store / StoreBatch / Recall / Get / Update / Delete / Stats / Rebalance through real gRPC."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from celestial_client import (
    AsyncCelestialClient,
    CelestialClient,
    InvalidArgumentError,
    NotFoundError,
    StoreItem,
    Zone,
)
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.clock import ManualClock
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.integration.conftest import running_server

DAY = 86_400.0


async def test_store_then_recall_finds_it_first_and_reinforces(
    aclient: AsyncCelestialClient,
) -> None:
    m = await aclient.store("Alice prefers espresso in the morning", importance=0.8,
                            tags=["prefs"], metadata={"who": "alice"})
    assert m.zone == Zone.OUTER and m.score == pytest.approx(0.2, abs=1e-6)
    await aclient.store_batch(["Paris is the capital of France", "Bob's cat is named Whiskers"])
    results = await aclient.recall("What coffee does Alice like?", limit=3)
    assert results[0].id == m.id
    top = results[0]
    assert top.relevance > 0.5
    assert top.memory.recall_count == 1
    # C is the query's cosine to the content; relevance fuses it with the keyword scores.
    assert 0.3 < top.breakdown.context < 1.0 and top.relevance <= 1.0
    assert top.breakdown.freshness == 0.0
    assert top.memory.zone.rank <= Zone.OUTER.rank
    got = await aclient.get(m.id)
    assert got.recall_count == 1 and got.tags == ["prefs"] and got.metadata == {"who": "alice"}


async def test_results_come_in_zone_order_and_carry_their_breakdown(
    aclient: AsyncCelestialClient,
) -> None:
    low = await aclient.store("the espresso machine is in the kitchen", importance=0.0)
    high = await aclient.store("espresso tastes bitter", importance=1.0)
    assert (low.zone, high.zone) == (Zone.BELT, Zone.OUTER)
    results = await aclient.recall("espresso", limit=5, reinforce=False)
    assert [r.found_in.rank for r in results] == sorted(r.found_in.rank for r in results)
    assert results[0].id == high.id
    for r in results:
        b = r.breakdown
        assert b.total == pytest.approx(0.25 * b.recall + 0.30 * b.freshness
                                        + 0.25 * b.importance + 0.20 * b.context)


async def test_recall_without_reinforcement_writes_nothing(aclient: AsyncCelestialClient) -> None:
    m = await aclient.store("the launch code is blue", importance=0.5)
    r = await aclient.recall("launch code", limit=1, reinforce=False)
    assert r[0].id == m.id
    after = await aclient.get(m.id)
    assert after.recall_count == 0 and after.last_recalled_at == m.last_recalled_at


async def test_relevance_gate_returns_nothing_unrelated(aclient: AsyncCelestialClient) -> None:
    await aclient.store("quarterly revenue grew by twelve percent")
    assert await aclient.recall("banana bread recipe", limit=5, min_relevance=0.6) == []


async def test_filters_reach_the_store(aclient: AsyncCelestialClient) -> None:
    a = await aclient.store("dinner with Sam on Friday", tags=["social"], session_id="s1")
    await aclient.store("dinner reservation at the bistro", tags=["work"], session_id="s2")
    res = await aclient.recall("dinner", limit=5, tags_any=["social"], min_relevance=0.0)
    assert [r.id for r in res] == [a.id]
    res = await aclient.recall("dinner", limit=5, session_id="s1", zones=["outer", "belt"],
                               min_relevance=0.0)
    assert [r.id for r in res] == [a.id]


async def test_update_changes_fields_and_replaces_by_score(
    aclient: AsyncCelestialClient,
) -> None:
    m = await aclient.store("the wifi password is hunter2", importance=0.1)
    assert m.zone == Zone.BELT
    u = await aclient.update(m.id, importance=0.9, tags=["secrets"], pinned=True,
                             metadata={"k": "v"})
    assert (u.importance, u.tags, u.pinned, u.metadata) == (0.9, ["secrets"], True, {"k": "v"})
    assert u.zone == Zone.OUTER
    u2 = await aclient.update(m.id, content="the wifi password is swordfish")
    assert u2.content == "the wifi password is swordfish"
    assert (await aclient.recall("wifi password", limit=1))[0].id == m.id


async def test_delete_then_get_is_not_found(aclient: AsyncCelestialClient) -> None:
    m = await aclient.store("temporary note")
    assert await aclient.delete(m.id) is True
    assert await aclient.delete(m.id) is False
    with pytest.raises(NotFoundError):
        await aclient.get(m.id)


async def test_stats_and_rebalance(aclient: AsyncCelestialClient, clock: ManualClock) -> None:
    for i in range(3):
        await aclient.store(f"note number {i}", importance=0.8)
    stats = await aclient.stats()
    assert stats.total == 3 and stats.backend == "edge" and stats.dimension == 384
    assert [z.zone for z in stats.zones] == list(Zone)
    assert stats.zones[0].capacity == 20 and stats.zones[3].capacity is None
    clock.advance(DAY)  # 0.25·0.8 - 0.30 = -0.10: outer -> belt
    dry = await aclient.rebalance(dry_run=True)
    assert dry.dry_run and dry.moved == {(Zone.OUTER, Zone.BELT): 3}
    assert (await aclient.stats()).zones[2].count == 3  # dry run wrote nothing
    rep = await aclient.rebalance()
    assert rep.scanned == 3 and rep.moved == {(Zone.OUTER, Zone.BELT): 3}
    assert (await aclient.stats()).zones[3].count == 3


async def test_tenants_do_not_see_each_other(server: MemoryServer) -> None:
    target = f"127.0.0.1:{server.port}"
    async with AsyncCelestialClient(target, tenant="a") as a, \
            AsyncCelestialClient(target, tenant="b") as b:
        m = await a.store("tenant a's secret plan")
        assert await b.recall("secret plan", min_relevance=0.0) == []
        with pytest.raises(NotFoundError):
            await b.get(m.id)
        assert await b.delete(m.id) is False
        assert (await b.stats()).total == 0
        assert (await a.get(m.id)).content == "tenant a's secret plan"


async def test_sync_client_and_created_at(client: CelestialClient, clock: ManualClock) -> None:
    then = clock.now() - 2 * DAY
    item = StoreItem("an old memory replayed", importance=0.5, created_at=then)
    m = await asyncio.to_thread(client.store, item)
    assert m.created_at.timestamp() == pytest.approx(then)
    assert m.zone == Zone.CLOUD  # 0.25·0.5 - 0.30 = -0.175 after two days without recall
    assert (await asyncio.to_thread(client.get, m.id)).id == m.id


async def test_health_and_reflection(server: MemoryServer) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as ch:
        stub = health_pb2_grpc.HealthStub(ch)
        for name in ("", "celestial.v1.MemoryService"):
            resp = await stub.Check(health_pb2.HealthCheckRequest(service=name))
            assert resp.status == health_pb2.HealthCheckResponse.SERVING
        from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
            ProtoReflectionDescriptorDatabase,
        )

        def list_services() -> list[str]:
            with grpc.insecure_channel(f"127.0.0.1:{server.port}") as sync_ch:
                return list(ProtoReflectionDescriptorDatabase(sync_ch).get_services())

        assert "celestial.v1.MemoryService" in await asyncio.to_thread(list_services)


async def test_memories_survive_a_restart(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    async with running_server(tmp_path, embedder, clock) as first, \
            AsyncCelestialClient(f"127.0.0.1:{first.port}") as c:
        m = await c.store("the spare key is under the blue pot", importance=0.6)
        await c.recall("where is the spare key", limit=1)

    async with running_server(tmp_path, embedder, clock) as second, \
            AsyncCelestialClient(f"127.0.0.1:{second.port}") as c:
        got = await c.get(m.id)
        assert got.content == m.content and got.recall_count == 1
        assert (await c.recall("spare key", limit=1))[0].id == m.id


async def test_concurrent_calls_are_served(aclient: AsyncCelestialClient) -> None:
    stored = await asyncio.gather(*(aclient.store(f"parallel fact {i}") for i in range(8)))
    assert len({m.id for m in stored}) == 8
    assert (await aclient.stats()).total == 8


async def test_bad_request_is_invalid_argument_not_internal(
    aclient: AsyncCelestialClient,
) -> None:
    with pytest.raises(InvalidArgumentError, match="content"):
        await aclient.store("")


async def test_periodic_rebalance_runs_on_its_schedule(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    async with running_server(tmp_path, embedder, clock, rebalance_interval_s=0.2) as srv, \
            AsyncCelestialClient(f"127.0.0.1:{srv.port}", tenant="p") as c:
        await c.store("a note that will fade", importance=0.8)
        assert (await c.stats()).zones[2].count == 1
        clock.advance(DAY)
        for _ in range(50):
            await asyncio.sleep(0.1)
            if (await c.stats()).zones[3].count == 1:
                break
        assert (await c.stats()).zones[3].count == 1  # outer -> belt without being asked


async def test_acknowledged_recalls_survive_an_immediate_graceful_stop(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    async with running_server(tmp_path, embedder, clock) as first, \
            AsyncCelestialClient(f"127.0.0.1:{first.port}") as c:
        m = await c.store("the gate code is 4711", importance=0.5)
        for _ in range(20):
            assert (await c.recall("gate code", limit=1))[0].id == m.id
    # stopped right after the last acknowledgement: the queue is drained before the store closes
    async with running_server(tmp_path, embedder, clock) as second, \
            AsyncCelestialClient(f"127.0.0.1:{second.port}") as c:
        assert (await c.get(m.id)).recall_count == 20


async def test_ledger_through_the_client_and_the_cli(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from celestial_client.cli import main

    async with running_server(tmp_path, embedder, clock, zone_capacities=[20, 100, 1, 0, 0]) \
            as srv, AsyncCelestialClient(f"127.0.0.1:{srv.port}") as c:
        first = await c.store("the first note", importance=0.8)
        second = await c.store("the second note", importance=0.9)
        (event,) = await c.ledger()
        assert (event.memory_id, event.from_zone, event.to_zone, event.reason) == (
            first.id, Zone.OUTER, Zone.BELT, "capacity")
        assert (await c.get(second.id)).zone == Zone.OUTER
        assert await c.ledger(memory_id=second.id) == []
        code = await asyncio.to_thread(main, ["--target", f"127.0.0.1:{srv.port}", "ledger"])
        out = capsys.readouterr().out
        assert code == 0 and "capacity" in out and first.id in out and "belt" in out


@pytest.mark.parametrize("protocol", ["v1alpha", "v1"])
async def test_reflection_answers_in_both_protocols(server: MemoryServer, protocol: str) -> None:
    from grpc_reflection.v1alpha import reflection_pb2 as rpb

    path = f"/grpc.reflection.{protocol}.ServerReflection/ServerReflectionInfo"
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as ch:
        call = ch.stream_stream(path, request_serializer=rpb.ServerReflectionRequest.SerializeToString,
                                response_deserializer=rpb.ServerReflectionResponse.FromString)
        replies = [r async for r in call(iter([
            rpb.ServerReflectionRequest(list_services=""),
            rpb.ServerReflectionRequest(file_containing_symbol="celestial.v1.MemoryService"),
        ]))]
    names = {s.name for s in replies[0].list_services_response.service}
    assert {"celestial.v1.MemoryService", "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"} <= names
    assert replies[1].file_descriptor_response.file_descriptor_proto  # describe works
