"""Memory.next_move over gRPC: the move Get announces is the move the rebalance makes."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta

import pytest
from celestial_client import AsyncCelestialClient, CelestialClient, Zone
from celestial_client.agent_tools import call_tool
from celestial_client.cli import main
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.clock import ManualClock

DAY = 86_400.0


async def test_get_announces_the_move_the_rebalance_then_makes(
    aclient: AsyncCelestialClient, clock: ManualClock
) -> None:
    m = await aclient.store("The quarterly report is due on the first Monday", importance=0.6)
    assert m.zone == Zone.OUTER
    move = (await aclient.get(m.id)).next_move
    assert move is not None and move.zone == Zone.BELT and not move.archive
    # 0.25·0.6 = 0.15 above outer's 0.10 falls 0.30/86.4 per 1000 s: due 14,400 s after the store.
    assert abs(move.at - m.created_at - timedelta(seconds=14_400)) < timedelta(milliseconds=1)

    clock.set(move.at.timestamp() - 60)  # a minute early: nothing moves
    rep = await aclient.rebalance()
    assert rep.moved == {} and (await aclient.get(m.id)).zone == Zone.OUTER
    clock.set(move.at.timestamp() + 60)
    rep = await aclient.rebalance()
    assert rep.moved == {(Zone.OUTER, Zone.BELT): 1}
    later = await aclient.get(m.id)
    assert later.zone == Zone.BELT
    # Then below the belt's -0.10 at 0.15 + 0.10 over the same rate: 72,000 s after the store.
    assert later.next_move is not None and later.next_move.zone == Zone.CLOUD
    assert abs(later.next_move.at - m.created_at - timedelta(seconds=72_000)) < timedelta(
        milliseconds=1)


async def test_an_overdue_move_goes_as_far_as_the_next_rebalance_will(
    aclient: AsyncCelestialClient, clock: ManualClock
) -> None:
    m = await aclient.store("The invoice run is on the 3rd", importance=0.6)
    # Past both drop times (outer at 14,400 s, belt at 72,000 s) with no rebalance between.
    clock.set(m.created_at.timestamp() + 100_000)
    move = (await aclient.get(m.id)).next_move
    assert move is not None and move.zone == Zone.CLOUD
    assert abs(move.at - m.created_at - timedelta(seconds=14_400)) < timedelta(milliseconds=1)
    rep = await aclient.rebalance()
    assert rep.moved == {(Zone.OUTER, Zone.CLOUD): 1}


async def test_a_score_whose_floor_stays_in_its_zone_has_no_move(
    aclient: AsyncCelestialClient, clock: ManualClock
) -> None:
    # 0.25·0.8 - 0.30 (the freshness floor) = -0.10: it never falls below the belt.
    m = await aclient.store("The team offsite is in Lisbon in June", importance=0.8)
    clock.advance(2 * DAY)
    await aclient.rebalance()
    got = await aclient.get(m.id)
    assert got.zone == Zone.BELT and got.next_move is None


async def test_a_memory_lifted_by_context_moves_back_at_the_next_rebalance(
    aclient: AsyncCelestialClient, clock: ManualClock
) -> None:
    m = await aclient.store("Alice drinks her espresso without sugar", importance=0.8)
    query = "how does Alice take her coffee?"
    [hit] = await aclient.recall(query, limit=1, context=query)
    assert hit.memory.zone == Zone.INNER  # the context score lifted it
    move = hit.memory.next_move
    # Its resting score (no context) is an outer one: due already, at its last write.
    assert move is not None and move.zone == Zone.OUTER
    assert move.at.timestamp() <= clock.now()
    assert (await aclient.get(m.id)).next_move == move
    clock.advance(1)
    rep = await aclient.rebalance()
    assert rep.moved == {(Zone.INNER, Zone.OUTER): 1}
    assert (await aclient.get(m.id)).zone == Zone.OUTER


async def test_pinned_memories_have_no_move_and_cloud_ones_are_forgotten(
    aclient: AsyncCelestialClient, clock: ManualClock
) -> None:
    pinned = await aclient.store("The office door code is 4711", pinned=True)
    assert (await aclient.get(pinned.id)).next_move is None
    low = await aclient.store("a passing remark about the weather", importance=0.0)
    clock.advance(2 * DAY)  # the floor: -0.30 is below the belt's -0.10
    await aclient.rebalance()
    got = await aclient.get(low.id)
    assert got.zone == Zone.CLOUD
    move = got.next_move
    assert move is not None and move.archive and move.zone is None
    assert move.at - got.last_recalled_at == timedelta(days=90)  # CELESTIAL_AUTO_FORGET_DAYS
    clock.set(move.at.timestamp() + 60)
    rep = await aclient.rebalance()
    assert rep.forgotten == 1


async def test_the_agent_tools_show_the_next_move(client: CelestialClient) -> None:
    # The blocking client in a thread: the server answers on this test's event loop.
    out = await asyncio.to_thread(call_tool, client, "memory_save", {
        "content": "The invoice run is on the 3rd", "importance": 0.6})
    move = out.data["memory"]["next_move"]
    got = await asyncio.to_thread(client.get, out.data["memory"]["id"])
    assert move["zone"] == "belt" and got.next_move is not None
    assert datetime.fromisoformat(move["at"]) == got.next_move.at


async def test_the_cli_says_when_and_where(
    server: MemoryServer, clock: ManualClock, capsys: pytest.CaptureFixture[str]
) -> None:
    clock.set(time.time())  # the CLI tells "due" from "ahead" by its own clock
    argv = ["--target", f"127.0.0.1:{server.port}"]
    assert await asyncio.to_thread(main, [*argv, "store", "Pay the rent", "--importance",
                                          "0.6"]) == 0
    memory_id = capsys.readouterr().out.split()[1]
    assert await asyncio.to_thread(main, [*argv, "get", memory_id]) == 0
    due = datetime.fromtimestamp(clock.now() + 14_400, UTC)
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("next move"))
    assert line == f"next move    to belt at {due:%Y-%m-%d %H:%M:%S} unless recalled"
    assert await asyncio.to_thread(main, [*argv, "update", memory_id, "--pin"]) == 0
    assert "next move    none: pinned" in capsys.readouterr().out
