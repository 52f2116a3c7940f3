"""Streams held open, bounded per caller and in all, whatever the method: StoreBatch and Import,
Export, health Watch and reflection alike.

A caller is its API key. Without keys the service serves only this machine (or, with
``--insecure-no-auth``, anyone), and callers cannot be told apart by anything they cannot change
for free: every address in 127.0.0.0/8 and ::1 reaches the server, so all loopback callers count
as one caller, and a remote caller is its address. Streams in all take at most
``max_open_streams`` of the ``max_concurrent_rpcs`` call slots (half by default), so however
many streams are held, unary calls (Store, Recall, Stats) still find a slot. Where callers must
be kept apart from each other, API keys are the way (docs/design.md, "The trust boundary").
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from celestial_memory.access.roles import CALLER
from celestial_memory.api.grpc.status import abort
from celestial_memory.api.grpc.wrapping import Handler, WrappedHandlers, around
from celestial_memory.errors import TooManyCalls

LOOPBACK = "loopback"


def peer_caller(peer: str) -> str:
    """The caller a keyless peer counts as: "loopback" for any loopback address, else its
    address (``ipv4:10.0.0.5:5123`` -> ``10.0.0.5``)."""
    kind, _, rest = peer.partition(":")
    host = rest.rpartition(":")[0].strip("[]") if kind in ("ipv4", "ipv6") else peer
    try:
        return LOOPBACK if ipaddress.ip_address(host).is_loopback else host
    except ValueError:  # a unix socket or a name: one caller
        return host or peer


class StreamLimiter(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    def __init__(self, per_caller: int, total: int) -> None:
        self.per_caller, self.total = per_caller, total
        self.open: dict[str, int] = {}  # the event loop is the only thread that changes it
        self._wrapped = WrappedHandlers()

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler]],
        details: grpc.HandlerCallDetails,
    ) -> Handler:
        handler = await continuation(details)
        if handler is None or not (handler.request_streaming or handler.response_streaming):
            return handler
        return self._wrapped.get(details.method, handler, lambda _, h: around(h, self._slot))

    @contextlib.asynccontextmanager
    async def _slot(self, context: Any) -> AsyncIterator[None]:
        caller = CALLER.get().key_id or peer_caller(context.peer())
        if sum(self.open.values()) >= self.total:
            await abort(context, TooManyCalls(
                f"the server holds {self.total} streams open already (its share of call "
                "slots); try again shortly"))
        if self.open.get(caller, 0) >= self.per_caller:
            await abort(context, TooManyCalls(
                f"{self.per_caller} streams are open already for this caller; close one first"))
        self.open[caller] = self.open.get(caller, 0) + 1
        try:
            yield
        finally:
            self.open[caller] -= 1
            if not self.open[caller]:
                del self.open[caller]
