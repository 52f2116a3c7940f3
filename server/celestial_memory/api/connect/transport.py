"""The memory service over Connect: each method is the gRPC servicer's own, behind the gRPC
server's own interceptors (api/grpc/), so both transports share one contract implementation,
one status table, the same keys and roles, the same call and stream limits, the same metrics
series and access log line.

grpc.aio asks each interceptor, outermost first, to wrap the method's handler; ``build`` does
the same once per method and keeps the result. A Connect call then runs the wrapped handler with
the call seen as a gRPC context (``context.py``); an ``abort`` anywhere along the way becomes
the ``ConnectError`` the protocol sends.
"""

from __future__ import annotations

import contextvars
import keyword
import re
from collections.abc import AsyncIterator, Callable, Sequence
from types import SimpleNamespace
from typing import Any, TypeVar, cast

import grpc
from celestial_client.v1 import memory_pb2
from celestial_client.v1.memory_connect import MemoryService, MemoryServiceASGIApplication
from celestial_memory.api.connect.context import Aborted, ConnectCall
from celestial_memory.api.connect.conversion import DEFERRED, Converter, Deferred, Encoded
from celestial_memory.api.connect.json_worker import to_json
from celestial_memory.api.grpc.wrapping import Handler
from connectrpc.compat import google_protobuf_binary_codec
from connectrpc.errors import ConnectError
from connectrpc.request import RequestContext
from google.protobuf import json_format
from google.protobuf.message import Message

SERVICE = memory_pb2.DESCRIPTOR.services_by_name["MemoryService"]
# Set by the HTTP server around each request (server.py): whether the request reached a method,
# and so the interceptors, which log and count it; one that did not is logged there instead.
REACHED: contextvars.ContextVar[list[bool]] = contextvars.ContextVar("reached")
M = TypeVar("M", bound=Message)
_OBJECT = re.compile(rb"[ \t\r\n]*\{")  # JSON's own white space, then an object


class _Details(grpc.HandlerCallDetails):
    def __init__(self, method: str) -> None:
        self.method = method
        self.invocation_metadata = ()


def snake(name: str) -> str:
    """A method's name as the generated Connect service spells it (``DeleteByFilter`` ->
    ``delete_by_filter``, ``Import`` -> ``import_``)."""
    out = re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
    return out + "_" if keyword.iskeyword(out) else out  # Import -> import_


def _base(servicer: Any, method: Any) -> Handler:
    behavior = getattr(servicer, method.name)
    if method.client_streaming:
        return grpc.stream_unary_rpc_method_handler(behavior)
    if method.server_streaming:
        return grpc.unary_stream_rpc_method_handler(behavior)
    return grpc.unary_unary_rpc_method_handler(behavior)


async def _wrapped(interceptors: Sequence[grpc.aio.ServerInterceptor],  # type: ignore[type-arg]
                   base: Handler, path: str) -> Handler:
    async def at(i: int, details: grpc.HandlerCallDetails) -> Handler:
        if i == len(interceptors):
            return base
        return await interceptors[i].intercept_service(lambda d: at(i + 1, d), details)

    return await at(0, _Details(path))


async def build(servicer: Any,
                interceptors: Sequence[grpc.aio.ServerInterceptor],  # type: ignore[type-arg]
                read_max_bytes: int, converter: Converter) -> MemoryServiceASGIApplication:
    """The Connect application of the memory service: every method of the contract, each the
    servicer's behind ``interceptors`` (the gRPC server's, in its order), with large JSON
    converted by ``converter`` (conversion.py)."""
    functions: dict[str, Callable[..., Any]] = {}
    for method in SERVICE.methods:
        handler = await _wrapped(interceptors, _base(servicer, method),
                                 f"/{SERVICE.full_name}/{method.name}")
        functions[snake(method.name)] = _endpoint(method, handler, converter)
    service = cast(MemoryService, SimpleNamespace(**functions))
    codecs = [google_protobuf_binary_codec(), StrictJSON(converter)]
    return MemoryServiceASGIApplication(service, read_max_bytes=read_max_bytes, codecs=codecs)


class Deferring:
    """Gives each request its own ``Deferred`` (conversion.py), where the JSON codec leaves the
    requests it does not convert on the loop."""

    def __init__(self, app: Any) -> None:
        self._app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        token = DEFERRED.set(Deferred())
        try:
            await self._app(scope, receive, send)
        finally:
            DEFERRED.reset(token)


class StrictJSON:
    """Connect's JSON codec, strict where a caller's mistake would otherwise pass or puzzle:
    JSON that names a field the contract does not have is refused, not silently dropped (a
    misspelt field would do nothing without a word), and a body that is not a JSON object
    (``null``, a list, a number) is told so, instead of a Python type error."""

    def __init__(self, converter: Converter) -> None:
        self._converter = converter

    def name(self) -> str:
        return "json"

    def encode(self, message: Message | Encoded) -> bytes:
        if isinstance(message, Encoded):  # printed off the loop (conversion.py)
            return message.data
        # Every field, zero ones too: a count of 0 or a phase 0 is part of the answer, and a
        # script should not need the contract to know that a missing field means 0.
        return to_json(message)

    def decode(self, data: bytes | bytearray, message_class: type[M]) -> M:
        if not _OBJECT.match(data):
            raise ValueError("a request is one JSON object, {...}, with the fields of "
                             f"{message_class.DESCRIPTOR.full_name}")
        message = message_class()
        deferred = DEFERRED.get()
        if not self._converter.inline_request(data) and deferred is not None:
            deferred.hold(message, bytes(data))  # converted by the transport, off the loop
            return message
        json_format.Parse(bytes(data), message, ignore_unknown_fields=False)
        return message


def _endpoint(method: Any, handler: Handler, converter: Converter) -> Callable[..., Any]:
    if method.server_streaming:
        stream: Any = handler.unary_stream

        async def server_stream(request: Any, ctx: RequestContext[Any, Any]) -> AsyncIterator[Any]:
            request = await _converted(request, converter)  # a failure is refused unreached
            _reached()
            printing = _json(ctx)
            try:
                async for item in stream(request, ConnectCall(ctx)):
                    yield await converter.print(item) if printing else item
            except Aborted as stop:
                raise stop.error from None

        return server_stream
    behavior: Any = handler.stream_unary if method.client_streaming else handler.unary_unary
    client_streaming = bool(method.client_streaming)

    async def call(request: Any, ctx: RequestContext[Any, Any]) -> Any:
        if not client_streaming:
            request = await _converted(request, converter)
        _reached()
        seen = ConnectCall(ctx)
        try:
            answer = await behavior(_read(request, seen, converter) if client_streaming
                                    else request, seen)
        except Aborted as stop:
            raise stop.error from None
        return await converter.print(answer) if _json(ctx) else answer

    return call


def _json(ctx: RequestContext[Any, Any]) -> bool:
    """Whether the call speaks JSON (``application/json``, ``application/connect+json``)."""
    return "json" in ctx.request_headers.get("content-type", "")


async def _converted(message: Any, converter: Converter) -> Any:
    """A request the JSON codec left unconverted (conversion.py), converted; others as they
    are."""
    deferred = DEFERRED.get()
    data = deferred.take(message) if deferred is not None else None
    return message if data is None else await converter.parse(data, message)


def _reached() -> None:
    if (box := REACHED.get(None)) is not None:
        box[0] = True


async def _read(requests: AsyncIterator[Any], call: ConnectCall,
                converter: Converter) -> AsyncIterator[Any]:
    """A client stream's items, where an item Connect cannot read (a bad envelope, bad JSON,
    too large) ends the call with Connect's own error, as it would a unary call, instead of
    reaching the servicer as an unexpected exception (INTERNAL)."""
    try:
        async for item in requests:
            yield await _converted(item, converter)
    except ConnectError as exc:
        call.ended(exc)
        raise Aborted(exc) from None
