"""Repeats merge: a Store that repeats a live memory reinforces it instead of adding a copy, and
``consolidate`` does the same for memories stored before; on every backend, with the bundled
model embedding the texts."""

from __future__ import annotations

from pathlib import Path

import pytest
from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.domain.models import MemoryFilter
from celestial_memory.domain.requests import NewMemory, RecallQuery
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.errors import AlreadyExists
from celestial_memory.memory.service import MemoryService

from tests.conftest import open_backend

T = "rep"

# (first, second): stored one after the other, the second must merge into the first.
MERGE = [
    ("I love pizza", "I really love pizza"),
    ("Caroline went to the LGBTQ support group", "Caroline went to the LGBTQ support group "
                                                 "yesterday"),
    ("The project deadline is Friday.", "The project deadline is Friday"),
    ("I'm going to the gym tomorrow", "I'm going to the gym tomorrow morning"),
    ("Caroline is a counselor", "Caroline is a school counselor"),
    ("회의 자료를 준비했어요", "회의 자료를 어제 준비했어요"),
    ("프로젝트 마감은 금요일입니다", "프로젝트 마감은 금요일입니다."),
    ("내일 엄마한테 전화하기", "내일 엄마한테 전화하기!"),
]
# Near-misses: close embeddings (most at 0.88-0.96) but a word replaced, so both are kept.
APART = [
    ("The meeting is on Tuesday", "The meeting is on Thursday"),
    ("Call mom at 5pm", "Call mom at 6pm"),
    ("We moved to Seattle in 2019", "We moved to Seattle in 2020"),
    ("I live in Paris", "I live in London"),
    ("The password for the wifi is blue42", "The password for the wifi is red17"),
    ("서울에 살아요", "부산에 살아요"),
    ("다음 주 월요일에 병원 예약", "다음 주 화요일에 병원 예약"),
    ("민수는 커피를 좋아한다", "민수는 녹차를 좋아한다"),
    ("고양이 이름은 나비", "강아지 이름은 나비"),
    # Words a keyword index drops (single letters, stop words) still tell these apart.
    ("note c about the project plan", "note d about the project plan"),
    ("I'm allergic to peanuts", "I'm not allergic to peanuts"),
    ("I like spicy food", "I don't like spicy food"),
    ("민수는 커피를 좋아한다", "민수는 커피를 안 좋아한다"),
]


@pytest.mark.parametrize(("first", "second"), MERGE + APART)
def test_repeats_merge_and_near_misses_stay_apart(
    service: MemoryService, first: str, second: str
) -> None:
    a = service.store_batch(T, [NewMemory(first, session_id="s1", metadata={"turn": "1"})])
    b = service.store_batch(T, [NewMemory(second, session_id="s2", metadata={"turn": "2"})])
    held = a.memories[0]
    if (first, second) in MERGE:
        assert b.merged_into == [held.id] and b.created == [False]
        m = service.get(T, held.id)
        assert m.recall_count == 1 and service.stats(T).total == 1
        # The memory keeps the wording that says more; every wording and its source stays.
        longer = second if len(service.storing.terms(second)) > len(
            service.storing.terms(first)) else first
        assert m.content == longer
        assert second in [p.content for p in m.merged]
        assert {p.session_id for p in m.merged} >= {"s2"}
        assert any(p.metadata == {"turn": "2"} for p in m.merged)
    else:
        assert b.merged_into == [""] and b.created == [True]
        assert service.stats(T).total == 2


def test_the_merged_wording_is_searchable_and_the_setting_turns_it_off(
    tmp_path: Path, backend_kind: str, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    svc = build_service(Settings(data_dir=tmp_path, rebalance_interval_s=0), embedder=embedder,
                        store=open_backend(backend_kind, tmp_path), clock=clock)
    try:
        first = svc.store_memory(T, NewMemory("Caroline is a counselor"))
        clock.advance(60)
        out = svc.store_batch(T, [NewMemory("Caroline is a school counselor", session_id="s9"),
                                  NewMemory("Caroline is a school counselor!")])
        # The second item repeats the first of its batch, which repeats the stored memory.
        assert out.merged_into == [first.id, first.id]
        m = svc.get(T, first.id)
        assert m.content == "Caroline is a school counselor" and m.recall_count == 2
        assert m.last_recalled_at == clock.now()
        assert [p.id for p in m.merged] == [first.id, "", ""]  # its own first wording, kept
        q = RecallQuery(query="school", limit=1, reinforce=False, min_relevance=0.0)
        assert [r.memory.id for r in svc.recall(T, q)] == [first.id]
        # Items with an id ask for that memory: never merged.
        named = svc.store_memory(T, NewMemory("Caroline is a counselor",
                                              id="00000000-0000-4000-8000-000000000001"))
        assert named.id.endswith("0001") and svc.stats(T).total == 2
    finally:
        svc.close()
    off = build_service(Settings(data_dir=tmp_path / "off", rebalance_interval_s=0,
                                 merge_repeats=False), embedder=embedder,
                        store=open_backend("edge", tmp_path / "off"), clock=clock)
    try:
        off.store_memory(T, NewMemory("I love pizza"))
        assert off.store_batch(T, [NewMemory("I love pizza")]).merged_into == [""]
        assert off.stats(T).total == 2
    finally:
        off.close()


def test_consolidate_merges_what_was_stored_before(
    tmp_path: Path, backend_kind: str, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    svc = build_service(Settings(data_dir=tmp_path, rebalance_interval_s=0, merge_repeats=False),
                        embedder=embedder, store=open_backend(backend_kind, tmp_path),
                        clock=clock)
    try:
        texts = ["I love pizza", "The meeting is on Tuesday", "I really love pizza",
                 "The meeting is on Thursday", "I love pizza"]
        ids = []
        for i, t in enumerate(texts):
            ids.append(svc.store_memory(T, NewMemory(t, session_id=f"s{i}")).id)
            clock.advance(10)
        dry, scanned = svc.consolidate(T, dry_run=True)
        assert scanned == 5 and dry == [(ids[0], [ids[2], ids[4]])]
        assert svc.stats(T).total == 5  # a dry run writes nothing
        done, _ = svc.consolidate(T)
        assert done == dry and svc.stats(T).total == 3
        m = svc.get(T, ids[0])
        assert m.content == "I really love pizza" and m.recall_count == 2
        assert {p.id for p in m.merged} == {ids[0], ids[2], ids[4]}
        assert {p.session_id for p in m.merged} == {"s0", "s2", "s4"}
        q = RecallQuery(query="really love pizza", limit=3, reinforce=False, min_relevance=0.3)
        assert [r.memory.id for r in svc.recall(T, q)][:1] == [ids[0]]
        assert svc.consolidate(T) == ([], 3)  # nothing left to merge
        assert {x.id for x in svc.listing.in_id_order(T, MemoryFilter(), 10)[0]} == {
            ids[0], ids[1], ids[3]}
    finally:
        svc.close()


def test_a_retried_store_finds_the_memory_its_repeat_went_into(service: MemoryService) -> None:
    first = service.store_memory(T, NewMemory("I love pizza"))
    once = service.store_batch(T, [NewMemory("I really love pizza", request_id="r-1")])
    assert once.merged_into == [first.id]
    again = service.store_batch(T, [NewMemory("I really love pizza", request_id="r-1")])
    assert again.merged_into == [first.id] and again.created == [False]
    assert service.get(T, first.id).recall_count == 1  # counted once
    with pytest.raises(AlreadyExists, match="other content"):
        service.store_batch(T, [NewMemory("I really love pizza a lot", request_id="r-1")])
    assert service.stats(T).total == 1


def test_deleting_a_consolidated_id_erases_its_repeat(
    tmp_path: Path, backend_kind: str, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    svc = build_service(Settings(data_dir=tmp_path, rebalance_interval_s=0, merge_repeats=False),
                        embedder=embedder, store=open_backend(backend_kind, tmp_path),
                        clock=clock)
    try:
        keep = svc.store_memory(T, NewMemory("I really love pizza", session_id="a")).id
        clock.advance(10)
        gone = svc.store_memory(T, NewMemory("I love pizza", session_id="b")).id
        svc.consolidate(T)
        assert gone in {p.id for p in svc.get(T, keep).merged}
        clock.advance(60)
        assert svc.delete(T, gone)
        m = svc.get(T, keep)
        assert gone not in {p.id for p in m.merged}
        assert "I love pizza" not in [p.content for p in m.merged]
        events = svc.ledger(T, memory_id=gone)
        assert [e.reason for e in events] == ["merged", "deleted"]
        assert all(e.content_hash == "" for e in events)
        assert not svc.delete(T, gone)
    finally:
        svc.close()


def test_a_fold_is_checked_against_the_wording_the_memory_has_now(
    service: MemoryService, clock: ManualClock
) -> None:
    first = service.store_memory(T, NewMemory("Call mom tomorrow", importance=0.2))
    out = service.store_batch(T, [
        NewMemory("Call mom tomorrow at 5pm", pinned=True, importance=0.9, tags=["family"],
                  context="we talked about the weekend"),
        NewMemory("Call mom tomorrow at 6pm")])
    # The first took the longer wording; the second repeats the old one but not the new one.
    assert out.merged_into == [first.id, ""]
    m = service.get(T, first.id)
    assert m.content == "Call mom tomorrow at 5pm"
    assert m.pinned and m.importance == 0.9 and m.tags == ["family"]
    assert [p.context for p in m.merged if p.content.endswith("5pm")] == [
        "we talked about the weekend"]
    assert "6pm" in service.get(T, out.memories[1].id).content
    assert service.stats(T).total == 2


def test_provenance_is_bounded(service: MemoryService) -> None:
    from celestial_memory.memory.repeats import MAX_KEPT

    first = service.store_memory(T, NewMemory("the build is green"))
    for start in range(0, MAX_KEPT + 6, 50):
        n = min(50, MAX_KEPT + 6 - start)
        service.store_batch(T, [NewMemory("the build is green", session_id=f"s{start + i}")
                                for i in range(n)])
    m = service.get(T, first.id)
    assert len(m.merged) == MAX_KEPT and m.recall_count == MAX_KEPT + 6


def test_consolidate_leaves_merged_events_and_a_retry_finds_an_archived_holder(
    service: MemoryService, clock: ManualClock
) -> None:
    service.settings.merge_repeats = False
    a = service.store_memory(T, NewMemory("I love pizza", importance=0.0)).id
    clock.advance(10)
    b = service.store_memory(T, NewMemory("I really love pizza", importance=0.0)).id
    service.settings.merge_repeats = True
    assert service.consolidate(T)[0] == [(a, [b])]
    assert [e.reason for e in service.ledger(T, memory_id=b)] == ["merged"]
    # Importance 0 given, as above: the rules rate a stated liking high enough to keep it.
    r = service.store_batch(T, [NewMemory("I love pizza!", importance=0.0, request_id="q-1")])
    assert r.merged_into == [a]
    clock.advance(200 * 86_400)
    assert service.rebalance(T).forgotten == 1 and service.get(T, a).archived
    again = service.store_batch(T, [NewMemory("I love pizza!", importance=0.0, request_id="q-1")])
    assert again.merged_into == [a] and again.created == [False]
    assert service.stats(T).total == 0
