"""The Python client's connection options and typed calls: retries on UNAVAILABLE with one
request_id, credentials per call, per-call deadlines, error details, paging and typed
export/import."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest
from celestial_client import (
    AlreadyExistsError,
    CelestialClient,
    DeadlineExceededError,
    ExportedMemory,
    InvalidArgumentError,
    RetryPolicy,
    UnavailableError,
)
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from celestial_memory.api.grpc.server import MemoryServer


class Flaky(pb_grpc.MemoryServiceServicer):
    """Answers UNAVAILABLE to the first ``failures`` Stores, and records what each attempt
    carried; Stats sleeps ``stall`` seconds."""

    def __init__(self, failures: int, stall: float = 0.0) -> None:
        self.failures, self.stall = failures, stall
        self.attempts: list[tuple[str, str]] = []  # (request_id, authorization)

    def Store(self, request: pb.StoreRequest, context: grpc.ServicerContext) -> pb.StoreResponse:
        auth = dict(context.invocation_metadata()).get("authorization", "")
        self.attempts.append((request.request_id, str(auth)))
        if len(self.attempts) <= self.failures:
            context.abort(grpc.StatusCode.UNAVAILABLE, "the store is down")
        return pb.StoreResponse(memory=pb.Memory(id="m", content=request.content,
                                                 zone=pb.ZONE_OUTER), created=True)

    def Stats(self, request: pb.StatsRequest, context: grpc.ServicerContext) -> pb.StatsResponse:
        time.sleep(self.stall)
        return pb.StatsResponse()


@pytest.fixture
def flaky() -> Iterator[tuple[Flaky, str]]:
    servicer = Flaky(failures=2, stall=1.0)
    server = grpc.server(futures.ThreadPoolExecutor(4))
    pb_grpc.add_MemoryServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, f"127.0.0.1:{port}"
    server.stop(None)


def test_unavailable_is_retried_with_the_same_request_id(flaky: tuple[Flaky, str]) -> None:
    servicer, target = flaky
    keys = iter(["k1", "k2", "k3"])
    with CelestialClient(target, api_key=lambda: next(keys),
                         retry=RetryPolicy(initial_backoff_s=0.01)) as client:
        assert client.store("retry me").content == "retry me"
    ids = {rid for rid, _ in servicer.attempts}
    assert len(servicer.attempts) == 3 and len(ids) == 1 and ids != {""}
    # gRPC resends the same request; the key is read once per call.
    assert {auth for _, auth in servicer.attempts} == {"Bearer k1"}


def test_without_retries_unavailable_reaches_the_caller(flaky: tuple[Flaky, str]) -> None:
    servicer, target = flaky
    with CelestialClient(target, retry=None) as client, pytest.raises(UnavailableError):
        client.store("once")
    assert len(servicer.attempts) == 1


def test_per_call_deadlines_and_metadata(flaky: tuple[Flaky, str]) -> None:
    _, target = flaky
    with CelestialClient(target, timeout=5, metadata=[("x-team", "a")]) as client:
        client.stats()  # within 5 s
        quick = client.with_options(timeout=0.2)
        with pytest.raises(DeadlineExceededError):
            quick.stats()
        assert client.timeout == 5 and quick.timeout == 0.2
        assert quick._metadata() == (("x-team", "a"),)


async def test_typed_calls_against_the_service(server: MemoryServer) -> None:
    def run() -> None:
        target = f"127.0.0.1:{server.port}"
        with CelestialClient(target, tenant="py") as client:
            m = client.store("the boat is blue", request_id="boat", tags=["t"])
            assert client.store("the boat is blue", request_id="boat").id == m.id  # a retry
            with pytest.raises(AlreadyExistsError) as err:
                client.store("the boat is red", request_id="boat")
            assert err.value.field == "request_id" and err.value.reason == "ALREADY_EXISTS"
            with pytest.raises(InvalidArgumentError) as bad:
                client.store("   ")
            assert bad.value.field == "content" and bad.value.reason == "INVALID_ARGUMENT"
            ids = client.store_batch([f"note {i}" for i in range(30)])
            listed = [x.id for x in client.iter_memories(page_size=7)]
            assert sorted(listed) == sorted([*ids, m.id]) and len(listed) == 31
            assert len(client.recent(limit=12)) == 12
            page = client.list_page(page_size=5, tags_any=["t"])
            assert [x.id for x in page.items] == [m.id] and page.next_page_token == ""
            client.rebalance(dry_run=True)
            assert [e.method for e in client.ledger_page().admin_events] == ["Rebalance"]
            records = list(client.export())
            assert all(isinstance(r, ExportedMemory) for r in records) and len(records) == 31
            assert records[0].written_at.year >= 2023 and len(records[0].vector) == 384
            again = client.import_memories(records)
            assert (again.imported, again.skipped) == (0, 31)

    await asyncio.to_thread(run)
