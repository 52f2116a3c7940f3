"""Reinforcement written behind survives the death of the process: the journal a dead process
left is replayed by the next one, a live process's journal is left alone, and a torn last line
is skipped. The processes here die by ``os._exit`` at a point the test chooses (nothing flushed,
nothing closed), which is what a kill leaves on disk."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.domain.requests import RecallQuery
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.zones.reinforcement_journal import ReinforcementJournal

from tests.conftest import unit_vectors


def _run(script: str, *args: str) -> None:
    subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args], check=True, timeout=120)


def test_a_dead_process_journal_is_recovered_and_a_live_one_is_not(tmp_path: Path) -> None:
    live = ReinforcementJournal(tmp_path)
    live.append("t", [("mine", {"recall_count": 9})])
    _run("""
        import os, sys
        from pathlib import Path
        from celestial_memory.zones.reinforcement_journal import ReinforcementJournal
        j = ReinforcementJournal(Path(sys.argv[1]))
        j.append("t", [("a", {"recall_count": 1}), ("b", {"recall_count": 1})])
        j.rotate()  # a flush started, never finished
        j.append("t", [("a", {"recall_count": 2, "zone": 1})])
        j.append("u", [("c", {"recall_count": 1})])
        os.write(j._fd, b'{"t": "t", "u": [["a", {"recall_co')  # torn by the death
        os._exit(0)
    """, str(tmp_path))

    found, files = ReinforcementJournal.recover(tmp_path)
    # The latest state of each memory wins, across segments; the torn line is skipped.
    assert found == {"t": {"a": {"recall_count": 2, "zone": 1}, "b": {"recall_count": 1}},
                     "u": {"c": {"recall_count": 1}}}
    assert len(files) == 3  # two segments and the dead process's lock
    ReinforcementJournal.release(files)
    assert ReinforcementJournal.recover(tmp_path) == ({}, [])  # the live one stays untouched
    live.close()
    assert list(tmp_path.iterdir()) == []


CHILD = """
    import os, sys
    from pathlib import Path
    import numpy as np
    from celestial_memory.app import build_service
    from celestial_memory.clock import ManualClock
    from celestial_memory.config import Settings
    from celestial_memory.domain.requests import NewMemory, RecallQuery

    class VectorsOnly:
        name, dimension = "vectors-only", 384
        def embed(self, texts):
            raise AssertionError("vectors are given")

    vectors = np.load(sys.argv[2])
    settings = Settings(data_dir=Path(sys.argv[1]), rebalance_interval_s=0, reinforce_flush_ms=100)
    svc = build_service(settings, embedder=VectorsOnly(), clock=ManualClock(1.7e9))
    stored = svc.store_many("j", [NewMemory(f"m{i}", vector=v.tolist()) for i, v in enumerate(vectors)])
    # The flusher stops before the recalls, so what they reinforce is only in the journal.
    svc.placement._stopped.set()
    svc.placement._wake.set()
    svc.placement._thread.join()
    for v in (vectors[0], vectors[0], vectors[1]):
        svc.recall("j", RecallQuery(query_vector=v.tolist(), limit=1, min_relevance=0.5))
    assert svc.placement.queue.pending() == 2
    print(" ".join(m.id for m in stored))
    os._exit(0)
"""


def test_reinforcements_of_a_killed_server_are_in_the_store_after_a_restart(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    vectors = unit_vectors(3, seed=11)
    np.save(tmp_path / "v.npy", vectors)
    data = tmp_path / "data"
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(CHILD), str(data),
                          str(tmp_path / "v.npy")], check=True, timeout=120, capture_output=True)
    ids = out.stdout.decode().split()
    journal_dir = next(data.glob("*_journal"))
    assert any(journal_dir.glob("*.jsonl")), "the killed process left its journal"

    svc = build_service(Settings(data_dir=data, rebalance_interval_s=0), embedder=embedder,
                        clock=ManualClock(1.7e9 + 60))
    try:
        counts = [svc.store.get("j", [i])[i].recall_count for i in ids]  # the store itself
        assert counts == [2, 1, 0]
        assert list(journal_dir.iterdir()) != []  # this process's own journal...
        assert not [p for p in journal_dir.glob("*.jsonl") if p.stat().st_size > 0]  # ...empty
        (r,) = svc.recall("j", RecallQuery(query_vector=vectors[0].tolist(), limit=1,
                                           min_relevance=0.5))
        assert r.memory.recall_count == 3
    finally:
        svc.close()
    assert list(journal_dir.iterdir()) == []  # a graceful stop leaves no journal


def test_a_failed_rotation_keeps_the_batch_and_the_journal_working(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new journal segment that cannot be opened (no descriptors, a full disk) fails that
    flush only: nothing queued is dropped, recalls go on journaling, the next flush writes all."""
    from celestial_memory.domain.requests import NewMemory

    svc = build_service(Settings(data_dir=tmp_path, rebalance_interval_s=0,
                                 reinforce_flush_ms=100),
                        embedder=embedder, clock=ManualClock(1.7e9))
    try:
        placement = svc.placement  # its flusher stops: this test decides when flushes run
        placement._stopped.set()
        placement._wake.set()
        placement._thread.join()
        v = unit_vectors(1, seed=12)[0]
        (m,) = svc.store_many("j", [NewMemory("a fact", vector=v.tolist())])
        q = RecallQuery(query_vector=v.tolist(), limit=1, min_relevance=0.5)
        svc.recall("j", q)
        queue = svc.placement.queue

        def no_descriptor(self: ReinforcementJournal, seq: int) -> int:
            raise OSError(24, "Too many open files")

        with monkeypatch.context() as patched:
            patched.setattr(ReinforcementJournal, "_open_segment", no_descriptor)
            with pytest.raises(OSError):
                queue.flush()
        assert queue.pending() == 1  # still queued, still journaled
        assert svc.recall("j", q)[0].memory.recall_count == 2  # journaling goes on
        queue.flush()
        assert svc.store.get("j", [m.id])[m.id].recall_count == 2
    finally:
        svc.close()
    assert list(next(tmp_path.glob("*_journal")).iterdir()) == []
