"""What one memory may cost is bounded by its text's length limit, not by what the text holds:
a memory that is one 32,768-syllable Korean word (or thousands of distinct words) keeps at most
MAX_TERMS keyword terms, and a StoreBatch of 150 such memories and runs of 32,768 digits is
stored (before, each took seconds to half a minute in one regular expression of the importance
cues, so the batch ran past the suite's hang limit)."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator

from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from celestial_memory.domain.importance_cues import KINDS
from celestial_memory.memory.service import MemoryService
from celestial_memory.recall.keywords import MAX_BIGRAMS, MAX_HANGUL_WORD, MAX_TERMS, expand_hangul
from celestial_memory.store.engine import MEMORIES
from celestial_memory.store.payload import CONTEXT_KEYWORDS, KEYWORDS

T = "long"
SYLLABLES = 32_768


def _hangul_word(rng: random.Random) -> str:
    return "".join(chr(rng.randrange(0xAC00, 0xD7A4)) for _ in range(SYLLABLES))


def _many_words(rng: random.Random) -> str:
    return " ".join("".join(chr(rng.randrange(97, 123)) for _ in range(6)) for _ in range(4600))


async def test_a_memory_keeps_a_bounded_number_of_keyword_terms(
    engine_server: tuple[MemoryService, pb_grpc.MemoryServiceStub],
) -> None:
    service, stub = engine_server
    # Keywords and the importance cues only: each text would also be embedded in up to
    # MAX_PASSAGES passages (recall/passages.py; bounded there, test_passages.py), which for
    # 150 texts of 32,768 characters is minutes of encoding, not what this measures.
    service.retrieval.keeps_passages = False
    rng = random.Random(5)
    n = 150

    async def batch() -> AsyncIterator[pb.StoreRequest]:
        for i in range(n):
            # Runs of digits too: a cue's number pattern once took 30 s on one.
            text = [_many_words(rng), _hangul_word(rng), "1" * 32_768, "1," * 16_384][i % 4]
            yield pb.StoreRequest(tenant=T, content=f"{i} " + text[:32_760])

    stored = await stub.StoreBatch(batch(), timeout=600)
    assert len(stored.ids) == n
    records = service.store.engine.retrieve(MEMORIES, list(stored.ids[:2]),
                                            vectors=[KEYWORDS, CONTEXT_KEYWORDS])
    for r in records:
        for name in (KEYWORDS, CONTEXT_KEYWORDS):
            assert 0 < len(r.vectors[name].indices) <= MAX_TERMS  # type: ignore[union-attr]
    # The memory is found by a query naming its first syllables, as any Korean word would be.
    word = (await stub.Get(pb.GetRequest(tenant=T, id=stored.ids[1]))).memory.content
    hits = await stub.Recall(pb.RecallRequest(tenant=T, query=word[:6], limit=10))
    assert stored.ids[1] in [h.memory.id for h in hits.results]
    await stub.Recall(pb.RecallRequest(tenant=T, query=word[:4000], limit=3))  # a long query


def test_hangul_expansion_is_bounded() -> None:
    rng = random.Random(1)
    grams = expand_hangul(_hangul_word(rng)).split(" ")[1:]
    assert len(grams) == MAX_HANGUL_WORD - 1
    many = " ".join("".join(chr(rng.randrange(0xAC00, 0xD7A4)) for _ in range(30))
                    for _ in range(1000))
    assert len(expand_hangul(many).split(" ")) - 1000 == MAX_BIGRAMS
    assert expand_hangul("수업에 갔다") == "수업에 갔다 수업 업에"


def test_the_e_mail_cue_still_finds_addresses() -> None:
    person = next(k for k in KINDS if k.name == "person")
    assert person.matches("write to jo.doe+x@mail.example.org tomorrow")
    assert not person.matches("a" * 5000 + "@" + "b" * 10)  # no local part is that long
