"""The memory service's gRPC stub, spoken over Connect JSON instead: the same calls
(``await stub.Store(request, metadata=..., timeout=...)``, server streams iterated, client streams
given an iterable), carried as curl would carry them (unary: a JSON body; streams: Connect's
JSON envelopes), with a Connect error raised as the ``grpc.aio.AioRpcError`` the gRPC stub raises
(code, message and the status details rebuilt from the Connect error's details). A suite written
against the stub then runs unchanged over either transport.

It is written from the Connect protocol's specification with httpx, not with the Connect library
the server uses, so the two sides do not share a misreading."""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from typing import Any

import grpc
import httpx
from celestial_client.v1 import memory_pb2
from google.protobuf import any_pb2, json_format
from google.protobuf.message import Message
from google.rpc import status_pb2

SERVICE = memory_pb2.DESCRIPTOR.services_by_name["MemoryService"]
END_STREAM = 0x02


def grpc_code(connect_code: str) -> grpc.StatusCode:
    # Connect's codes are gRPC's names in snake case, except that Connect spells "canceled".
    name = "CANCELLED" if connect_code == "canceled" else connect_code.upper()
    return grpc.StatusCode[name]


def _unpadded(value: str) -> bytes:
    return base64.b64decode(value + "=" * (-len(value) % 4))


def rpc_error(error: dict[str, Any], headers: Iterable[tuple[str, str]] = ()) -> grpc.aio.AioRpcError:
    """A Connect error (its JSON) as the gRPC stub would have raised it."""
    code = grpc_code(error.get("code", "unknown"))
    message = error.get("message", "")
    status = status_pb2.Status(code=code.value[0], message=message, details=[
        any_pb2.Any(type_url=f"type.googleapis.com/{d['type']}", value=_unpadded(d["value"]))
        for d in error.get("details", [])])
    trailing = grpc.aio.Metadata(*headers, ("grpc-status-details-bin", status.SerializeToString()))
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), trailing, details=message)


def _headers(metadata: Any, timeout: float | None, content_type: str) -> dict[str, str]:
    headers = {"content-type": content_type, "connect-protocol-version": "1"}
    for key, value in metadata or ():
        headers[key] = value
    if timeout is not None:
        headers["connect-timeout-ms"] = str(max(1, int(timeout * 1000)))
    return headers


def _envelope(message: Message, flags: int = 0) -> bytes:
    data = json_format.MessageToJson(message).encode()
    return struct.pack(">BI", flags, len(data)) + data


async def _envelopes(response: httpx.Response) -> AsyncIterator[tuple[int, bytes]]:
    buffer = b""
    async for chunk in response.aiter_bytes():
        buffer += chunk
        while len(buffer) >= 5:
            flags, size = struct.unpack(">BI", buffer[:5])
            if len(buffer) < 5 + size:
                break
            yield flags, buffer[5:5 + size]
            buffer = buffer[5 + size:]
    if buffer:
        raise AssertionError(f"a stream ended inside an envelope: {buffer[:80]!r}")


class ConnectStub:
    """``pb_grpc.MemoryServiceStub``'s methods, over Connect JSON on ``client``'s base URL."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._http = client
        for method in SERVICE.methods:
            setattr(self, method.name, self._method(method))

    def _method(self, method: Any) -> Any:
        path = f"/{SERVICE.full_name}/{method.name}"
        output = method.output_type._concrete_class
        if method.server_streaming:
            def server_stream(request: Message, metadata: Any = None,
                              timeout: float | None = None) -> AsyncIterator[Any]:
                return self._stream(path, output, [request], metadata, timeout)
            return server_stream
        if method.client_streaming:
            async def client_stream(requests: Iterable[Message] | AsyncIterable[Message],
                                    metadata: Any = None, timeout: float | None = None) -> Any:
                items = ([r async for r in requests] if isinstance(requests, AsyncIterable)
                         else list(requests))
                got = [m async for m in self._stream(path, output, items, metadata, timeout)]
                assert len(got) == 1, f"{method.name} answered {len(got)} messages"
                return got[0]
            return client_stream

        async def unary(request: Message, metadata: Any = None, timeout: float | None = None) -> Any:
            reply = await self._http.post(path, content=json_format.MessageToJson(request),
                                          headers=_headers(metadata, timeout, "application/json"))
            if reply.status_code != 200:
                raise rpc_error(reply.json(), _trailers(reply))
            return json_format.Parse(reply.text, output())
        return unary

    async def _stream(self, path: str, output: type[Message], requests: list[Message],
                      metadata: Any, timeout: float | None) -> AsyncIterator[Any]:
        body = b"".join(_envelope(r) for r in requests)
        async with self._http.stream("POST", path, content=body, headers=_headers(
                metadata, timeout, "application/connect+json")) as reply:
            if reply.status_code != 200:  # refused before the stream began
                await reply.aread()
                raise rpc_error(reply.json(), _trailers(reply))
            async for flags, data in _envelopes(reply):
                if flags & END_STREAM:
                    end = json.loads(data)
                    if "error" in end:
                        raise rpc_error(end["error"], [
                            (k.lower(), v) for k, vs in end.get("metadata", {}).items() for v in vs])
                    return
                yield json_format.Parse(data, output())
            raise AssertionError(f"{path}: the stream ended without its end message")


def _trailers(reply: httpx.Response) -> list[tuple[str, str]]:
    # A unary call's trailers travel as headers named trailer-...; other headers stand as they are.
    return [(k.removeprefix("trailer-"), v) for k, v in reply.headers.multi_items()
            if k not in ("content-type", "content-length", "date", "connection")]
