"""Retries with exponential backoff for the remote Qdrant backend.

Only failures that say "try again" are retried: gRPC UNAVAILABLE and RESOURCE_EXHAUSTED, HTTP 429
and 503, and connection errors. When the retries run out on such a failure, or the store fails in
a way a retry would not mend quickly (a timeout: a stalled store would hold every retry for the
whole timeout; an answer that cannot be read; a 5xx), the store is taken as down:
``StoreUnavailable`` (UNAVAILABLE to callers), not the client library's own error. The circuit
breaker (``breaker.py``) counts those.

Every write the service sends is idempotent (ids are fixed before the first attempt, payload sets
and deletes name their points, ledger events have deterministic ids), so an attempt whose answer
was lost can be repeated safely.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any

import grpc
from celestial_memory.errors import StoreUnavailable
from celestial_memory.store.proxy import MethodProxy
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

log = logging.getLogger(__name__)

RETRYABLE_GRPC = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED}
RETRYABLE_HTTP = {429, 503}
# The store failed, not our request: a timeout, a broken or unreadable answer.
FAULT_GRPC = RETRYABLE_GRPC | {
    grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNKNOWN, grpc.StatusCode.DATA_LOSS,
}


def retryable(exc: BaseException) -> bool:
    if isinstance(exc, grpc.RpcError):
        return exc.code() in RETRYABLE_GRPC
    if isinstance(exc, UnexpectedResponse):
        return exc.status_code in RETRYABLE_HTTP
    return isinstance(exc, (ResponseHandlingException, ConnectionError, TimeoutError))


def store_fault(exc: BaseException) -> bool:
    """Whether ``exc`` says the store is unwell (retried or not), rather than that a request
    was wrong."""
    if isinstance(exc, grpc.RpcError):
        return exc.code() in FAULT_GRPC
    if isinstance(exc, UnexpectedResponse):
        return exc.status_code is not None and (
            exc.status_code in RETRYABLE_HTTP or exc.status_code >= 500)
    return retryable(exc)


def unavailable(exc: BaseException, attempts: int) -> StoreUnavailable:
    what = exc.code().name if isinstance(exc, grpc.RpcError) else type(exc).__name__
    tried = f" after {attempts} attempts" if attempts > 1 else ""
    return StoreUnavailable(f"Qdrant did not answer ({what}{tried})")


class Retrying(MethodProxy):
    """Wraps a client: each method call is retried on retryable failures, with exponential
    backoff and jitter (``backoff_s``, doubling, capped at 5 s), at most ``retries`` times."""

    def __init__(
        self, client: Any, retries: int, backoff_s: float,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(client)
        self._retries, self._backoff, self._sleep = retries, backoff_s, sleep

    def _call(self, name: str, target: Callable[..., Any], args: tuple[Any, ...],
              kwargs: dict[str, Any]) -> Any:
        for attempt in range(self._retries + 1):
            try:
                return target(*args, **kwargs)
            except Exception as exc:
                if not retryable(exc):
                    if store_fault(exc):
                        raise unavailable(exc, attempt + 1) from exc
                    raise
                if attempt == self._retries:
                    raise unavailable(exc, attempt + 1) from exc
                delay = min(5.0, self._backoff * 2**attempt) * random.uniform(0.5, 1.0)
                log.warning("qdrant %s failed (%s); retry %d in %.2f s",
                            name, type(exc).__name__, attempt + 1, delay)
                self._sleep(delay)
        raise AssertionError("unreachable")
