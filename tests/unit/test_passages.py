"""A long memory's passages (recall/passages.py) and its keywords as its passages weigh them."""

from __future__ import annotations

import random
from collections.abc import Sequence
from itertools import pairwise

import numpy as np
import pytest
from celestial_memory.config import Settings
from celestial_memory.recall.keywords import KeywordEncoder
from celestial_memory.recall.passages import MAX_PASSAGES, passages, width
from celestial_memory.recall.retrieval import Retrieval


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


def test_wide_characters_count_as_the_tokens_they_are() -> None:
    chinese = "我们今天去公园散步然后吃饭" * 200  # no spaces, no sentence ends
    parts = passages(chinese, 300)
    assert all(width(p) <= 300 for p in parts) and max(len(p) for p in parts) <= 75
    assert "".join(parts) == chinese
    sentences = passages("今天天气很好。我们去公园吧！" * 40, 300)
    assert all(p.endswith(("。", "！")) for p in sentences)


def test_any_whitespace_separates_words_and_a_decimal_point_ends_no_sentence() -> None:
    tabbed = "\t".join(["alpha", "kilo", "lima", "mike"] * 100)
    for p in passages(tabbed, 300):
        assert set(p.split()) <= {"alpha", "kilo", "lima", "mike"}
    assert any("3.14 is pi" in p for p in passages("Pi: 3.14 is pi. " * 100, 300))


class _Counting:
    dimension = 4

    def __init__(self) -> None:
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(len(texts))
        return np.ones((len(texts), self.dimension), dtype=np.float32)


def test_passages_are_embedded_a_chunk_at_a_time_and_a_cancellation_stops_them() -> None:
    enc = _Counting()
    retrieval = Retrieval(Settings(embed_max_batch=8), enc)
    text = _text(200)
    (ix,) = retrieval.index_vectors([text], [""], [np.ones(4, np.float32)], [True])
    assert ix.passages is not None and len(ix.passages) == len(passages(text, 300))
    assert max(enc.calls) == 8 and sum(enc.calls) == len(ix.passages)

    def cancelled() -> None:
        raise TimeoutError("the store")

    with pytest.raises(TimeoutError):
        retrieval.index_vectors([text], [""], [np.ones(4, np.float32)], [True], between=cancelled)


def test_a_store_that_cannot_keep_passages_gets_none_and_plain_keywords() -> None:
    enc = _Counting()
    retrieval = Retrieval(Settings(), enc, keeps_passages=False)
    text = _text(200)
    (ix,) = retrieval.index_vectors([text], [""], [np.ones(4, np.float32)], [True])
    assert ix.passages is None and enc.calls == []
    assert ix.keywords == retrieval.keywords.document(text)


def test_no_text_within_the_length_limit_gets_many_more_than_max_passages() -> None:
    rng = random.Random(5)
    texts = [
        " ".join("".join(chr(rng.randrange(97, 123)) for _ in range(6)) for _ in range(4600)),
        "".join(chr(rng.randrange(0xAC00, 0xD7A4)) for _ in range(32_768)),
        "1" * 32_768, "1," * 16_384, "Hello there friend. " * 1638,
    ]
    for text in texts:
        parts = passages(text[:32_768], 300)
        assert MAX_PASSAGES // 2 < len(parts) <= MAX_PASSAGES + 2, (text[:20], len(parts))
    assert len(passages(_text(200), 300)) > 20  # a shorter text keeps its narrow windows
