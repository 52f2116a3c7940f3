"""The archive and repeats through gRPC and the Python client: what a caller sees."""

from __future__ import annotations

import pytest
from celestial_client import AsyncCelestialClient, FailedPreconditionError, StoreItem
from celestial_client.v1 import memory_pb2 as pb
from celestial_memory.clock import ManualClock

DAY = 86_400.0


async def test_forget_list_deep_recall_restore_through_the_client(
    aclient: AsyncCelestialClient, clock: ManualClock
) -> None:
    m = await aclient.store("the spare key is under the blue flowerpot", importance=0.0)
    other = await aclient.store("quarterly report due in March", importance=0.0)
    clock.advance(91 * DAY)
    await aclient.recall("quarterly report", 1)  # keeps it alive
    rep = await aclient.rebalance()
    assert rep.forgotten == 1 and rep.purged == 0
    got = await aclient.get(m.id)
    assert got.archived and got.archived_at is not None
    stats = await aclient.stats()
    assert stats.total == 1 and stats.archived == 1
    assert [x.id for x in await aclient.recent(10, archived=True)] == [m.id]
    assert [x.id for x in await aclient.recent(10)] == [other.id]
    page = await aclient.list_page(10, archived=True)
    assert [x.id for x in page.items] == [m.id]
    # The zones have nothing about the key above the gate: the deep recall finds it archived.
    found = await aclient.recall("where is the spare key", 3, min_relevance=0.3)
    assert [(r.id, r.archived) for r in found] == [(m.id, True)]
    assert await aclient.recall("where is the spare key", 3, min_relevance=0.3, deep=False) == []
    with pytest.raises(FailedPreconditionError, match="restore it first"):
        await aclient.update(m.id, importance=0.9)
    clock.advance(60)  # events of one time are read in id order
    back = await aclient.restore(m.id)
    assert not back.archived and back.zone.value != ""
    reasons = [e.reason for e in await aclient.ledger(memory_id=m.id)]
    assert reasons == ["forgotten", "restored"]
    assert (await aclient.stats()).archived == 0
    clock.advance(60)
    assert await aclient.delete(m.id)
    assert [e.reason for e in await aclient.ledger(memory_id=m.id)][-1] == "deleted"


async def test_repeats_merge_and_consolidate_through_the_client(
    aclient: AsyncCelestialClient, clock: ManualClock
) -> None:
    first = await aclient.store("Caroline is a counselor")
    again = await aclient.store("Caroline is a school counselor", session_id="s2")
    assert again.id == first.id and again.content == "Caroline is a school counselor"
    assert [r.session_id for r in again.merged][-1] == "s2" and again.recall_count == 1
    ids = await aclient.store_batch([StoreItem("Caroline is a counselor!"),
                                     StoreItem("The meeting is on Tuesday")])
    assert ids[0] == first.id and ids[1] != first.id
    # The wire says which memory a repeat went into.
    stub_resp = await aclient._call("Store", pb.StoreRequest(tenant=aclient.tenant,
                                                             content="Caroline is a counselor"))
    assert stub_resp.merged_into == first.id and not stub_resp.created
    done = await aclient.consolidate()
    assert done.dry_run and done.merges == [] and done.scanned == 2
