"""Python client of the Celestial Memory gRPC service (no torch or Qdrant needed)."""

from celestial_client.client import AsyncCelestialClient, CelestialClient
from celestial_client.connection import TLS
from celestial_client.errors import (
    CelestialClientError,
    DeadlineExceededError,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
)
from celestial_client.types import (
    Memory,
    RebalanceReport,
    RecallResult,
    ScoreBreakdown,
    Stats,
    StoreItem,
    Zone,
    ZoneEvent,
    ZoneStats,
)

__all__ = [
    "TLS",
    "AsyncCelestialClient",
    "CelestialClient",
    "CelestialClientError",
    "DeadlineExceededError",
    "FailedPreconditionError",
    "InternalError",
    "InvalidArgumentError",
    "Memory",
    "NotFoundError",
    "PermissionDeniedError",
    "RebalanceReport",
    "RecallResult",
    "ResourceExhaustedError",
    "ScoreBreakdown",
    "Stats",
    "StoreItem",
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
    "Zone",
    "ZoneEvent",
    "ZoneStats",
]
