"""The client's one exception tree, mirroring gRPC status codes, with the server's error details.

    CelestialClientError (code, details, reason, field, violations, retry_after)
    ├── CallCancelledError         CANCELLED (not asyncio.CancelledError)
    ├── UnknownError               UNKNOWN
    ├── InvalidArgumentError       INVALID_ARGUMENT
    ├── DeadlineExceededError      DEADLINE_EXCEEDED
    ├── NotFoundError              NOT_FOUND
    ├── AlreadyExistsError         ALREADY_EXISTS
    ├── PermissionDeniedError      PERMISSION_DENIED
    ├── ResourceExhaustedError     RESOURCE_EXHAUSTED
    ├── FailedPreconditionError    FAILED_PRECONDITION
    ├── AbortedError               ABORTED
    ├── OutOfRangeError            OUT_OF_RANGE
    ├── UnimplementedError         UNIMPLEMENTED
    ├── InternalError              INTERNAL
    ├── UnavailableError           UNAVAILABLE
    ├── DataLossError              DATA_LOSS
    └── UnauthenticatedError       UNAUTHENTICATED

The server sends ``google.rpc.Status`` details (``grpc-status-details-bin``), as Google APIs do:
``ErrorInfo`` (``reason``, ``metadata``), ``BadRequest`` (``violations``; ``field`` is the first
one's field, or ErrorInfo's ``field`` for ALREADY_EXISTS) and ``RetryInfo`` (``retry_after``,
seconds). They are None or empty when absent.
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status


@dataclass(frozen=True, slots=True)
class FieldViolation:
    field: str
    description: str


class CelestialClientError(Exception):
    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(
        self, details: str, code: grpc.StatusCode | None = None, *, reason: str | None = None,
        violations: tuple[FieldViolation, ...] = (), retry_after: float | None = None,
        metadata: dict[str, str] | None = None,
    ) -> None:
        super().__init__(details)
        self.details = details
        if code is not None:
            self.code = code
        self.reason = reason
        self.metadata = metadata or {}
        self.violations = violations
        self.field = violations[0].field if violations else self.metadata.get("field")
        self.retry_after = retry_after


class CallCancelledError(CelestialClientError):
    code = grpc.StatusCode.CANCELLED


class UnknownError(CelestialClientError):
    code = grpc.StatusCode.UNKNOWN


class InvalidArgumentError(CelestialClientError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class DeadlineExceededError(CelestialClientError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFoundError(CelestialClientError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExistsError(CelestialClientError):
    code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDeniedError(CelestialClientError):
    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhaustedError(CelestialClientError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPreconditionError(CelestialClientError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class AbortedError(CelestialClientError):
    code = grpc.StatusCode.ABORTED


class OutOfRangeError(CelestialClientError):
    code = grpc.StatusCode.OUT_OF_RANGE


class UnimplementedError(CelestialClientError):
    code = grpc.StatusCode.UNIMPLEMENTED


class InternalError(CelestialClientError):
    code = grpc.StatusCode.INTERNAL


class UnavailableError(CelestialClientError):
    """UNAVAILABLE. Said by the server (its store or model is down: ``reason`` names which), or
    by gRPC when no server answered, and then ``str()`` adds how to start one; ``details``
    stays the message as it came."""

    code = grpc.StatusCode.UNAVAILABLE

    def __str__(self) -> str:
        if self.reason is not None or _names_tls(self.details):
            return self.details  # a server answered, or one is there that speaks otherwise
        return f"{self.details} ({NOT_ANSWERING_HINT})"


class DataLossError(CelestialClientError):
    code = grpc.StatusCode.DATA_LOSS


class UnauthenticatedError(CelestialClientError):
    code = grpc.StatusCode.UNAUTHENTICATED


_BY_CODE: dict[grpc.StatusCode, type[CelestialClientError]] = {
    cls.code: cls
    for cls in (
        CallCancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError, NotFoundError,
        AlreadyExistsError, PermissionDeniedError, ResourceExhaustedError,
        FailedPreconditionError, AbortedError, OutOfRangeError, UnimplementedError,
        InternalError, UnavailableError, DataLossError, UnauthenticatedError,
    )
}


# How grpc-core words a connection whose two ends disagree about TLS: a TLS server closes a
# plaintext client's connection at once; a TLS client reads a plaintext answer as a bad record.
_PLAINTEXT_TO_TLS = "Socket closed"
_TLS_TO_PLAINTEXT = "WRONG_VERSION_NUMBER"
TLS_EXPECTED_HINT = ("the server may expect TLS: connect with tls=TLS.from_files(ca) "
                     "(CLI: --tls-ca or CELESTIAL_TLS_CA)")
TLS_UNEXPECTED_HINT = "the server may not serve TLS: connect without tls"
NOT_ANSWERING_HINT = ("no Celestial Memory server is answering at the client's target: start one "
                      "with `make run` or `celestial serve`, or connect to the host:port it "
                      "serves on")


def _names_tls(details: str) -> bool:
    return TLS_EXPECTED_HINT in details or TLS_UNEXPECTED_HINT in details


def _transport_hint(code: grpc.StatusCode, details: str, tls: bool | None) -> str:
    """``details`` with a hint when a connection failed the way a TLS mismatch fails; ``tls``:
    whether this client connected with TLS (None: unknown, a channel of the caller's own)."""
    if code != grpc.StatusCode.UNAVAILABLE or tls is None:
        return details
    if not tls and _PLAINTEXT_TO_TLS in details:
        return f"{details} ({TLS_EXPECTED_HINT})"
    if tls and _TLS_TO_PLAINTEXT in details.upper():
        return f"{details} ({TLS_UNEXPECTED_HINT})"
    return details


def from_rpc_error(err: grpc.RpcError, tls: bool | None = None) -> CelestialClientError:
    """The client's error for ``err``; ``tls`` (whether the channel uses TLS, when known) lets
    a failed connection hint at a TLS mismatch."""
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    details = (err.details() if hasattr(err, "details") else None) or str(code)
    details = _transport_hint(code, details, tls)
    reason: str | None = None
    metadata: dict[str, str] = {}
    violations: tuple[FieldViolation, ...] = ()
    retry_after: float | None = None
    try:
        status = rpc_status.from_call(err)  # type: ignore[arg-type]
    except (ValueError, AttributeError):  # details that do not match the status: ignored
        status = None
    for any_ in status.details if status is not None else ():
        info, bad, retry = (error_details_pb2.ErrorInfo(), error_details_pb2.BadRequest(),
                            error_details_pb2.RetryInfo())
        if any_.Unpack(info):
            reason, metadata = info.reason, dict(info.metadata)
        elif any_.Unpack(bad):
            violations = tuple(FieldViolation(v.field, v.description)
                               for v in bad.field_violations)
        elif any_.Unpack(retry):
            retry_after = retry.retry_delay.ToNanoseconds() / 1e9
    cls = _BY_CODE.get(code, UnknownError)
    return cls(details, code, reason=reason, violations=violations, retry_after=retry_after,
               metadata=metadata)
