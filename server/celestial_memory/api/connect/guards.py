"""What the HTTP port's server does not bound or say by itself, each a small ASGI or protocol
layer around the Connect application (server.py puts them together): how long a request head
and a request body may take to arrive, which content types are another port's, the access log
line of a call refused before it reached a method, and a body for the bare refusals."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from typing import Any

from celestial_memory.api.connect.context import client_framing
from celestial_memory.api.connect.transport import REACHED, SERVICE
from celestial_memory.api.grpc.observer import refused_before_interceptors, request_id_of
from starlette.responses import JSONResponse
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

HEAD_TIMEOUT_S = 10.0  # to send a whole request head, from connecting or from the last answer
BODY_TIMEOUT_S = 30.0  # to send a whole unary request's body, from its head
SEND_BUFFER_BYTES = 128 * 1024  # what the kernel holds of a connection's unread answers
FULL = json.dumps({"code": "unavailable", "message": "too many connections from this address "
                   "or in all (CELESTIAL_HTTP_MAX_CONNECTIONS, ..._PER_ADDRESS); retry later"})
REFUSED = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
           b"connection: close\r\nretry-after: 1\r\ncontent-length: "
           + str(len(FULL)).encode() + b"\r\n\r\n" + FULL.encode())


class Admission:
    """How many connections the port holds at once, in all and from one address. uvicorn's own
    bound counts connections too, but refuses every caller alike once they are full, so a few
    hundred idle connections from one client turned everyone away; here one address fills only
    its own share. Calls in progress are bounded apart from this, as on the gRPC port
    (api/grpc/call_limit.py)."""

    def __init__(self, total: int, per_address: int) -> None:
        self.total, self.per_address = total, per_address
        self._open: dict[str, int] = {}
        self._count = 0
        self._warned = 0.0

    def admit(self, address: str) -> bool:
        if self._count >= self.total or self._open.get(address, 0) >= self.per_address:
            now = time.monotonic()
            if now - self._warned > 10:  # one line for a flood, not one a connection
                self._warned = now
                log.warning("HTTP port: refusing connections from %s (%d open from it, %d in "
                            "all; bounds %d and %d)", address, self._open.get(address, 0),
                            self._count, self.per_address, self.total)
            return False
        self._open[address] = self._open.get(address, 0) + 1
        self._count += 1
        return True

    def release(self, address: str) -> None:
        self._count -= 1
        left = self._open[address] - 1
        if left:
            self._open[address] = left
        else:
            del self._open[address]


class HeadBounded(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, with a bound on reading a request head: a connection that
    has not sent a whole one within ``HEAD_TIMEOUT_S`` of connecting, or of its last answer, is
    closed. uvicorn times out only idle keep-alive connections, and any byte restarts that, so a
    few hundred connections trickling half a request line held every slot (slowloris). A
    connection over the ``admission`` bounds (set on a subclass per server) is answered 503 and
    closed at once."""

    admission: Admission | None = None
    _head_timer: asyncio.TimerHandle | None = None
    _admitted: str | None = None  # the address it was counted under
    _refused = False  # over the bounds: what it sends is dropped until it is closed

    def data_received(self, data: bytes) -> None:
        if not self._refused:
            super().data_received(data)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            # A fixed send buffer: left to grow, the kernel took megabytes of a stream its
            # client never read (an Export), all of it converted to JSON by the server first.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
        if self.admission is not None:
            address = self.client[0] if self.client else ""
            if not self.admission.admit(address):
                # Answered, then closed a moment later: closing a socket with the caller's
                # request still unread resets it, and the caller never reads the answer.
                self._refused = True
                transport.write(REFUSED)
                if transport.can_write_eof():
                    transport.write_eof()
                self.loop.call_later(1.0, transport.close)
                return
            self._admitted = address
        self._arm_head_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        if self._admitted is not None and self.admission is not None:
            self.admission.release(self._admitted)
            self._admitted = None
        super().connection_lost(exc)

    def _arm_head_timer(self) -> None:
        if self.transport.is_closing():
            return
        if self._head_timer is not None:
            self._head_timer.cancel()
        self._head_timer = self.loop.call_later(HEAD_TIMEOUT_S, self._head_expired)

    def _head_expired(self) -> None:
        waiting = self.cycle is None or self.cycle.response_complete  # no request under way
        if waiting and not self.transport.is_closing():
            self.transport.close()


class ContentTypes:
    """Refuses gRPC's own content types with 415 before Connect sees them: they need HTTP/2
    trailers, which this port cannot send (uvicorn logged a traceback for each). gRPC is the
    gRPC port's; Connect and gRPC-Web content types go through."""

    def __init__(self, app: Any) -> None:
        self._app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            kind = dict(scope["headers"]).get(b"content-type", b"").split(b";")[0].strip()
            if kind == b"application/grpc" or kind.startswith(b"application/grpc+"):
                await JSONResponse({"code": "invalid_argument", "message": "gRPC is served on "
                                    "the gRPC port (CELESTIAL_ADDRESS); send Content-Type: "
                                    "application/json here"},
                                   status_code=415)(scope, receive, send)
                return
        await self._app(scope, receive, send)


EXPLAINED = {404, 405, 415}
CALL = "POST with Content-Type: application/json"


class Explained:
    """Gives the bare refusals a body: a path nothing serves (404), a method other than the
    path's (405), a content type Connect does not read (415) come from the Connect library
    empty and from Starlette as plain text, so ``curl`` showed nothing to act on. Each becomes
    a Connect error (``{"code", "message"}``, as every other error of the port) naming what to
    send instead; the status and its headers (``allow``, ``accept-post``) stay."""

    def __init__(self, app: Any) -> None:
        self._app = app
        self._prefix = f"/{SERVICE.full_name}/"

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] == "HEAD":  # a HEAD answer has no body
            await self._app(scope, receive, send)
            return
        held: list[Any] = []  # the refusal's start, until its body is known to be replaced

        async def explaining(message: Any) -> None:
            if message["type"] == "http.response.start" and message["status"] in EXPLAINED:
                kind = dict(message.get("headers", [])).get(b"content-type", b"")
                if not kind.startswith(b"application/json"):
                    held.append(message)
                    return
            elif held and message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return  # the plain text is dropped, to its last part
                start = held.pop()
                body = json.dumps(self._error(scope, start)).encode()
                headers = [(k, v) for k, v in start.get("headers", [])
                           if k.lower() not in (b"content-type", b"content-length")]
                await send({**start, "headers": [
                    *headers, (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body, "more_body": False})
                return
            await send(message)

        await self._app(scope, receive, explaining)

    def _error(self, scope: Any, start: Any) -> dict[str, str]:
        path, status = scope["path"], start["status"]
        shown = repr(path[:100])  # quoted and escaped: a path may hold anything
        if status == 415:
            kind = dict(scope["headers"]).get(b"content-type", b"").decode("latin-1")
            got = f"got {kind[:100]!r}" if kind else "none was sent"
            return {"code": "invalid_argument", "message": (
                f"send Content-Type: application/json (or application/proto; "
                f"application/connect+json for a streaming method); {got}")}
        if status == 405:
            allow = dict(start.get("headers", [])).get(b"allow", b"").decode("latin-1")
            if path.startswith(self._prefix):
                return {"code": "invalid_argument",
                        "message": f"a method takes {CALL}, not {scope['method']}"}
            return {"code": "invalid_argument",
                    "message": f"{shown} answers {allow or 'other methods'}, not "
                               f"{scope['method']}"}
        if path.startswith(self._prefix):
            name = repr(path.removeprefix(self._prefix)[:100])
            return {"code": "unimplemented", "message": (
                f"no method {name} in {SERVICE.full_name}: {CALL} to "
                f"{self._prefix}<Method> (e.g. {self._prefix}Recall)")}
        return {"code": "not_found", "message": (
            f"nothing at {shown}: the service's methods take {CALL} at "
            f"{self._prefix}<Method> (e.g. {self._prefix}Recall); the explorer is at "
            f"/explorer/")}


class Unreached:
    """The access log line and metrics of a call refused before it reached a method (and so
    the interceptors, which log and count every call that does): a body Connect could not read,
    a wrong content type, an unknown method, a body too slow. The gRPC port logs its own such
    refusals through the same interceptors (its decode guard), so both ports leave one line per
    call."""

    def __init__(self, app: Any) -> None:
        self._app = app
        self._prefix = f"/{SERVICE.full_name}/"

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self._app(scope, receive, send)
            return
        box, started = [False], time.perf_counter()
        status, body = [0], bytearray()  # of the answer; the body's start, unless a method ran

        async def watched(message: Any) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            elif message["type"] == "http.response.body" and not box[0] and len(body) < 4096:
                body.extend(message.get("body", b""))
            await send(message)

        token = REACHED.set(box)
        try:
            await self._app(scope, receive, watched)
        finally:
            REACHED.reset(token)
            if not box[0]:
                self._log(scope, status[0], bytes(body), time.perf_counter() - started)

    def _log(self, scope: Any, status: int, body: bytes, seconds: float) -> None:
        path = scope["path"]
        method = SERVICE.methods_by_name.get(path.removeprefix(self._prefix)) \
            if path.startswith(self._prefix) else None
        code = _code(status, body)
        kind = "unary" if method is None else (
            "client_stream" if method.client_streaming else
            "server_stream" if method.server_streaming else "unary")
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        refused_before_interceptors(kind, SERVICE.full_name, None if method is None else method.name,
                                    code, seconds, request_id_of(headers))


def _code(status: int, body: bytes) -> str:
    """The Connect code of an answer, as gRPC names it: a unary error's JSON body, or a stream's
    end message (flags 0x02, a 4-byte length, JSON); failing both, the HTTP status."""
    try:
        if status == 200 and body[:1] and body[0] & 0x02:
            end = json.loads(body[5:5 + int.from_bytes(body[1:5], "big")])
            error = end.get("error", {"code": "ok"})
        else:
            error = json.loads(body)
        code, message = str(error["code"]), str(error.get("message", ""))
    except (ValueError, KeyError, TypeError, IndexError, AttributeError):
        return f"HTTP_{status}"
    if client_framing(code, message):
        return "INVALID_ARGUMENT"
    return code.upper().replace("CANCELED", "CANCELLED")


class BodyBounded:
    """A bound on reading a request's body, which uvicorn does not have: once the head is in, a
    connection trickling its body would hold its slot for as long as it liked (slowloris with a
    body). A unary body must arrive whole within ``BODY_TIMEOUT_S``; a client stream, which may
    legitimately last, must not pause longer than ``stream_idle_s`` (the servicer's own bound on
    a stream that sends nothing, ``CELESTIAL_STREAM_IDLE_S``). Past that the caller gets
    408 with a Connect error and the connection is closed; the application sees a disconnect
    (the Connect layer then ends the call as cancelled, before any servicer saw a unary one)."""

    def __init__(self, app: Any, stream_idle_s: float) -> None:
        self._app, self._stream_idle_s = app, stream_idle_s

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self._app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        kind = dict(scope["headers"]).get(b"content-type", b"")
        streaming = kind.startswith(b"application/connect+")
        deadline = None if streaming else loop.time() + BODY_TIMEOUT_S
        state = {"body_done": False, "started": False, "refused": False}

        async def bounded_receive() -> Any:
            if state["body_done"] or state["refused"]:
                return await receive()  # only a disconnect is left to wait for
            # A stream's pause is bounded by the servicer first (a Connect error in the stream's
            # own answer); this is the backstop, a little later.
            wait = self._stream_idle_s + 5 if deadline is None else deadline - loop.time()
            try:
                async with asyncio.timeout(max(wait, 0.0)):
                    message = await receive()
            except TimeoutError:
                await refuse()
                return {"type": "http.disconnect"}
            if message["type"] == "http.request" and not message.get("more_body", False):
                state["body_done"] = True
            return message

        async def refuse() -> None:
            state["refused"] = True
            if state["started"]:
                return  # an answer is under way; the disconnect ends it
            limit = f"{self._stream_idle_s:g} s without a byte" if streaming else \
                f"whole within {BODY_TIMEOUT_S:.0f} s"
            body = json.dumps({"code": "deadline_exceeded",
                               "message": f"the request body must arrive {limit}"}).encode()
            await send({"type": "http.response.start", "status": 408, "headers": [
                (b"content-type", b"application/json"), (b"connection", b"close"),
                (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body, "more_body": False})

        async def guarded_send(message: Any) -> None:
            if state["refused"] and not state["started"]:
                return  # the 408 was the answer; what the application says after it is dropped
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        await self._app(scope, bounded_receive, guarded_send)
