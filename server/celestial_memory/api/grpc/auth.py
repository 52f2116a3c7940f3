"""The trust boundary, before any handler runs: the caller's API key (``authorization: Bearer``
or ``x-api-key`` metadata; or, with mTLS and no key presented, a client certificate whose subject
a key names) is checked, the method's role required, the key's request rate limited. The handler
then runs with the caller (``access.roles.CALLER``), which decides the tenants it may name.
Refusals are audited where every error becomes a status (``status.py``).

With keys configured, only the health service's Check stays open (probes); its Watch and
reflection need a valid key of any role, so that no one without a key can hold streams open.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from celestial_memory.access.credentials import credential
from celestial_memory.access.keys import KeyRing
from celestial_memory.access.rate import RateLimiter
from celestial_memory.access.roles import CALLER, METHOD, METHOD_ROLES, OPEN, Principal
from celestial_memory.api.grpc.status import abort
from celestial_memory.api.grpc.wrapping import Handler, WrappedHandlers, around
from celestial_memory.errors import CelestialError, PermissionDenied, Unauthenticated

Context = grpc.aio.ServicerContext[Any, Any]
OPEN_METHODS = {"grpc.health.v1.Health/Check"}
# A call the HTTP port admitted from its head, before reading its body (api/connect/): the
# method and the caller, so that admission (and the key's rate) is not taken twice.
ADMITTED: contextvars.ContextVar[tuple[str, Principal] | None] = contextvars.ContextVar(
    "admitted", default=None)


class Authenticator(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    def __init__(self, service_name: str | tuple[str, ...], keys: KeyRing | None,
                 rate: RateLimiter | None) -> None:
        # The services whose methods need a role (access/roles.py); any other, a valid key.
        self._services = (service_name,) if isinstance(service_name, str) else service_name
        self._keys, self._rate = keys, rate
        self._wrapped = WrappedHandlers()

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler]],
        details: grpc.HandlerCallDetails,
    ) -> Handler:
        handler = await continuation(details)
        if handler is None or details.method.lstrip("/") in OPEN_METHODS:
            return handler
        return self._wrapped.get(details.method, handler, self._guard)

    def _guard(self, path: str, handler: Handler) -> Handler:
        service, _, method = path.lstrip("/").rpartition("/")
        if service in self._services:
            return _guarded(handler, method, self._admit)
        return _guarded(handler, method, self._authenticated)

    async def admit(self, method: str, context: Any) -> Principal:
        """The caller of a memory-service method, or a refusal that ends the call (through
        ``context.abort``). The HTTP port calls it with a request's head alone."""
        return await self._admit(method, context)

    async def _admit(self, method: str, context: Context) -> Principal:
        """The caller of a memory-service method, or a refusal that ends the call."""
        if self._keys is None:
            return OPEN
        try:
            caller = self._caller(context)
            CALLER.set(caller)  # a refusal below is audited with the key's id
            need = METHOD_ROLES.get(method)
            if need is None:
                raise PermissionDenied(f"{method} is not open to API keys")
            caller.require(need, method)
            if self._rate is not None:
                self._rate.take(caller.key_id)
        except CelestialError as exc:
            await abort(context, exc)
        return caller

    async def _authenticated(self, method: str, context: Context) -> Principal:
        """Any valid key (reflection, health Watch)."""
        if self._keys is None:
            return OPEN
        try:
            return self._caller(context)
        except CelestialError as exc:
            await abort(context, exc)

    def _caller(self, context: Context) -> Principal:
        assert self._keys is not None
        try:
            key = credential(context.invocation_metadata())
            if key is not None:  # a key presented and wrong is refused, whatever else comes
                return self._keys.authenticate(key)
            subject = (context.auth_context() or {}).get("x509_common_name")
            name = next(iter(subject), b"").decode() if subject else ""
            if name and (caller := self._keys.for_subject(name)) is not None:
                return caller
            raise Unauthenticated(
                "an API key is required (authorization: Bearer <key>, or x-api-key)")
        except Unauthenticated:
            if self._rate is not None:  # failed attempts are limited per address too
                self._rate.take("unauthenticated " + context.peer().rpartition(":")[0])
            raise


Admit = Callable[[str, Any], Awaitable[Principal]]


def _guarded(handler: Handler, method: str, admit: Admit) -> Handler:
    """Every behaviour of the handler behind the admission, run with the caller and method set
    for everything it calls."""

    @contextlib.asynccontextmanager
    async def admitted(context: Any) -> AsyncIterator[None]:
        METHOD.set(method)
        early = ADMITTED.get()
        CALLER.set(early[1] if early is not None and early[0] == method
                   else await admit(method, context))
        yield

    return around(handler, admitted)
