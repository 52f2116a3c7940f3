"""The server's bound on calls at once, which health checks do not count against.

gRPC's own bound (``maximum_concurrent_rpcs``) counts every call, the health service's Check
included: callers holding ``max_concurrent_rpcs`` streams open made the port answer its probes
RESOURCE_EXHAUSTED, so Kubernetes or a load balancer took a server that was only busy for a dead
one. This interceptor counts every other call and refuses those beyond the bound with
RESOURCE_EXHAUSTED (reason TOO_MANY_CALLS); health Check always runs. Streams held open by one
caller are bounded apart (``MemoryServicer``, per key or address), so one caller cannot take
every slot. The calls it counts are the ones background work waits for a gap between
(zones/activity.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from celestial_memory.api.grpc.status import abort
from celestial_memory.api.grpc.wrapping import Handler, WrappedHandlers, around
from celestial_memory.errors import TooManyCalls
from celestial_memory.zones.activity import Activity

UNCOUNTED = {"/grpc.health.v1.Health/Check"}


class CallLimiter(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    def __init__(self, limit: int, activity: Activity | None = None) -> None:
        self.limit = limit
        self._activity = activity
        self.running = 0  # the event loop is the only thread that changes it
        self._wrapped = WrappedHandlers()

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler]],
        details: grpc.HandlerCallDetails,
    ) -> Handler:
        handler = await continuation(details)
        if handler is None or details.method in UNCOUNTED:
            return handler
        return self._wrapped.get(details.method, handler, lambda _, h: around(h, self._slot))

    @contextlib.asynccontextmanager
    async def _slot(self, context: Any) -> AsyncIterator[None]:
        if self.running >= self.limit:
            await abort(context, TooManyCalls(
                f"the server is serving {self.limit} calls at once; try again shortly"))
        self.running += 1
        try:
            if self._activity is None:
                yield
            else:
                with self._activity.serving():  # background work waits for a gap
                    yield
        finally:
            self.running -= 1
