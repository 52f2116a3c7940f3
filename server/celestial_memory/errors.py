"""The service's one exception tree. ``api/grpc/status.py`` maps it to status codes, in one place.

    CelestialError                    INTERNAL (message not leaked)
    ├── InvalidArgument(field)        INVALID_ARGUMENT
    ├── Unauthenticated               UNAUTHENTICATED
    ├── RetryLater                    (with RetryInfo)
    │   ├── ResourceExhausted         RESOURCE_EXHAUSTED
    │   │   ├── TooManyCalls          RESOURCE_EXHAUSTED
    │   │   └── ModelBudgetSpent      RESOURCE_EXHAUSTED (reason MODEL_BUDGET)
    │   ├── StoreUnavailable          UNAVAILABLE
    │   ├── ModelUnavailable          UNAVAILABLE
    │   └── Interrupted               ABORTED
    ├── NotFound                      NOT_FOUND
    ├── AlreadyExists(field)          ALREADY_EXISTS
    ├── PermissionDenied              PERMISSION_DENIED
    ├── FailedPrecondition            FAILED_PRECONDITION
    │   └── Immutable                 FAILED_PRECONDITION (reason IMMUTABLE)
    ├── SchemaMismatch                FAILED_PRECONDITION
    ├── Cancelled                     CANCELLED
    └── DeadlineExceeded              DEADLINE_EXCEEDED
"""

from __future__ import annotations


class CelestialError(Exception):
    """Root of every error the service raises on purpose."""


class InvalidArgument(CelestialError):
    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class Unauthenticated(CelestialError):
    """No API key, or one that is unknown, revoked or expired."""


class RetryLater(CelestialError):
    """A refusal that a later attempt may not meet; ``retry_after_s``: when to try again (sent
    as RetryInfo)."""

    def __init__(self, message: str, retry_after_s: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class ResourceExhausted(RetryLater):
    """A limit was reached (a key's request rate)."""


class TooManyCalls(ResourceExhausted):
    """Too many calls or streams open at once (the server's, or one caller's)."""


class NotFound(CelestialError):
    pass


class AlreadyExists(CelestialError):
    """A create-only write named an id that is taken (``field``: where in the request)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


class PermissionDenied(CelestialError):
    pass


class FailedPrecondition(CelestialError):
    """The server is not in the state the call needs (e.g. the admin clock is off)."""


class Immutable(FailedPrecondition):
    """The memory is immutable: it is not updated, replaced or merged into (understanding/)."""

    def __init__(self, memory_id: str, what: str) -> None:
        super().__init__(f"memory {memory_id} is immutable: {what}")
        self.memory_id = memory_id


class SchemaMismatch(CelestialError):
    """An existing collection has another shape (dimension, vectors, index types)."""


class Cancelled(CelestialError):
    """The caller cancelled the call, or the server stopped before it finished."""


class DeadlineExceeded(CelestialError):
    """The call's deadline passed before its work was done."""


class StoreUnavailable(RetryLater):
    """The storage backend cannot be reached or refused the operation."""


class ModelUnavailable(RetryLater):
    """The model endpoint failed, timed out or answered something unusable."""


class ModelBudgetSpent(ResourceExhausted):
    """The tenant spent its model calls or tokens of the minute (understanding/budget.py)."""


class Interrupted(RetryLater):
    """Work the server had started ended with the server (a stop or a restart), not because of
    anything in it: starting it again may succeed."""
