"""The rules' summary and triple of a memory, the model's summary in the extraction answer,
Reflect's reading of a model answer, and a Context block falling back to the shorter forms."""

from __future__ import annotations

import json

import pytest
from celestial_memory.domain.models import Memory
from celestial_memory.domain.zones import Zone
from celestial_memory.memory.prompt_context import Assembler, WordTokens
from celestial_memory.reflection.prompt import MAX_SHOWN, Group, body, parse, prompt
from celestial_memory.understanding import extraction
from celestial_memory.understanding.chat import ModelError
from celestial_memory.understanding.resolutions import rule_summary, rule_triple


def mem(mid: str, content: str, **more: object) -> Memory:
    return Memory(id=mid, tenant="t", content=content, zone=Zone.OUTER, score=0.2,
                  importance=0.5, recall_count=0, created_at=1_700_000_000.0,
                  last_recalled_at=1_700_000_000.0, **more)  # type: ignore[arg-type]


def test_the_rules_summary_is_the_first_sentence_cut_at_a_word() -> None:
    assert rule_summary("Alice moved to Oslo.  She likes it there.", 100) == "Alice moved to Oslo."
    assert rule_summary("first line\nsecond line", 100) == "first line"
    assert rule_summary("오늘 날씨가 좋다. 내일은 비가 온다.", 100) == "오늘 날씨가 좋다."
    cut = rule_summary("one two three four five six seven eight nine ten", 20)
    assert cut == "one two three four…" and len(cut) <= 20
    assert rule_summary("x" * 50, 20) == "x" * 19 + "…"  # no word to cut at


@pytest.mark.parametrize(("text", "triple"), [
    ("Alice works at Acme. She likes it.", ("Alice", "works_at", "Acme")),
    ("Bob Smith lives in Boston", ("Bob Smith", "lives_in", "Boston")),
    ("I am allergic to peanuts", ("I", "am", "allergic to peanuts")),
    ("I like green tea!", ("I", "like", "green tea")),
    ("Caroline was born in 1990", ("Caroline", "was_born_in", "1990")),
    ("My cat is old", None),  # no name first
    ("the meeting went well", None),
    ("오늘 날씨가 좋다", None),  # English phrases only
])
def test_the_rules_triple(text: str, triple: tuple[str, str, str] | None) -> None:
    assert rule_triple(text) == triple


def test_the_extraction_answer_carries_a_summary() -> None:
    answer = json.dumps({"memories": [
        {"n": 1, "summary": "  Alice   works at Acme. ", "triples": []}, {"n": 2}]})
    one, two = extraction.parse(answer, 2)
    assert one.summary == "Alice works at Acme." and two.summary == ""
    assert '"summary"' in extraction.PROMPT
    # A summary that is not text is a malformed answer, like any field of the wrong shape.
    with pytest.raises(ModelError):
        extraction.parse(json.dumps({"memories": [{"n": 1, "summary": 42}]}), 1)


def test_reflect_reads_only_insights_with_sources_it_gave() -> None:
    alice = Group("name:alice", [mem(f"a{i}", f"Alice said {i}") for i in range(25)])
    bob = Group("name:bob", [mem("b0", "Bob hiked"), mem("b1", "Bob hiked again")])
    sent = body([alice, bob])
    assert sent.splitlines()[0] == "Entity 1: name:alice"
    assert f"[{MAX_SHOWN}] (2023-11-14) Alice said {MAX_SHOWN - 1}" in sent
    assert f"[{MAX_SHOWN + 1}]" not in sent  # only the newest MAX_SHOWN of an entity
    assert "Entity 2: name:bob" in sent and "at most 2 insights" in prompt(2)
    good = json.dumps({"entities": [
        {"n": 2, "summary": "Bob hikes.", "insights": [
            {"text": "Bob hikes a lot", "sources": [1, 2, 2]},
            {"text": "Bob hikes a lot", "sources": [1]},  # the same again: once
            {"text": "made up", "sources": [3]},  # no memory 3 was given for Bob
            {"text": "no sources"}, {"text": "", "sources": [1]}, "junk"]},
        {"n": 1, "insights": [{"text": f"insight {i}", "sources": [i]} for i in range(1, 6)]}]})
    a, b = parse(good, [alice, bob], 3)
    assert a.summary == "" and [t.text for t in a.insights] == ["insight 1", "insight 2",
                                                                 "insight 3"]
    assert a.insights[0].sources == ["a0"]
    assert b.summary == "Bob hikes." and [(t.text, t.sources) for t in b.insights] == [
        ("Bob hikes a lot", ["b0", "b1"])]
    assert parse("```json\n" + good + "\n```", [alice, bob], 3)[1].summary == "Bob hikes."
    for bad in ("Bob hikes.", '{"insights": []}', '{"entities": [{"n": 1}]}',
                '{"entities": [{"n": 1}, {"n": 1}]}', '{"entities": [{"n": 1}, {"n": 3}]}',
                '{"entities": [{"n": true}, {"n": 2}]}'):
        with pytest.raises(ModelError):
            parse(bad, [alice, bob], 3)


def test_a_block_shows_the_shortest_form_that_fits() -> None:
    long_text = ("Alice works at Acme. " + "She talks about her work at length, " * 10).strip()
    m = mem("m1", long_text, summary="Alice works at Acme and talks about it.",
            triples=[("Alice", "works_at", "Acme")])
    forms: list[list[str]] = []
    for budget in range(10, 200, 5):
        a = Assembler(budget, WordTokens(), 1 << 20)
        a.select([m], [Zone.OUTER])
        b = a.block
        assert b.tokens <= budget and len(b.forms) == len(b.included)
        assert b.omitted == ([] if b.included else ["m1"])
        forms.append(b.forms)
        if b.forms == ["summary"]:
            assert "(summary) Alice works at Acme and talks about it." in b.text
        if b.forms == ["triple"]:
            assert "(fact) Alice works at Acme" in b.text
    seen = [f[0] if f else "" for f in forms]
    assert [f for i, f in enumerate(seen) if i == 0 or seen[i - 1] != f] == [
        "", "triple", "summary", "full"]


def test_a_short_memory_has_no_shorter_form() -> None:
    m = mem("m1", "Alice works at Acme.")
    a = Assembler(5, WordTokens(), 1 << 20)
    a.select([m], [Zone.OUTER])
    assert a.block.included == [] and a.block.omitted == ["m1"]
