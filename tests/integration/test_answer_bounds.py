"""Every answer fits one message, whatever was stored: recalls of long memories, a memory many
long repeats were merged into, a Context block of words the tokenizer cannot split; and what
comes in is bounded too (vectors of extreme values, the repeats an import carries). Through
gRPC, on both engines; peak memory asserted where a hostile tester found it growing.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import numpy as np
import pytest
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.clock import ManualClock
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.integration.conftest import running_server
from tests.rss import peak_rss_growth

LIMIT = 4 * 1024 * 1024  # the default message limit
T = "bounds"
ENGINES = {"edge": {}, "qdrant-local": {"backend": "qdrant"}}
Long = tuple[MemoryServer, pb_grpc.MemoryServiceStub, str]  # server, stub, engine


@asynccontextmanager
async def serving(tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock,
                  engine: str) -> AsyncIterator[pb_grpc.MemoryServiceStub]:
    """A server on ``engine`` (ENGINES) and a stub calling it."""
    async with (
        running_server(tmp_path, embedder, clock, **ENGINES[engine]) as srv,
        grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as ch,
    ):
        yield pb_grpc.MemoryServiceStub(ch)


def hangul(n: int, seed: int) -> str:
    """``n`` random Hangul syllables without a space: one "word" the model's tokenizer makes a
    single unknown token of, so tokens say nothing of its 3n bytes."""
    rng = random.Random(seed)
    return "".join(chr(0xAC00 + rng.randrange(11172)) for _ in range(n))


@pytest.fixture(scope="module", params=list(ENGINES))
async def long_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
    embedder: SentenceTransformerEmbedder,
) -> AsyncIterator[Long]:
    """A server holding 100 memories of about 98 KB each or more: on the embedded engine
    32,768 Hangul syllables of content each; on qdrant-client's local mode, whose pure-Python
    sparse scoring takes seconds per long text (a Qdrant server does not), 12 such memories
    and 88 of short content with 64 metadata values of 1,024 syllables (196 KB)."""
    long = 100 if request.param == "edge" else 12
    bulky = {f"k{j}": hangul(1024, 1000 + j) for j in range(64)}
    async with (
        running_server(tmp_path_factory.mktemp("long"), embedder,
                       ManualClock(1_700_000_000.0), **ENGINES[request.param]) as srv,
        grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}",
                                  options=[("grpc.max_receive_message_length", 64 << 20)]) as ch,
    ):
        stub = pb_grpc.MemoryServiceStub(ch)
        items = [pb.StoreRequest(tenant=T, content=hangul(32_768, i), importance=0.5)
                 if i < long else pb.StoreRequest(tenant=T, content=f"{hangul(3, i)} note {i}",
                                                  metadata=bulky, importance=0.5)
                 for i in range(100)]
        for start in range(0, 100, 20):
            assert (await stub.StoreBatch(iter(items[start:start + 20]))).stored == 20
        yield srv, stub, request.param


async def recall_counts(stub: pb_grpc.MemoryServiceStub) -> dict[str, int]:
    counts: dict[str, int] = {}
    token = ""
    while True:
        page = await stub.List(pb.ListRequest(tenant=T, page_token=token, page_size=1000))
        counts.update({m.id: m.recall_count for m in page.memories})
        if not (token := page.next_page_token):
            return counts


async def test_a_recall_returns_what_fits_and_reinforces_only_that(
    long_server: Long,
) -> None:
    _, stub, _ = long_server
    before = await recall_counts(stub)
    assert len(before) == 100
    with peak_rss_growth() as growth:
        out = await stub.Recall(pb.RecallRequest(tenant=T, query=hangul(20, 7), limit=50,
                                                 min_relevance=0.0))
    assert 0 < len(out.results) < 50  # 50 of them would take 4.9 MB
    assert out.ByteSize() <= LIMIT
    after = await recall_counts(stub)
    returned = {r.memory.id for r in out.results}
    assert {m for m in after if after[m] != before[m]} == returned
    assert all(after[m] == before[m] + 1 for m in returned)
    assert growth[0] < 300 * 2**20, growth


async def test_context_is_bounded_by_bytes_and_work_not_only_tokens(
    long_server: Long,
) -> None:
    srv, stub, engine = long_server
    health = health_pb2_grpc.HealthStub(grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}"))
    ask = pb.ContextRequest(recall=pb.RecallRequest(tenant=T, query=hangul(20, 8), limit=100,
                                                    min_relevance=0.0, no_reinforce=True),
                            max_tokens=32_768)
    # Sixteen at once on the embedded engine; two on local mode, which serves one at a time.
    concurrent = 16 if engine == "edge" else 2
    with peak_rss_growth() as growth:
        calls = [stub.Context(ask) for _ in range(concurrent)]
        # The server answers its probes while sixteen of them run.
        probe = await health.Check(health_pb2.HealthCheckRequest(), timeout=60)
        blocks = await asyncio.gather(*calls)
    assert probe.status == health_pb2.HealthCheckResponse.SERVING
    for b in blocks:
        size = len(b.text.encode())
        # At most 16 bytes a token of the budget (and within one answer), whatever the tokens.
        assert 0 < size <= 32_768 * 16 + 256 and b.ByteSize() <= LIMIT
        whole = [r for r in b.included_resolutions if r == pb.RESOLUTION_FULL]
        assert whole and len(b.included_resolutions) == len(b.included_ids)
        # The rest is said to be left out, or shown by its one-line summary where that fits.
        assert b.omitted_ids or len(whole) < len(b.included_ids)
        assert len(b.included_ids) + len(b.omitted_ids) + len(b.folded_ids) == 100
        if engine == "edge":  # every memory 98 KB long: 512 KB hold five lines
            assert len(whole) <= 6
    assert growth[0] < 600 * 2**20, growth


@pytest.mark.parametrize("engine", list(ENGINES))
async def test_a_memory_many_long_repeats_were_merged_into_stays_readable(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock, engine: str,
) -> None:
    async with serving(tmp_path, embedder, clock, engine) as stub:
        first = None
        for _ in range(15):
            out = await stub.Store(pb.StoreRequest(tenant=T, content="😀" * 32_768,
                                                   context="😃" * 32_768))
            first = first or out.memory.id
            assert out.memory.id == first and out.ByteSize() <= LIMIT
        got = (await stub.Get(pb.GetRequest(tenant=T, id=first))).memory
        assert got.recall_count == 14  # every repeat counted as a mention
        assert 0 < len(got.merged) < 14  # the wording of those that fit is kept
        assert got.ByteSize() <= LIMIT // 2
        recalled = await stub.Recall(pb.RecallRequest(tenant=T, query="😀", min_relevance=0.0))
        assert [r.memory.id for r in recalled.results] == [first]
        assert [m.id for m in (await stub.List(pb.ListRequest(tenant=T))).memories] == [first]
        assert len((await stub.Recent(pb.RecentRequest(tenant=T))).memories) == 1
        exported = [e async for e in stub.Export(pb.ExportRequest(tenant=T))]
        assert [e.memory.id for e in exported] == [first]
        updated = await stub.Update(pb.UpdateRequest(tenant=T, id=first, importance=0.9))
        assert updated.memory.importance == pytest.approx(0.9)
        # The export imports back as it was.
        assert (await stub.Delete(pb.DeleteRequest(tenant=T, id=first))).deleted
        exported[0].tenant = T
        assert (await stub.Import(iter(exported))).imported == 1
        back = (await stub.Get(pb.GetRequest(tenant=T, id=first))).memory
        assert back.merged == got.merged and back.content == got.content


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize("value", [1e38, -3.4e38, 1e-40])
async def test_vectors_of_extreme_values_keep_their_direction(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock, engine: str,
    value: float,
) -> None:
    async with serving(tmp_path, embedder, clock, engine) as stub:
        direction = np.zeros(384, dtype=np.float32)
        direction[:3] = [0.5, -1.0, 0.25]  # times 3.4e38: the largest float32 values
        stored = await stub.Store(pb.StoreRequest(
            tenant=T, content="a memory with its own vector", vector=(direction * value).tolist()))
        [e] = [e async for e in stub.Export(pb.ExportRequest(tenant=T))]
        vec = np.asarray(e.vector)
        assert np.all(np.isfinite(vec)) and np.linalg.norm(vec) == pytest.approx(1, abs=1e-5)
        expected = direction * np.sign(value) / np.linalg.norm(direction)
        # 1e-40 is a float32 subnormal: the request itself carries only a few digits of it.
        assert vec == pytest.approx(expected, abs=1e-6 if abs(value) > 1e-30 else 1e-4)
        hit = await stub.Recall(pb.RecallRequest(tenant=T, query_vector=expected.tolist(),
                                                 no_reinforce=True))
        assert hit.results[0].memory.id == stored.memory.id
        for bad in ([1e39] + [0.0] * 383, [0.0] * 384):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.Store(pb.StoreRequest(tenant=T, content="bad vector", vector=bad))
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def _exported_with(merged: list[pb.MergedRepeat]) -> pb.ExportedMemory:
    e = pb.ExportedMemory(tenant=T, vector=[1.0] + [0.0] * 383, memory=pb.Memory(
        id="0b6c4b9e-51a4-4d2c-9d2e-3a0f1c2b7e11", content="imported", importance=0.5,
        zone=pb.ZONE_OUTER))
    e.memory.merged.extend(merged)
    return e


@pytest.mark.parametrize("engine", list(ENGINES))
@pytest.mark.parametrize(("merged", "field"), [
    ([pb.MergedRepeat(content="said before", id="nope")], "memories[0].memory.merged[0].id"),
    ([pb.MergedRepeat(content="")], "memories[0].memory.merged[0].content"),
    ([pb.MergedRepeat(content="said before", metadata={"a.b": "x"})],
     "memories[0].memory.merged[0].metadata"),
    ([pb.MergedRepeat(content="said before")] * 20_000, "memories[0].memory.merged"),
    ([pb.MergedRepeat(content="😀" * 32_768, context="😃" * 32_768)] * 8,
     "memories[0].memory.merged"),
])
async def test_import_checks_the_repeats_a_record_carries(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock, engine: str,
    merged: list[pb.MergedRepeat], field: str,
) -> None:
    async with serving(tmp_path, embedder, clock, engine) as stub:
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Import(iter([_exported_with(merged)]))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (err.value.details() or "").startswith(field + ":"), err.value.details()
        assert (await stub.Stats(pb.StatsRequest(tenant=T))).total == 0
        # The same record with a well-formed repeat goes in.
        ok = _exported_with([pb.MergedRepeat(content="said before",
                                             id="5a8f3c1e-2b4d-4e6f-8a9b-0c1d2e3f4a5b")])
        assert (await stub.Import(iter([ok]))).imported == 1


@pytest.mark.parametrize("engine", list(ENGINES))
async def test_repeats_add_at_most_max_tags_so_the_memory_stays_readable(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock, engine: str,
) -> None:
    async with serving(tmp_path, embedder, clock, engine) as stub:
        # 70 repeats of one text, each with 64 tags of 256 four-byte characters of its own:
        # their union was 4,480 tags (4.5 MB), more than any answer can carry.
        items = [pb.StoreRequest(tenant=T, content="the same note", tags=[
            f"{i:02d}{j:02d}" + "😀" * 252 for j in range(64)]) for i in range(70)]
        out = await stub.StoreBatch(iter(items))
        assert out.stored == 70 and out.merged == 69
        [mid] = set(out.ids)
        got = (await stub.Get(pb.GetRequest(tenant=T, id=mid))).memory
        assert len(got.tags) == 64 and got.recall_count == 69
        recalled = await stub.Recall(pb.RecallRequest(tenant=T, query="the same note"))
        assert [r.memory.id for r in recalled.results] == [mid]
        assert len([e async for e in stub.Export(pb.ExportRequest(tenant=T))]) == 1


@pytest.mark.parametrize("engine", list(ENGINES))
async def test_texts_without_words_repeat_only_when_they_are_the_same(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock, engine: str,
) -> None:
    async with serving(tmp_path, embedder, clock, engine) as stub:
        ids = [(await stub.Store(pb.StoreRequest(tenant=T, content=c))).memory.id
               for c in ("👍", "👎", "✅", "❌", "😀😀😀", "😀😀😀")]
        # The model embeds every emoji as one unknown token: only the same text is a repeat.
        assert len(set(ids[:5])) == 5 and ids[5] == ids[4]


async def test_an_import_names_the_record_a_bad_field_is_in(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock,
) -> None:
    async with serving(tmp_path, embedder, clock, "edge") as stub:
        good = _exported_with([])
        bad = pb.ExportedMemory(memory=pb.Memory(id="5a8f3c1e-2b4d-4e6f-8a9b-0c1d2e3f4a5b",
                                                 content="x", zone=99))
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Import(iter([good, bad]))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (err.value.details() or "").startswith("memories[1].memory.zone:")
