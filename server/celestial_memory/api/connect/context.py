"""A Connect call seen as the gRPC side sees a call, so that one servicer and one chain of
interceptors (api/grpc/) serve both transports.

The servicer and the interceptors ask a call's context for its metadata (the API key), its peer
(per-address limits, the audit line), its time left (the deadline its work inherits), and end a
call with ``abort`` (status.py's one mapping of errors to codes and details). ``ConnectCall``
answers each from the Connect request (headers, client address, ``Connect-Timeout-Ms``), and
its ``abort`` raises ``Aborted``, which the transport turns into a ``ConnectError`` with the
same code, message and details (ErrorInfo, BadRequest, RetryInfo).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

import grpc
from connectrpc.code import Code
from connectrpc.errors import ConnectError, ErrorDetail
from connectrpc.request import RequestContext
from google.rpc import status_pb2
from protobuf.wkt import Any as PackedAny

DETAILS_KEY = "grpc-status-details-bin"


class Aborted(grpc.aio.AbortError):
    """A call ended by ``abort``: an AbortError, so that every layer lets it through as it does
    a gRPC abort, carrying what Connect sends."""

    def __init__(self, error: ConnectError) -> None:
        super().__init__(error.message)
        self.error = error


def connect_code(code: grpc.StatusCode) -> Code:
    # The two protocols share their codes; only CANCELLED is spelled otherwise.
    return Code.CANCELED if code == grpc.StatusCode.CANCELLED else Code[code.name]


def grpc_code(code: Code) -> grpc.StatusCode:
    """``connect_code`` the other way."""
    return grpc.StatusCode.CANCELLED if code == Code.CANCELED else grpc.StatusCode[code.name]


def client_framing(code: str, message: str) -> bool:
    """Whether an error Connect raised is a request the client framed wrongly (an envelope
    flagged compressed with no compression named): the Connect spec has the wire say
    ``internal``, but the access log and metrics count it as the client's error,
    INVALID_ARGUMENT, not the server's."""
    return code.lower() == "internal" and message.startswith("protocol error")


def _details(trailing_metadata: Sequence[tuple[str, Any]]) -> list[ErrorDetail]:
    """The details of a ``google.rpc.Status`` in gRPC trailing metadata (ErrorInfo, BadRequest,
    RetryInfo), passed on as they are packed."""
    raw = next((v for k, v in trailing_metadata if k == DETAILS_KEY), None)
    if raw is None:
        return []
    return [ErrorDetail(PackedAny(type_url=d.type_url, value=d.value))
            for d in status_pb2.Status.FromString(raw).details]


def grpc_peer(address: str | None) -> str:
    """A client address (``host:port``) as gRPC writes a peer: ``ipv4:h:p`` or ``ipv6:[h]:p``."""
    if not address:
        return "unknown"
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return address
    return f"ipv4:{ip}:{port}" if ip.version == 4 else f"ipv6:[{ip}]:{port}"


class ConnectCall:
    """The part of ``grpc.aio.ServicerContext`` the servicer and interceptors use."""

    def __init__(self, ctx: RequestContext[Any, Any]) -> None:
        self._init(ctx.request_headers.allitems(), ctx.client_address, ctx.timeout_ms)

    def _init(self, headers: Iterable[tuple[str, str]], client_address: str | None,
              timeout_ms: float | None) -> None:
        self._code: grpc.StatusCode | None = None
        self._metadata = tuple((k.lower(), v) for k, v in headers)
        self._client_address, self._timeout_ms = client_address, timeout_ms

    @classmethod
    def of_head(cls, scope: Any) -> ConnectCall:
        """A call seen from its request head alone (an ASGI scope), before its body is read:
        what admitting it needs (the key, the peer)."""
        call = cls.__new__(cls)
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        client = scope.get("client")
        call._init(headers, f"{client[0]}:{client[1]}" if client else None, None)
        return call

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def peer(self) -> str:
        return grpc_peer(self._client_address)

    def auth_context(self) -> dict[str, list[bytes]]:
        # Client certificates are for the gRPC port; over HTTP a caller presents a key.
        return {}

    def time_remaining(self) -> float | None:
        left = self._timeout_ms
        return None if left is None else max(left / 1000, 0.0)

    def code(self) -> grpc.StatusCode | None:
        return self._code

    def ended(self, error: ConnectError) -> None:
        """The call ended with ``error`` from Connect itself (the access log's status)."""
        self._code = grpc.StatusCode.INVALID_ARGUMENT \
            if client_framing(error.code.value, error.message) else grpc_code(error.code)

    async def abort(self, code: grpc.StatusCode, details: str = "",
                    trailing_metadata: Sequence[tuple[str, Any]] = ()) -> NoReturn:
        self._code = code
        raise Aborted(ConnectError(connect_code(code), details, _details(trailing_metadata)))
