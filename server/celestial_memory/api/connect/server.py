"""The HTTP port (``CELESTIAL_HTTP_ADDRESS``, off unless set): the memory service over Connect,
that is JSON or binary protobuf over HTTP/1.1 (``curl``-able), with the same TLS settings as the
gRPC port, run by uvicorn on the gRPC server's own event loop.

Browsers on other origins are refused unless ``CELESTIAL_HTTP_CORS_ORIGINS`` names them (a
preflight from any other origin is answered 400); without API keys only this machine's host
names are served (DNS rebinding). Bodies are bounded by ``max_message_bytes`` (after
decompression), as messages are on the gRPC port; a request head must arrive whole within
``HEAD_TIMEOUT_S``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import ssl
from collections.abc import Iterator, Sequence
from importlib import resources
from typing import Any

import grpc
import uvicorn
from celestial_memory.api.connect.transport import build
from celestial_memory.config import Settings
from celestial_memory.errors import FailedPrecondition
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)
HEAD_TIMEOUT_S = 10.0  # to send a whole request head, from connecting or from the last answer
BODY_TIMEOUT_S = 30.0  # to send a whole unary request's body, from its head
STREAM_IDLE_S = 60.0  # that a client stream's body may pause between two pieces
# What a browser's Connect client sends and may read (connect-web's own lists).
CORS_REQUEST_HEADERS = ["content-type", "connect-protocol-version", "connect-timeout-ms",
                        "authorization", "x-api-key", "x-user-agent", "x-grpc-web",
                        "grpc-timeout", "x-request-id"]
CORS_RESPONSE_HEADERS = ["grpc-status", "grpc-message", "grpc-status-details-bin",
                         "x-request-id"]
# The explorer's files (api/explorer/): public, as they hold no memory; what the page shows comes
# through Connect calls that carry the caller's key. Its own scripts only, and never in a frame.
EXPLORER_FILES = {"index.html": "text/html; charset=utf-8",
                  "explorer.js": "text/javascript; charset=utf-8",
                  "explorer.css": "text/css; charset=utf-8"}
EXPLORER_HEADERS = {"content-security-policy": "default-src 'self'; frame-ancestors 'none'; "
                                               "base-uri 'none'; form-action 'none'",
                    "x-content-type-options": "nosniff", "referrer-policy": "no-referrer",
                    "cache-control": "no-cache"}


class _HeadBounded(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, with a bound on reading a request head: a connection that
    has not sent a whole one within ``HEAD_TIMEOUT_S`` of connecting, or of its last answer, is
    closed. uvicorn times out only idle keep-alive connections, and any byte restarts that, so a
    few hundred connections trickling half a request line held every slot (slowloris)."""

    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        super().connection_lost(exc)

    def _arm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        self._head_timer = self.loop.call_later(HEAD_TIMEOUT_S, self._head_expired)

    def _head_expired(self) -> None:
        waiting = self.cycle is None or self.cycle.response_complete  # no request under way
        if waiting and not self.transport.is_closing():
            self.transport.close()


class _ContentTypes:
    """Refuses gRPC's own content types with 415 before Connect sees them: they need HTTP/2
    trailers, which this port cannot send (uvicorn logged a traceback for each). gRPC is the
    gRPC port's; Connect and gRPC-Web content types go through."""

    def __init__(self, app: Any) -> None:
        self._app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            kind = dict(scope["headers"]).get(b"content-type", b"").split(b";")[0].strip()
            if kind == b"application/grpc" or kind.startswith(b"application/grpc+"):
                await PlainTextResponse("gRPC is served on the gRPC port (CELESTIAL_ADDRESS)",
                                        status_code=415)(scope, receive, send)
                return
        await self._app(scope, receive, send)


def _explorer_routes() -> list[Route]:
    folder = resources.files("celestial_memory.api.explorer")

    def serve(name: str, media_type: str) -> Route:
        async def endpoint(_: Request) -> Response:
            # Read on each request: a few small files, and a rebuilt bundle shows at once.
            return Response(folder.joinpath(name).read_bytes(), media_type=media_type,
                            headers=EXPLORER_HEADERS)
        path = "/explorer/" if name == "index.html" else f"/explorer/{name}"
        return Route(path, endpoint, methods=["GET", "HEAD"])

    async def to_page(request: Request) -> Response:
        query = request.url.query  # ?tenant=... and the rest go along
        return RedirectResponse("/explorer/" + (f"?{query}" if query else ""), status_code=308)

    return [Route("/explorer", to_page, methods=["GET", "HEAD"]),
            *(serve(name, kind) for name, kind in EXPLORER_FILES.items())]


class _BodyBounded:
    """A bound on reading a request's body, which uvicorn does not have: once the head is in, a
    connection trickling its body would hold its slot for as long as it liked (slowloris with a
    body). A unary body must arrive whole within ``BODY_TIMEOUT_S``; a client stream, which may
    legitimately last, must not pause longer than ``STREAM_IDLE_S``. Past that the caller gets
    408 with a Connect error and the connection is closed; the application sees a disconnect
    (the Connect layer then ends the call as cancelled, before any servicer saw a unary one)."""

    def __init__(self, app: Any) -> None:
        self._app = app

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
            wait = STREAM_IDLE_S if deadline is None else deadline - loop.time()
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
            limit = f"{STREAM_IDLE_S:.0f} s without a byte" if streaming else \
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


class _Embedded(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # the process's signals are the gRPC server's to handle (api/grpc/server.py)


def _listening(address: str) -> socket.socket:
    host, _, port = address.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto named: asyncio sets TCP_NODELAY only on sockets that say they are TCP, and without it
    # an answer written in two parts waited on the client's delayed ACK (40 ms a call).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    # As uvicorn's own bind does: a restart may bind while the last run's connections linger
    # in TIME-WAIT (SO_REUSEPORT, which would let two servers share the port, stays off).
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, int(port)))
    except (OSError, ValueError) as exc:
        sock.close()
        raise FailedPrecondition(
            f"cannot listen on {address} for HTTP: {exc} (CELESTIAL_HTTP_ADDRESS)") from None
    sock.listen(128)
    sock.setblocking(False)
    return sock


class HttpServer:
    """The HTTP port beside a running gRPC server; ``start`` binds (port 0 picks a free one)."""

    def __init__(self, settings: Settings, address: str) -> None:
        self._s, self.address = settings, address
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self, servicer: Any, interceptors: Sequence[grpc.aio.ServerInterceptor],  # type: ignore[type-arg]
                    keys: bool) -> int:
        s = self._s
        connect = await build(servicer, interceptors, s.max_message_bytes)
        middleware = [Middleware(CORSMiddleware, allow_origins=list(s.http_cors_origins),
                                 allow_methods=["POST"], allow_headers=CORS_REQUEST_HEADERS,
                                 expose_headers=CORS_RESPONSE_HEADERS, max_age=7200)]
        if not keys:
            # Without keys, being on loopback is the only protection, and a web page can reach
            # loopback by rebinding its own name to 127.0.0.1: only this machine's names pass.
            bound = self.address.rpartition(":")[0].strip("[]")
            middleware.insert(0, Middleware(TrustedHostMiddleware, allowed_hosts=[
                "localhost", "127.0.0.1", "::1", "[::1]", bound]))
        app = _BodyBounded(_ContentTypes(Starlette(
            routes=[Mount(connect.path, app=connect), *_explorer_routes()], middleware=middleware)))
        sock = _listening(self.address)
        config = uvicorn.Config(
            app, http=_HeadBounded, log_config=None, access_log=False, lifespan="off",
            server_header=False,
            timeout_keep_alive=5, h11_max_incomplete_event_size=s.http_max_header_bytes,
            limit_concurrency=s.max_concurrent_rpcs + 16,
            ssl_certfile=s.tls_cert, ssl_keyfile=s.tls_key,
            ssl_ca_certs=s.tls_client_ca,
            ssl_cert_reqs=ssl.CERT_REQUIRED if s.tls_client_ca else ssl.CERT_NONE)
        self._server = _Embedded(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._task.done():
                sock.close()
                self._task.result()  # what stopped it
                raise FailedPrecondition(f"the HTTP server on {self.address} did not start")
            await asyncio.sleep(0.01)
        self.port = int(sock.getsockname()[1])
        log.info("serving Connect (HTTP/JSON) on %s (port %d, %s)", self.address, self.port,
                 "TLS" if s.tls_cert else "plaintext")
        return self.port

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
