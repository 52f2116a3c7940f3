"""Running every behaviour of a gRPC method handler inside an async context manager: the one
way the interceptors (admission, the call limit) put work around a call, unary or streaming."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

Handler = Any  # grpc.RpcMethodHandler (not subscriptable at run time)
# Given the call's context, what to enter before the behaviour runs and leave once it ends.
Around = Callable[[Any], AbstractAsyncContextManager[None]]


def around(handler: Handler, enter: Around) -> Handler:
    """``handler`` with each behaviour run inside ``enter(context)``: for a stream, until its
    last item is sent. Each call runs in its own task, so context variables set on entering
    stay within the call. A streaming behaviour may be an async generator or a coroutine that
    writes to the context."""

    def wrap(behavior: Callable[..., Any] | None) -> Callable[..., Any] | None:
        if behavior is None:
            return None
        if inspect.isasyncgenfunction(behavior):
            async def stream(request: Any, context: Any) -> AsyncIterator[Any]:
                async with enter(context):
                    async for item in behavior(request, context):
                        yield item

            return stream

        async def call(request: Any, context: Any) -> Any:
            async with enter(context):
                return await behavior(request, context)

        return call

    return handler._replace(
        unary_unary=wrap(handler.unary_unary), unary_stream=wrap(handler.unary_stream),
        stream_unary=wrap(handler.stream_unary), stream_stream=wrap(handler.stream_stream))


class WrappedHandlers:
    """Each method's wrapped handler, built once. gRPC asks the interceptors for a method's
    handler on every call, and wrapping it anew each time (closures and a named tuple per layer)
    cost every call time; the handler a method resolves to is the same object from call to
    call, and one that changes is wrapped anew."""

    LIMIT = 1024  # methods are the server's registered ones; the bound is a safety net

    def __init__(self) -> None:
        self._by_method: dict[str, tuple[Handler, Handler]] = {}

    def get(self, method: str, handler: Handler,
            wrap: Callable[[str, Handler], Handler]) -> Handler:
        hit = self._by_method.get(method)
        if hit is not None and hit[0] is handler:
            return hit[1]
        wrapped = wrap(method, handler)
        if len(self._by_method) < self.LIMIT or method in self._by_method:
            self._by_method[method] = (handler, wrapped)
        return wrapped
