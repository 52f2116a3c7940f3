"""The client's one exception tree, mirroring gRPC status codes.

    CelestialClientError (code, details)
    ├── InvalidArgumentError       INVALID_ARGUMENT
    ├── NotFoundError              NOT_FOUND
    ├── UnauthenticatedError       UNAUTHENTICATED
    ├── PermissionDeniedError      PERMISSION_DENIED
    ├── ResourceExhaustedError     RESOURCE_EXHAUSTED
    ├── UnavailableError           UNAVAILABLE
    ├── DeadlineExceededError      DEADLINE_EXCEEDED
    ├── UnimplementedError         UNIMPLEMENTED
    └── InternalError              INTERNAL and anything else
"""

from __future__ import annotations

import grpc


class CelestialClientError(Exception):
    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, details: str, code: grpc.StatusCode | None = None) -> None:
        super().__init__(details)
        self.details = details
        if code is not None:
            self.code = code


class InvalidArgumentError(CelestialClientError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFoundError(CelestialClientError):
    code = grpc.StatusCode.NOT_FOUND


class UnauthenticatedError(CelestialClientError):
    code = grpc.StatusCode.UNAUTHENTICATED


class PermissionDeniedError(CelestialClientError):
    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhaustedError(CelestialClientError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class UnavailableError(CelestialClientError):
    code = grpc.StatusCode.UNAVAILABLE


class DeadlineExceededError(CelestialClientError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class UnimplementedError(CelestialClientError):
    code = grpc.StatusCode.UNIMPLEMENTED


class FailedPreconditionError(CelestialClientError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class InternalError(CelestialClientError):
    code = grpc.StatusCode.INTERNAL


_BY_CODE: dict[grpc.StatusCode, type[CelestialClientError]] = {
    cls.code: cls
    for cls in (
        InvalidArgumentError, NotFoundError, UnauthenticatedError, PermissionDeniedError,
        ResourceExhaustedError, UnavailableError, DeadlineExceededError, UnimplementedError,
        FailedPreconditionError, InternalError,
    )
}


def from_rpc_error(err: grpc.RpcError) -> CelestialClientError:
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    details = (err.details() if hasattr(err, "details") else None) or str(code)
    cls = _BY_CODE.get(code, InternalError)
    return cls(details, code)
