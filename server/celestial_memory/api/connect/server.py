"""The HTTP port (``CELESTIAL_HTTP_ADDRESS``, off unless set): the memory service over Connect,
that is JSON or binary protobuf over HTTP/1.1 (``curl``-able), with the same TLS settings as the
gRPC port, run by uvicorn on the gRPC server's own event loop.

Browsers on other origins are refused unless ``CELESTIAL_HTTP_CORS_ORIGINS`` names them (a
preflight from any other origin is answered 400); without API keys only this machine's host
names are served (DNS rebinding). Bodies are bounded by ``max_message_bytes`` (after
decompression), as messages are on the gRPC port; how long a request head and body may take is
bounded in ``guards.py``. The explorer's static files are served at ``/explorer/``, and its icon
at ``/favicon.ico``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import socket
import ssl
from collections.abc import Iterator, Sequence
from importlib import resources
from typing import Any

import grpc
import uvicorn
from celestial_memory.api.connect.conversion import Converter
from celestial_memory.api.connect.guards import (
    Admission,
    BodyBounded,
    ContentTypes,
    Explained,
    HeadBounded,
    Unreached,
)
from celestial_memory.api.connect.key_first import KeyFirst
from celestial_memory.api.connect.transport import Deferring, build
from celestial_memory.api.grpc.auth import Authenticator
from celestial_memory.config import Settings
from celestial_memory.errors import FailedPrecondition
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route

log = logging.getLogger(__name__)
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
                  "explorer.css": "text/css; charset=utf-8",
                  "favicon.ico": "image/x-icon"}
EXPLORER_HEADERS = {"content-security-policy": "default-src 'self'; frame-ancestors 'none'; "
                                               "base-uri 'none'; form-action 'none'",
                    "x-content-type-options": "nosniff", "referrer-policy": "no-referrer",
                    "cache-control": "no-cache"}


def _explorer_routes() -> list[Route]:
    folder = resources.files("celestial_memory.api.explorer")

    def serve(name: str, media_type: str, path: str = "") -> Route:
        async def endpoint(_: Request) -> Response:
            # Read on each request: a few small files, and a rebuilt bundle shows at once.
            return Response(folder.joinpath(name).read_bytes(), media_type=media_type,
                            headers=EXPLORER_HEADERS)
        path = path or ("/explorer/" if name == "index.html" else f"/explorer/{name}")
        return Route(path, endpoint, methods=["GET", "HEAD"])

    async def to_page(request: Request) -> Response:
        query = request.url.query  # ?tenant=... and the rest go along
        return RedirectResponse("/explorer/" + (f"?{query}" if query else ""), status_code=308)

    return [Route("/explorer", to_page, methods=["GET", "HEAD"]),
            *(serve(name, kind) for name, kind in EXPLORER_FILES.items()),
            # Where browsers look for a site's icon without being told (every page's first load).
            serve("favicon.ico", EXPLORER_FILES["favicon.ico"], "/favicon.ico")]


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
        self._converter = Converter(settings.http_conversion)

    async def start(self, servicer: Any, interceptors: Sequence[grpc.aio.ServerInterceptor],  # type: ignore[type-arg]
                    keys: bool) -> int:
        s = self._s
        connect = await build(servicer, interceptors, s.max_message_bytes, self._converter)
        middleware = [Middleware(CORSMiddleware, allow_origins=list(s.http_cors_origins),
                                 allow_methods=["POST"], allow_headers=CORS_REQUEST_HEADERS,
                                 expose_headers=CORS_RESPONSE_HEADERS, max_age=7200)]
        if not keys and not s.insecure_no_auth:
            # Without keys, being on loopback is the only protection, and a web page can reach
            # loopback by rebinding its own name to 127.0.0.1: only this machine's names pass.
            # (--insecure-no-auth serves anyone who reaches the port: no names are kept out.)
            bound = self.address.rpartition(":")[0].strip("[]")
            middleware.insert(0, Middleware(TrustedHostMiddleware, allowed_hosts=[
                "localhost", "127.0.0.1", "::1", "[::1]", bound]))
        # Inside CORS (a browser reads its refusal) and the host check; a call without a valid
        # key is refused there from its head (key_first.py).
        authenticator = next(i for i in interceptors if isinstance(i, Authenticator))
        calls = Deferring(KeyFirst(connect, authenticator) if keys else connect)
        # Explained inside Unreached: the access log reads the code its bodies give.
        app = Unreached(BodyBounded(Explained(ContentTypes(Starlette(
            routes=[Mount(connect.path, app=calls), *_explorer_routes()], middleware=middleware))),
            s.stream_idle_s))
        protocol = type("Bounded", (HeadBounded,), {"admission": Admission(
            s.http_max_connections, s.http_max_connections_per_address)})
        sock = _listening(self.address)
        config = uvicorn.Config(
            app, http=protocol, log_config=None, access_log=False, lifespan="off",
            server_header=False,
            # The peer is the connection's own address, as on the gRPC port: a caller's
            # X-Forwarded-For would otherwise name the peer in audit lines and per-caller bounds.
            proxy_headers=False,
            # A stopping server waits for calls in progress as long as the gRPC port does; a
            # client that stopped reading an Export held the shutdown for as long as it liked.
            timeout_graceful_shutdown=max(1, math.ceil(s.grace_seconds)),
            timeout_keep_alive=5, h11_max_incomplete_event_size=s.http_max_header_bytes,
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
        log.info("serving Connect (HTTP/JSON) on %s (port %d, %s); the explorer: %s",
                 self.address, self.port, "plaintext" if not s.tls_cert else
                 "TLS, client certificates required" if s.tls_client_ca else "TLS",
                 self.url() + "explorer/")
        return self.port

    def url(self) -> str:
        """The port's address for a browser on this machine: a wildcard bind (0.0.0.0, ::)
        is reached at localhost."""
        host = self.address.rpartition(":")[0].strip("[]")
        if host in ("", "0.0.0.0", "::"):
            host = "localhost"
        elif ":" in host:
            host = f"[{host}]"
        return f"{'https' if self._s.tls_cert else 'http'}://{host}:{self.port}/"

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._converter.close()
