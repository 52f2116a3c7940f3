"""The one place where service errors become gRPC status codes, with ``google.rpc.Status``
details (ErrorInfo, BadRequest, RetryInfo) beside the readable message."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NoReturn, TypeVar

import grpc
from celestial_memory import errors
from celestial_memory.access.audit import audit
from celestial_memory.access.roles import CALLER, METHOD
from celestial_memory.observability import metrics
from google.protobuf import duration_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

log = logging.getLogger(__name__)

# Each error's status code, and the reason it sends in ErrorInfo (domain DOMAIN): stable
# identifiers callers can branch on. Anything else is INTERNAL.
DOMAIN = "celestial-memory"
STATUS: dict[type[errors.CelestialError], tuple[grpc.StatusCode, str]] = {
    errors.InvalidArgument: (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT"),
    errors.Unauthenticated: (grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED"),
    errors.ResourceExhausted: (grpc.StatusCode.RESOURCE_EXHAUSTED, "RATE_LIMITED"),
    errors.TooManyCalls: (grpc.StatusCode.RESOURCE_EXHAUSTED, "TOO_MANY_CALLS"),
    errors.ModelBudgetSpent: (grpc.StatusCode.RESOURCE_EXHAUSTED, "MODEL_BUDGET"),
    errors.Interrupted: (grpc.StatusCode.ABORTED, "INTERRUPTED"),
    errors.NotFound: (grpc.StatusCode.NOT_FOUND, "NOT_FOUND"),
    errors.AlreadyExists: (grpc.StatusCode.ALREADY_EXISTS, "ALREADY_EXISTS"),
    errors.PermissionDenied: (grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED"),
    errors.StoreUnavailable: (grpc.StatusCode.UNAVAILABLE, "STORE_UNAVAILABLE"),
    errors.ModelUnavailable: (grpc.StatusCode.UNAVAILABLE, "MODEL_UNAVAILABLE"),
    errors.FailedPrecondition: (grpc.StatusCode.FAILED_PRECONDITION, "FAILED_PRECONDITION"),
    errors.Immutable: (grpc.StatusCode.FAILED_PRECONDITION, "IMMUTABLE"),
    errors.SchemaMismatch: (grpc.StatusCode.FAILED_PRECONDITION, "SCHEMA_MISMATCH"),
    errors.Cancelled: (grpc.StatusCode.CANCELLED, "CANCELLED"),
    errors.DeadlineExceeded: (grpc.StatusCode.DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED"),
}
INTERNAL = (grpc.StatusCode.INTERNAL, "INTERNAL")


def status_of(exc: BaseException) -> tuple[grpc.StatusCode, str]:
    for cls in type(exc).__mro__:
        if cls in STATUS:
            return STATUS[cls]
    return INTERNAL


def code_for(exc: BaseException) -> grpc.StatusCode:
    return status_of(exc)[0]


def details(exc: BaseException, message: str) -> Any:
    """``google.rpc.Status`` as trailing metadata (``grpc-status-details-bin``): ErrorInfo
    always, BadRequest for a bad field, RetryInfo when a retry may succeed."""
    code, reason = status_of(exc)
    status = status_pb2.Status(code=code.value[0], message=message)
    info = error_details_pb2.ErrorInfo(reason=reason, domain=DOMAIN)
    if isinstance(exc, errors.AlreadyExists):
        info.metadata["field"] = exc.field
    status.details.add().Pack(info)
    if isinstance(exc, errors.InvalidArgument):
        status.details.add().Pack(error_details_pb2.BadRequest(field_violations=[
            error_details_pb2.BadRequest.FieldViolation(field=exc.field,
                                                        description=exc.problem)]))
    if isinstance(exc, errors.RetryLater):
        delay = duration_pb2.Duration()
        delay.FromNanoseconds(int(exc.retry_after_s * 1e9))
        status.details.add().Pack(error_details_pb2.RetryInfo(retry_delay=delay))
    return rpc_status.to_status(status).trailing_metadata


async def abort(context: grpc.aio.ServicerContext[Any, Any], exc: BaseException) -> NoReturn:
    code = code_for(exc)
    if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
        audit("denied", method=METHOD.get(), key_id=CALLER.get().key_id, code=code.name,
              reason=str(exc), peer=context.peer())
    message = str(exc)
    if isinstance(exc, errors.StoreUnavailable | errors.SchemaMismatch):
        metrics.STORE_ERRORS.labels(type(exc).__name__).inc()
    if code == grpc.StatusCode.INTERNAL:
        # Unexpected: log it whole, tell the caller nothing about internals.
        log.exception("internal error", exc_info=exc)
        message = "internal error"
    await context.abort(code, message, details(exc, message))


T = TypeVar("T")
Handler = Callable[..., Awaitable[T]]


def mapped(fn: Handler[T]) -> Handler[T]:
    """Decorate a unary servicer method so any exception becomes the right status."""

    async def wrapper(self: Any, request: Any, context: Any) -> T:
        try:
            return await fn(self, request, context)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            await abort(context, exc)

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper



def mapped_stream(
    fn: Callable[..., AsyncIterator[T]],
) -> Callable[..., AsyncIterator[T]]:
    """The same for a server-streaming method: an error mid-stream ends it with its status."""

    async def wrapper(self: Any, request: Any, context: Any) -> AsyncIterator[T]:
        try:
            async for item in fn(self, request, context):
                yield item
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            await abort(context, exc)

    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper
