"""A long memory found by any part, through gRPC with the bundled model: a fact in the last
lines of a 20,000-character memory is recalled first, by text and by vector, among short
memories that share its words (recall/passages.py)."""

from __future__ import annotations

from pathlib import Path

from celestial_client import AsyncCelestialClient
from celestial_memory.clock import ManualClock
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder

from tests.integration.conftest import running_server

T0 = 1_700_000_000.0
FACT = "The spare key to the lake cabin is hidden under the blue flowerpot by the back door."
TOPICS = ["the budget", "the quarterly report", "the hiring plan", "the office move",
          "the product launch", "the customer survey", "the travel policy", "the server costs"]
PEOPLE = ["Ana", "Bruno", "Chen", "Dana", "Emeka", "Farah"]


def _minutes(chars: int) -> str:
    """Meeting minutes about anything but the cabin, ``chars`` long."""
    lines = []
    i = 0
    while sum(len(x) + 1 for x in lines) < chars:
        who, what = PEOPLE[i % len(PEOPLE)], TOPICS[(i * 5) % len(TOPICS)]
        lines.append(f"{who} went through {what} for week {i} and asked for figures by Friday; "
                     f"the team agreed to revisit item {i} at the next meeting.")
        i += 1
    return "\n".join(lines)


SHARING_WORDS = ["I lost my car key at the gym yesterday", "The cabin trip in June was lovely",
                 "Blue is my favourite colour for flowerpots", "Remember to lock the back door",
                 "We rented a cabin by the lake last summer", "The garden needs new flowerpots",
                 "Where did I put my reading glasses?"]


async def test_a_fact_at_the_end_of_a_long_memory_is_recalled_first(
    tmp_path: Path, embedder: SentenceTransformerEmbedder,
) -> None:
    long_text = _minutes(20_000) + "\n" + FACT
    assert len(long_text) > 20_000 and long_text.index(FACT) > 19_900
    async with running_server(tmp_path, embedder, ManualClock(T0)) as srv, \
            AsyncCelestialClient(f"127.0.0.1:{srv.port}", tenant="it") as c:
        long = await c.store(long_text)
        await c.store(_minutes(12_000))  # another long memory, without the fact
        await c.store_batch(SHARING_WORDS)
        queries = ("where is the spare cabin key hidden?",
                   "how do I get into the lake cabin if I lost my key")
        results = await c.recall(queries[0], limit=3, reinforce=False)
        assert results[0].id == long.id, [r.memory.content[:40] for r in results]
        # The looser question shares "lost my ... key" with a short memory, which may come first.
        results = await c.recall(queries[1], limit=3, reinforce=False)
        assert long.id in [r.id for r in results[:2]], [r.memory.content[:40] for r in results]
        vector = embedder.embed([queries[0]])[0].tolist()
        results = await c.recall(query_vector=vector, limit=3, reinforce=False)
        assert results[0].id == long.id, [r.memory.content[:40] for r in results]
        # By the vector alone, "We rented a cabin by the lake" is as near the looser question.
        vector = embedder.embed([queries[1]])[0].tolist()
        results = await c.recall(query_vector=vector, limit=3, reinforce=False)
        assert long.id in [r.id for r in results], [r.memory.content[:40] for r in results]
        # A short memory nearly saying the same: the vector alone ranks it above the fact's
        # passage (a line of minutes shares the passage), the query's words do not.
        await c.store("The hotel gave us a spare key card")
        results = await c.recall(queries[0], limit=3, reinforce=False)
        assert results[0].id == long.id, [r.memory.content[:40] for r in results]


async def test_without_passages_the_same_fact_is_not_recalled_first(
    tmp_path: Path, embedder: SentenceTransformerEmbedder,
) -> None:
    """The encoder reads the first ~1,000 characters: what the passages are for."""
    async with running_server(tmp_path, embedder, ManualClock(T0),
                              passages_over_chars=0) as srv, \
            AsyncCelestialClient(f"127.0.0.1:{srv.port}", tenant="it") as c:
        long = await c.store(_minutes(20_000) + "\n" + FACT)
        await c.store_batch(["I lost my car key at the gym yesterday",
                             "We rented a cabin by the lake last summer"])
        vector = embedder.embed(["where is the spare cabin key hidden?"])[0].tolist()
        results = await c.recall(query_vector=vector, limit=3, reinforce=False)
        assert long.id not in [r.id for r in results[:1]]


async def test_an_edit_and_an_import_give_a_long_memory_its_passages(
    tmp_path: Path, embedder: SentenceTransformerEmbedder,
) -> None:
    vector = embedder.embed(["where is the spare cabin key hidden?"])[0].tolist()
    async with running_server(tmp_path / "a", embedder, ManualClock(T0)) as a, \
            running_server(tmp_path / "b", embedder, ManualClock(T0)) as b, \
            AsyncCelestialClient(f"127.0.0.1:{a.port}", tenant="it") as c, \
            AsyncCelestialClient(f"127.0.0.1:{b.port}", tenant="it") as copy:
        edited = await c.store("A short note about the weekly meeting")
        await c.store_batch(SHARING_WORDS)
        await c.update(edited.id, content=_minutes(20_000) + "\n" + FACT)  # embedded anew
        results = await c.recall(query_vector=vector, limit=3, reinforce=False)
        assert results[0].id == edited.id, [r.memory.content[:40] for r in results]
        # An export carries the content vector, not the passages: the import rebuilds them.
        result = await copy.import_memories([m async for m in c.export()])
        assert result.imported == len(SHARING_WORDS) + 1
        results = await copy.recall(query_vector=vector, limit=3, reinforce=False)
        assert results[0].id == edited.id, [r.memory.content[:40] for r in results]
