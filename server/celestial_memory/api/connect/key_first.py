"""A call's key is checked from its request head, before its body is read.

Connect reads and converts a request's whole body before any method (and so the gRPC
interceptors, api/grpc/auth.py) sees the call: a caller with no key could make the server read
and convert megabytes only to be refused. ``KeyFirst`` runs the same admission (key, role, the
key's rate, failed attempts per address) on the head alone; a refusal is answered at once, as
Connect answers an error, and the body is never read. An admitted call carries its caller on
(``auth.ADMITTED``), so the interceptors do not admit it, or take its rate, a second time.
"""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

from celestial_memory.api.connect.context import Aborted, ConnectCall
from celestial_memory.api.connect.transport import SERVICE
from celestial_memory.api.grpc.auth import ADMITTED, Authenticator
from connectrpc.errors import ConnectError

# What Connect sends for each code on a unary call (its protocol's table); a stream's errors
# travel in its end message with 200.
_HTTP_STATUS = {"canceled": 499, "unknown": 500, "invalid_argument": 400,
                "deadline_exceeded": 504, "not_found": 404, "already_exists": 409,
                "permission_denied": 403, "resource_exhausted": 429,
                "failed_precondition": 400, "aborted": 409, "out_of_range": 400,
                "unimplemented": 501, "internal": 500, "unavailable": 503,
                "data_loss": 500, "unauthenticated": 401}


def connect_error(content_type: bytes, error: ConnectError) -> tuple[int, list[tuple[bytes, bytes]],
                                                                     bytes]:
    """The HTTP status, headers and body that carry ``error`` as Connect does: a JSON body for
    a unary call, an end-of-stream envelope for a streaming one."""
    wire: dict[str, Any] = {"code": error.code.value, "message": error.message}
    if error.details:
        wire["details"] = [{"type": d.type_name,
                            "value": base64.b64encode(d.message_bytes).decode().rstrip("=")}
                           for d in error.details]
    if content_type.startswith(b"application/connect+"):
        end = json.dumps({"error": wire}).encode()
        return 200, [(b"content-type", content_type)], struct.pack(">BI", 2, len(end)) + end
    body = json.dumps(wire).encode()
    return _HTTP_STATUS.get(error.code.value, 500), [(b"content-type", b"application/json")], body


class KeyFirst:
    """Admission from the head of every call to a memory-service method (module docstring)."""

    def __init__(self, app: Any, authenticator: Authenticator) -> None:
        self._app, self._auth = app, authenticator

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        service, _, name = scope.get("path", "").rpartition("/")
        if scope["type"] != "http" or scope["method"] not in ("POST", "GET") \
                or not service.endswith(SERVICE.full_name) or name not in SERVICE.methods_by_name:
            await self._app(scope, receive, send)  # not a call: a preflight, a 404
            return
        try:
            caller = await self._auth.admit(name, ConnectCall.of_head(scope))
        except Aborted as refused:
            kind = dict(scope["headers"]).get(b"content-type", b"application/json")
            status, headers, body = connect_error(kind.split(b";")[0].strip(), refused.error)
            headers.append((b"content-length", str(len(body)).encode()))
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body, "more_body": False})
            return
        token = ADMITTED.set((name, caller))
        try:
            await self._app(scope, receive, send)
        finally:
            ADMITTED.reset(token)
