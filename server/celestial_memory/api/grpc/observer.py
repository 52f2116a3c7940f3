"""What every call leaves behind, outermost of the interceptors (so refusals count too): the
gRPC server metrics (observability/metrics.py), a span when tracing is on
(observability/telemetry.py; the caller's ``traceparent`` metadata makes it a child of the
caller's span), and one access log line with the request id (the caller's ``x-request-id``, or
one made here), the tenant, the method, the status and the duration. Never the content, the
query or a key: the line is built from those fields only.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import os
import re
import time
import unicodedata
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any

import grpc
from celestial_memory.api.grpc.wrapping import WrappedHandlers
from celestial_memory.observability import metrics, telemetry

log = logging.getLogger("celestial_memory.access_log")
Handler = Any  # grpc.RpcMethodHandler
# The tenant a call resolved to (the servicer sets it: a key may decide it), for the log line.
TENANT: contextvars.ContextVar[str] = contextvars.ContextVar("tenant", default="")
_REQUEST_ID = re.compile(r"[\w.:-]{1,64}")
# A tenant's name is bounded before the servicer sets it (access/roles.py); the log line cuts it
# here too, so that nothing a caller sends can make a line long.
LOGGED_TENANT_CHARS = 256


def _logged(tenant: str) -> str:
    """The tenant as the text of the log line shows it: cut short, and quoted with escapes when
    it holds a line break or another control character, which would forge a line."""
    tenant = tenant[:LOGGED_TENANT_CHARS]
    if any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in tenant):
        return repr(tenant)
    return tenant


def _kind(handler: Handler) -> str:
    if handler.unary_unary:
        return "unary"
    if handler.unary_stream:
        return "server_stream"
    return "client_stream" if handler.stream_unary else "bidi_stream"


def request_id(context: Any) -> str:
    return request_id_of(context.invocation_metadata() or ())


def request_id_of(metadata: Iterable[tuple[str, Any]]) -> str:
    for name, value in metadata:
        if name == "x-request-id":
            text = value.decode(errors="replace") if isinstance(value, bytes) else value
            if _REQUEST_ID.fullmatch(text):
                return text
    return os.urandom(8).hex()  # 16 random hex digits, as a uuid4's first 16 but cheaper


class CallObserver(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    def __init__(self) -> None:
        self._wrapped = WrappedHandlers()

    async def intercept_service(
        self, continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler]],
        details: grpc.HandlerCallDetails,
    ) -> Handler:
        handler = await continuation(details)
        if handler is None:
            return None
        return self._wrapped.get(details.method, handler, self._observe)

    @staticmethod
    def _observe(method_path: str, handler: Handler) -> Handler:
        service, _, method = method_path.lstrip("/").rpartition("/")
        series = _Series((_kind(handler), service, method))
        return handler._replace(**{
            kind: _observed(getattr(handler, kind), series)
            for kind in ("unary_unary", "unary_stream", "stream_unary", "stream_stream")})


class _Series:
    """A method's metric series, looked up once rather than on every call."""

    def __init__(self, labels: tuple[str, str, str]) -> None:
        self.labels = labels
        self.started = metrics.STARTED.labels(*labels)
        self.handling = metrics.HANDLING.labels(*labels)
        self._handled: dict[str, Any] = {}

    def handled(self, code: str) -> Any:
        if (child := self._handled.get(code)) is None:
            child = self._handled[code] = metrics.HANDLED.labels(*self.labels, code)
        return child


def _code(context: Any, error: BaseException | None) -> str:
    if isinstance(error, asyncio.CancelledError | GeneratorExit):
        # gRPC cancels the call's task when its deadline passes, as when the client goes away.
        left = context.time_remaining()
        return "DEADLINE_EXCEEDED" if left is not None and left <= 0 else "CANCELLED"
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return str(code.name)
    if error is not None and not isinstance(error, grpc.aio.AbortError):
        return "UNKNOWN"
    return "OK"


class _Observing:
    """Around one call: started, then handled with its code and time, its span, its log line.
    A class rather than a generator context manager, and the request id, the span and the line
    only when tracing or the access log is on: it runs around every call, health checks too."""

    __slots__ = ("_context", "_rid", "_series", "_span", "_started", "_trace")

    def __init__(self, context: Any, series: _Series) -> None:
        self._context, self._series = context, series

    def __enter__(self) -> None:
        context, series = self._context, self._series
        series.started.inc()
        tracing = telemetry.enabled()
        self._rid = request_id(context) if tracing or log.isEnabledFor(logging.INFO) else ""
        self._span: AbstractContextManager[Any] | None = None
        self._trace: Any = None
        if tracing:
            _, service, method = series.labels
            carrier = {k: v for k, v in context.invocation_metadata() or ()
                       if k in ("traceparent", "tracestate") and isinstance(v, str)}
            self._span = telemetry.span(
                f"{service}/{method}", {"rpc.system": "grpc", "rpc.service": service,
                                        "rpc.method": method, "request.id": self._rid}, carrier)
            self._trace = self._span.__enter__()
        self._started = time.perf_counter()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        try:
            seconds = time.perf_counter() - self._started
            code = _code(self._context, error)
            series = self._series
            series.handled(code).inc()
            series.handling.observe(seconds)
            if self._trace is not None:
                self._trace.set_attribute("rpc.grpc.status_code", code)
            if log.isEnabledFor(logging.INFO):
                method, tenant = series.labels[2], TENANT.get()
                log.info("%s %s %s %.1f ms", method, code, _logged(tenant) or "-",
                         seconds * 1000,
                         extra={"request_id": self._rid, "tenant": tenant[:LOGGED_TENANT_CHARS],
                                "method": method, "status": code,
                                "duration_ms": round(seconds * 1000, 3)})
        finally:
            if self._span is not None:
                self._span.__exit__(kind, error, tb)


def _observed(behavior: Callable[..., Any] | None, series: _Series) -> Any:
    if behavior is None:
        return None
    if inspect.isasyncgenfunction(behavior):
        async def stream(request: Any, context: Any) -> AsyncIterator[Any]:
            with _Observing(context, series):
                async for item in behavior(request, context):
                    yield item

        return stream

    async def call(request: Any, context: Any) -> Any:
        with _Observing(context, series):
            return await behavior(request, context)

    return call


_UNREACHED: dict[tuple[str, str, str], _Series] = {}


def refused_before_interceptors(kind: str, service: str, method: str | None, code: str,
                                seconds: float, rid: str) -> None:
    """A call its transport refused before this interceptor saw it (on the HTTP port: a body
    Connect could not read, a wrong content type, a body too slow): its access log line, as any
    call's, and for a method of the contract its metric series too (``method`` None: a path
    that names none, logged as ``?`` and counted nowhere, so that no caller makes new series)."""
    if method is not None:
        labels = (kind, service, method)
        if (series := _UNREACHED.get(labels)) is None:
            series = _UNREACHED[labels] = _Series(labels)
        series.started.inc()
        series.handled(code).inc()
        series.handling.observe(seconds)
    log.info("%s %s - %.1f ms", method or "?", code, seconds * 1000,
             extra={"request_id": rid, "tenant": "", "method": method or "?", "status": code,
                    "duration_ms": round(seconds * 1000, 3)})

