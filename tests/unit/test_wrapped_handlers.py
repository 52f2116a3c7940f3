"""Interceptors wrap a method's handler once (api/grpc/wrapping.py WrappedHandlers)."""

from __future__ import annotations

from typing import Any

import grpc
from celestial_memory.api.grpc.wrapping import WrappedHandlers


async def _behavior(request: Any, context: Any) -> Any:
    return request


def _handler() -> Any:
    return grpc.unary_unary_rpc_method_handler(_behavior)


def test_the_same_handler_is_wrapped_once_and_a_new_one_anew() -> None:
    cache, calls = WrappedHandlers(), []

    def wrap(method: str, handler: Any) -> Any:
        calls.append(method)
        return handler._replace(unary_unary=None)

    first = _handler()
    a = cache.get("/s/M", first, wrap)
    assert cache.get("/s/M", first, wrap) is a and calls == ["/s/M"]
    other = _handler()
    b = cache.get("/s/M", other, wrap)
    assert b is not a and calls == ["/s/M", "/s/M"]
    assert cache.get("/s/M", other, wrap) is b and len(calls) == 2
    assert cache.get("/s/N", first, wrap) is not a and calls[-1] == "/s/N"


def test_the_cache_is_bounded() -> None:
    cache = WrappedHandlers()
    h = _handler()
    for i in range(WrappedHandlers.LIMIT + 50):
        cache.get(f"/s/M{i}", h, lambda m, x: x._replace())
    assert len(cache._by_method) == WrappedHandlers.LIMIT
