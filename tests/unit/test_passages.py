"""A long memory's passages (recall/passages.py) and its keywords as its passages weigh them."""

from __future__ import annotations

from itertools import pairwise

from celestial_memory.recall.keywords import KeywordEncoder
from celestial_memory.recall.passages import passages


def _text(n: int) -> str:
    return " ".join(f"Sentence number {i} says something about topic {i}." for i in range(n))


def test_a_text_no_longer_than_a_passage_is_its_own_only_passage() -> None:
    assert passages("A short note.", 300) == ["A short note."]
    assert passages("  ", 300) == []
    assert passages(_text(40), 0) == [_text(40)]


def test_passages_are_short_cover_every_sentence_in_order_and_end_with_the_last() -> None:
    text = _text(200) + "\nThe spare key is under the blue flowerpot."
    parts = passages(text, 300)
    assert len(parts) > 20 and all(len(p) <= 300 for p in parts)
    assert parts[-1].endswith("The spare key is under the blue flowerpot.")
    at = -1
    for i in range(200):
        sentence = f"Sentence number {i} says something about topic {i}."
        holding = [k for k, p in enumerate(parts) if sentence in p]
        assert holding, sentence  # whole, in some passage
        assert holding[0] >= at  # in order
        at = holding[0]


def test_each_passage_begins_with_the_last_sentence_of_the_one_before() -> None:
    parts = passages(_text(60), 300)
    for before, after in pairwise(parts):
        last = before.rsplit(". ", 1)[-1]
        assert after.startswith(last.rstrip(".")), (before, after)


def test_a_sentence_longer_than_a_passage_is_cut_at_spaces_and_a_word_at_the_size() -> None:
    words = "word " * 200
    parts = passages(words, 100)
    assert all(0 < len(p) <= 100 for p in parts) and all(" wor " not in f" {p} " for p in parts)
    assert "".join(passages("x" * 250, 100)) == "x" * 250


def test_a_long_texts_keywords_weigh_each_term_as_its_best_passage_does() -> None:
    enc = KeywordEncoder(1.2, 0.4, 14.0, 34.0)
    text = _text(300) + " The flowerpot hides the key."
    parts = passages(text, 300)
    whole, best = enc.document(text), enc.best_of(parts)
    term = enc.query("flowerpot").indices[0]
    weight = dict(zip(best.indices, best.values, strict=True))[term]
    # The whole text's length weighs the term tens of times down; its passage does not.
    assert weight > 10 * dict(zip(whole.indices, whole.values, strict=True))[term]
    assert weight == max(dict(zip(d.indices, d.values, strict=True)).get(term, 0.0)
                         for d in map(enc.document, parts))
