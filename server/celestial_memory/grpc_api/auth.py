"""The trust boundary, before any handler runs: the caller's API key (``authorization: Bearer``
or ``x-api-key`` metadata; or, with mTLS, a client certificate whose subject a key names) is
checked, the method's role required, the key's request rate
limited, and denials and admin calls written to the audit log. The handler then runs with the
caller (``access.roles.CALLER``), which decides the tenants it may name.

The health and reflection services stay open: probes and tools call them without keys.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import grpc
from celestial_memory.access.keys import KeyRing
from celestial_memory.access.rate import RateLimiter
from celestial_memory.access.roles import CALLER, METHOD, METHOD_ROLES, OPEN, Principal, Role
from celestial_memory.errors import (
    CelestialError,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
)
from celestial_memory.grpc_api.status import abort, code_for

audit_log = logging.getLogger("celestial_memory.audit")
Handler = Any  # grpc.RpcMethodHandler (not subscriptable at run time)


def audit(event: str, **fields: Any) -> None:
    """One JSON line per event; key ids only, never a key or any content."""
    audit_log.info(json.dumps({"event": event, **fields}, sort_keys=True))


def credential(metadata: Iterable[tuple[str, str | bytes]] | None) -> str:
    for name, value in metadata or ():
        text = value.decode(errors="replace") if isinstance(value, bytes) else value
        if name == "authorization":
            scheme, _, key = text.strip().partition(" ")
            if scheme.lower() == "bearer" and key.strip():
                return key.strip()
        elif name == "x-api-key" and text.strip():
            return text.strip()
    raise Unauthenticated("an API key is required (authorization: Bearer <key>, or x-api-key)")


class Authenticator(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    def __init__(self, service_name: str, keys: KeyRing | None, rate: RateLimiter | None) -> None:
        self._service, self._keys, self._rate = service_name, keys, rate

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler]],
        details: grpc.HandlerCallDetails,
    ) -> Handler:
        handler = await continuation(details)
        service, _, method = details.method.lstrip("/").rpartition("/")
        if handler is None or service != self._service:
            return handler
        return _guarded(handler, method, self._admit)

    async def _admit(self, method: str, context: grpc.aio.ServicerContext[Any, Any]) -> Principal:
        """The caller, or a refusal (audited) that ends the call before its handler runs."""
        if self._keys is None:
            return OPEN
        try:
            caller = self._caller(context)
            need = METHOD_ROLES.get(method)
            if need is None:
                raise PermissionDenied(f"{method} is not open to API keys")
            caller.require(need, method)
            if self._rate is not None:
                self._rate.take(caller.key_id)
        except CelestialError as exc:
            if not isinstance(exc, ResourceExhausted):
                audit("denied", method=method, code=code_for(exc).name, reason=str(exc),
                      peer=context.peer())
            await abort(context, exc)
        if need == Role.ADMIN:
            audit("admin", method=method, key_id=caller.key_id, peer=context.peer())
        return caller

    def _caller(self, context: grpc.aio.ServicerContext[Any, Any]) -> Principal:
        assert self._keys is not None
        try:
            return self._keys.authenticate(credential(context.invocation_metadata()))
        except Unauthenticated as missing:
            # No key: a verified client certificate whose subject a key names stands for it.
            subject = (context.auth_context() or {}).get("x509_common_name")
            name = next(iter(subject), b"").decode() if subject else ""
            if name and (caller := self._keys.for_subject(name)) is not None:
                return caller
            raise missing


Admit = Callable[[str, Any], Awaitable[Principal]]


def _guarded(handler: Handler, method: str, admit: Admit) -> Handler:
    """The handler behind the admission, run with the caller and method set for everything it
    calls (each call runs in its own task, so these stay within the call)."""

    def unary(behavior: Callable[..., Any] | None) -> Callable[..., Any] | None:
        if behavior is None:
            return None

        async def call(request: Any, context: Any) -> Any:
            CALLER.set(await admit(method, context))
            METHOD.set(method)
            return await behavior(request, context)

        return call

    def stream(behavior: Callable[..., Any] | None) -> Callable[..., Any] | None:
        if behavior is None:
            return None

        async def call(request: Any, context: Any) -> AsyncIterator[Any]:
            CALLER.set(await admit(method, context))
            METHOD.set(method)
            async for item in behavior(request, context):
                yield item

        return call

    return handler._replace(
        unary_unary=unary(handler.unary_unary), unary_stream=stream(handler.unary_stream),
        stream_unary=unary(handler.stream_unary))
