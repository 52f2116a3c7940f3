"""Background writes wait for a gap between calls, within their bound, and never make a caller
wait on them: the reinforcement flusher holds its writes while a call is being answered, a
caller's own flush (a Get after recalls) goes through at once, and the writes follow as soon
as the call ends. The waits here are liveness bounds far above the work (a minute of yield
against milliseconds of writing), not timings."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.domain.requests import NewMemory, RecallQuery
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.zones.activity import Activity

from tests.conftest import open_backend, unit_vectors


def test_a_gap_comes_when_the_last_call_ends_and_not_before() -> None:
    activity = Activity()
    assert activity.gap(time.monotonic())  # no call: quiet at once
    entered, leave = threading.Event(), threading.Event()

    def call() -> None:
        with activity.serving():
            entered.set()
            leave.wait(60)

    t = threading.Thread(target=call)
    t.start()
    entered.wait(60)
    assert activity.calls == 1
    assert not activity.gap(time.monotonic() + 0.05)  # the bound passed with the call on
    stop = False
    waiter = threading.Thread(target=lambda: activity.gap(time.monotonic() + 60, lambda: stop))
    waiter.start()
    stop = True
    activity.nudge()  # what ``unless`` reads changed: the waiter looks again
    waiter.join(30)
    assert not waiter.is_alive()
    leave.set()
    t.join(30)
    assert activity.calls == 0 and activity.gap(time.monotonic())


def test_the_flusher_writes_in_the_gaps_and_a_callers_flush_never_waits_for_one(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    settings = Settings(data_dir=tmp_path, rebalance_interval_s=0, reinforce_flush_ms=20,
                        background_yield_ms=10_000)
    svc = build_service(settings, embedder=embedder, store=open_backend("edge", tmp_path),
                        clock=ManualClock(1.7e9))
    try:
        v = unit_vectors(3, seed=5)
        ids = [m.id for m in svc.store_many("y", [NewMemory(f"m{i}", vector=x.tolist())
                                                  for i, x in enumerate(v)])]
        stored = lambda: svc.store.get("y", [ids[0]])[ids[0]].recall_count  # noqa: E731
        with svc.activity.serving():  # a call being answered: the flusher waits
            svc.recall("y", RecallQuery(query_vector=v[0].tolist(), limit=1,
                                        min_relevance=0.5))
            time.sleep(0.3)  # fifteen flush intervals
            assert stored() == 0  # not written: recalls read it from the overlay meanwhile
            assert svc.placement.pending("y", ids)[ids[0]].recall_count == 1
            # A caller that must see everything ends the waiting: its flush writes at once
            # (within the liveness bound, far below the 10 s the flusher would wait).
            done = threading.Thread(target=svc.placement.flush, args=("y",))
            done.start()
            done.join(5)
            assert not done.is_alive()
            assert stored() == 1
            svc.recall("y", RecallQuery(query_vector=v[0].tolist(), limit=1,
                                        min_relevance=0.5))
            time.sleep(0.3)
            assert stored() == 1  # held again while the call goes on
        deadline = time.monotonic() + 5  # the call ended: written at the flusher's next tick
        while stored() != 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert stored() == 2
    finally:
        svc.close()
