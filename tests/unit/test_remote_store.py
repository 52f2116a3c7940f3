"""The remote backend's retries, circuit breaker and schema check on start."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from celestial_memory.errors import SchemaMismatch, StoreUnavailable
from celestial_memory.store import open_qdrant, qdrant_engine
from celestial_memory.store.breaker import CircuitBreaker
from celestial_memory.store.retry import Retrying
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import UnexpectedResponse

from tests.conftest import QDRANT_TEST_KEY


class Status(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code


class Flaky:
    """Fails with the given errors, then answers; records every call's arguments."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls: list[tuple[Any, ...]] = []

    def upsert(self, *args: Any) -> str:
        self.calls.append(args)
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def http(status: int) -> UnexpectedResponse:
    return UnexpectedResponse(status, "x", b"", None)  # type: ignore[arg-type]


@pytest.mark.parametrize("error", [
    Status(grpc.StatusCode.UNAVAILABLE), Status(grpc.StatusCode.RESOURCE_EXHAUSTED),
    http(503), http(429), ConnectionError("reset"),
])
def test_transient_failures_are_retried_with_the_same_request(error: Exception) -> None:
    client = Flaky(error, error)
    delays: list[float] = []
    assert Retrying(client, 5, 0.1, sleep=delays.append).upsert("c", ["same-id"]) == "ok"
    assert client.calls == [("c", ["same-id"])] * 3
    assert len(delays) == 2 and delays[0] <= 0.1 and 0.1 <= delays[1] <= 0.2  # doubling


@pytest.mark.parametrize("error", [Status(grpc.StatusCode.INVALID_ARGUMENT), http(400)])
def test_other_failures_are_not_retried(error: Exception) -> None:
    client = Flaky(error)
    with pytest.raises(type(error)):
        Retrying(client, 5, 0.1, sleep=lambda s: None).upsert("c")
    assert len(client.calls) == 1


def test_retries_give_up_after_the_limit_and_say_the_store_is_down() -> None:
    client = Flaky(*[Status(grpc.StatusCode.UNAVAILABLE)] * 10)
    with pytest.raises(StoreUnavailable, match="after 4 attempts") as err:
        Retrying(client, 3, 0.0, sleep=lambda s: None).upsert("c")
    assert isinstance(err.value.__cause__, grpc.RpcError)
    assert len(client.calls) == 4


def test_start_is_idempotent_and_keeps_what_is_there() -> None:
    client = QdrantClient(location=":memory:")
    open_qdrant(":memory:", 8, "c", client=client)
    open_qdrant(":memory:", 8, "c", client=client)  # a second replica starting
    assert client.get_collection("c").config.params.sparse_vectors is not None


def test_a_dimension_mismatch_is_refused_clearly() -> None:
    client = QdrantClient(location=":memory:")
    open_qdrant(":memory:", 8, "c", client=client)
    with pytest.raises(SchemaMismatch, match=r"'dense' is 8-d .*not 16-d cosine"):
        open_qdrant(":memory:", 16, "c", client=client)


def test_a_foreign_collection_is_refused_clearly() -> None:
    client = QdrantClient(location=":memory:")
    client.create_collection("c", vectors_config=models.VectorParams(
        size=8, distance=models.Distance.DOT))
    with pytest.raises(SchemaMismatch, match=r"no dense vector 'dense'.*no sparse vector"):
        open_qdrant(":memory:", 8, "c", client=client)


@pytest.mark.filterwarnings("ignore:Api key is used with an insecure connection")
@pytest.mark.filterwarnings("ignore:Failed to obtain server version")  # nothing listens there
@pytest.mark.parametrize(("url", "https", "tls"), [
    ("http://127.0.0.1:6333", True, False),  # the URL's scheme decides, even with an API key
    ("https://127.0.0.1:6333", False, True),
])
def test_tls_and_the_grpc_port_are_as_configured_with_a_url(
    url: str, https: bool, tls: bool
) -> None:
    remote = qdrant_engine._client(
        qdrant_engine.Connection(url=url, api_key=QDRANT_TEST_KEY, grpc_port=7001, https=https))._client
    assert (remote._https, remote._grpc_port, remote._port) == (tls, 7001, 6333)


@pytest.mark.filterwarnings("ignore:Failed to obtain server version")
def test_a_store_that_cannot_be_reached_is_one_clear_error() -> None:
    conn = qdrant_engine.Connection(url="http://127.0.0.1:1", grpc_port=1, retries=0,
                                    timeout_s=1)
    with pytest.raises(StoreUnavailable) as err:
        open_qdrant(conn, 8, "c")
    message = str(err.value)
    assert "http://127.0.0.1:1 (gRPC port 1)" in message and "\n" not in message


def test_the_breaker_fails_fast_while_open_and_lets_one_call_try_after_the_cooldown() -> None:
    now = [0.0]
    breaker = CircuitBreaker(failures=2, cooldown_s=1.0, clock=lambda: now[0])

    def down() -> None:
        raise StoreUnavailable("down")

    for _ in range(2):
        with pytest.raises(StoreUnavailable, match=r"^down$"):
            breaker.call(down)
    assert breaker.is_open
    ran: list[int] = []
    with pytest.raises(StoreUnavailable, match="circuit open") as fast:
        breaker.call(ran.append, 1)
    assert ran == [] and 0 < fast.value.retry_after_s <= 1.0
    now[0] = 1.5  # half-open: one call goes through; it fails, so the circuit opens again
    with pytest.raises(StoreUnavailable, match=r"^down$"):
        breaker.call(down)
    with pytest.raises(StoreUnavailable, match="circuit open"):
        breaker.call(ran.append, 2)
    now[0] = 3.0  # the store is back: the next call closes the circuit
    breaker.call(ran.append, 3)
    breaker.call(ran.append, 4)
    assert ran == [3, 4] and not breaker.is_open


def test_a_request_the_store_rejects_does_not_open_the_breaker() -> None:
    breaker = CircuitBreaker(failures=1, cooldown_s=10.0)

    def bad_request() -> None:
        raise ValueError("bad filter")

    for _ in range(3):
        with pytest.raises(ValueError):
            breaker.call(bad_request)
    assert not breaker.is_open


@pytest.mark.parametrize("code", [grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNKNOWN])
def test_a_timeout_or_an_unreadable_answer_means_the_store_is_down_without_retries(
    code: grpc.StatusCode,
) -> None:
    client = Flaky(Status(code))
    with pytest.raises(StoreUnavailable, match=code.name):
        Retrying(client, 3, 0.0, sleep=lambda s: None).upsert("c")
    assert len(client.calls) == 1
