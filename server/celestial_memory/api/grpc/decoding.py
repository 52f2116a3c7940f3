"""Undecodable request bytes answer INVALID_ARGUMENT with one log line.

Left to grpc, a message that does not parse fails inside the server's deserializer: UNKNOWN for a
unary call, INTERNAL for a stream, and a long traceback in the log each time. This interceptor
wraps each method's deserializer, of every service the server holds (health and reflection too),
so that bytes that do not parse become a marker, and the method answers INVALID_ARGUMENT when it
meets one (for a stream, at the item that does not parse).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from celestial_memory.api.grpc.status import abort
from celestial_memory.api.grpc.wrapping import WrappedHandlers
from celestial_memory.errors import InvalidArgument
from google.protobuf.message import DecodeError

log = logging.getLogger(__name__)


class _Undecodable:
    """What an undecodable message deserializes to."""


UNDECODABLE = _Undecodable()


def _safe(deserialize: Callable[[bytes], Any] | None, method: str) -> Callable[[bytes], Any] | None:
    if deserialize is None:
        return None

    def parse(data: bytes) -> Any:
        try:
            return deserialize(data)
        except (DecodeError, ValueError, TypeError):
            log.warning("undecodable request to %s (%d bytes)", method, len(data))
            return UNDECODABLE

    return parse


class _Refused(InvalidArgument):
    """Raised into a method at the stream item that does not parse."""

    def __init__(self) -> None:
        super().__init__("request", "is not a valid protobuf message for this method")


class DecodeGuard(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    def __init__(self) -> None:
        self._wrapped = WrappedHandlers()

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any]:
        handler = await continuation(details)
        if handler is None:
            return handler
        return self._wrapped.get(details.method, handler, _guarded)  # type: ignore[no-any-return]


def _guarded(method: str, handler: Any) -> Any:
    """``handler`` with its deserializer and behaviour guarded (the module docstring)."""
    fields: dict[str, Any] = {
        "request_deserializer": _safe(handler.request_deserializer, method)}
    if handler.unary_unary is not None:
        fields["unary_unary"] = _unary(handler.unary_unary)
    elif handler.unary_stream is not None:
        fields["unary_stream"] = _unary_stream(handler.unary_stream)
    elif handler.stream_unary is not None:
        fields["stream_unary"] = _stream_unary(handler.stream_unary)
    elif handler.stream_stream is not None:  # reflection
        fields["stream_stream"] = _stream_stream(handler.stream_stream)
    return handler._replace(**fields)


def _unary(behavior: Callable[..., Any]) -> Callable[..., Any]:
    async def call(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        if request is UNDECODABLE:
            await abort(context, _Refused())
        return await behavior(request, context)

    return call


def _unary_stream(behavior: Callable[..., Any]) -> Callable[..., Any]:
    if not inspect.isasyncgenfunction(behavior):  # a coroutine writing to the context
        return _unary(behavior)

    async def call(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        if request is UNDECODABLE:
            await abort(context, _Refused())
        async for item in behavior(request, context):
            yield item

    return call


async def _checked(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
    async for r in requests:
        if r is UNDECODABLE:
            raise _Refused()
        yield r


def _stream_unary(behavior: Callable[..., Any]) -> Callable[..., Any]:
    async def call(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        try:
            return await behavior(_checked(requests), context)
        except _Refused as exc:  # a method without the service's error mapping let it through
            await abort(context, exc)

    return call


def _stream_stream(behavior: Callable[..., Any]) -> Callable[..., Any]:
    if not inspect.isasyncgenfunction(behavior):  # a coroutine writing to the context
        return _stream_unary(behavior)

    async def call(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        try:
            async for item in behavior(_checked(requests), context):
                yield item
        except _Refused as exc:  # what came before the item is answered; then the refusal
            await abort(context, exc)

    return call
