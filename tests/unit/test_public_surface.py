"""The client's public surface is pinned: a change here is a change to users."""

from __future__ import annotations

import inspect
from pathlib import Path

import celestial_client
from celestial_client import AsyncCelestialClient, CelestialClient

METHODS = ["cancel_operation", "close", "consolidate", "context", "delete", "entities", "entity",
           "export", "feedback", "get", "get_operation",
           "import_memories", "iter_memories", "ledger", "ledger_page", "list_operations",
           "list_page", "observe", "policy", "rebalance",
           "recall", "recent", "recent_page", "reflect", "relate", "related", "reset_policy",
           "restore", "server_config",
           "set_clock", "start_reflection", "stats", "store", "store_batch", "unrelate",
           "update", "watch_operation", "with_options"]


def test_exports_are_pinned() -> None:
    assert sorted(celestial_client.__all__) == [
        "AbortedError",
        "AdminEvent",
        "AlreadyExistsError",
        "AsyncCelestialClient",
        "CallCancelledError",
        "CelestialClient",
        "CelestialClientError",
        "Consolidation",
        "DataLossError",
        "DeadlineExceededError",
        "Entity",
        "EntityProfile",
        "EntitySummary",
        "ExportedMemory",
        "FailedPreconditionError",
        "FieldViolation",
        "Hop",
        "ImportResult",
        "Insight",
        "InternalError",
        "InvalidArgumentError",
        "LedgerPage",
        "MEMORY_TYPES",
        "Memory",
        "MergedRepeat",
        "NextMove",
        "NotFoundError",
        "Observation",
        "Operation",
        "OperationError",
        "OutOfRangeError",
        "Page",
        "PeerSharing",
        "PermissionDeniedError",
        "PolicyDecision",
        "PolicySharing",
        "PolicyStatus",
        "PolicyTrace",
        "PromptContext",
        "RebalanceReport",
        "RecallResult",
        "Reflection",
        "RelatedMemory",
        "Relation",
        "ResourceExhaustedError",
        "RetryPolicy",
        "ScoreBreakdown",
        "ServerSetting",
        "Stats",
        "StoreItem",
        "TLS",
        "UnauthenticatedError",
        "UnavailableError",
        "UnimplementedError",
        "UnknownError",
        "Via",
        "Zone",
        "ZoneEvent",
        "ZoneStats",
    ]


def test_sync_and_async_clients_have_the_same_methods() -> None:
    for cls in (CelestialClient, AsyncCelestialClient):
        public = sorted(n for n, _ in inspect.getmembers(cls) if not n.startswith("_"))
        assert public == METHODS, cls
    for name in METHODS:
        sync_params = list(inspect.signature(getattr(CelestialClient, name)).parameters)
        async_params = list(inspect.signature(getattr(AsyncCelestialClient, name)).parameters)
        assert sync_params == async_params, name


def test_errors_mirror_status_codes() -> None:
    import grpc
    from celestial_client.errors import from_rpc_error

    class Fake(grpc.RpcError):
        def code(self) -> grpc.StatusCode:
            return grpc.StatusCode.NOT_FOUND

        def details(self) -> str:
            return "memory x not found"

    err = from_rpc_error(Fake())
    assert isinstance(err, celestial_client.NotFoundError)
    assert err.code == grpc.StatusCode.NOT_FOUND and err.details == "memory x not found"


def test_client_imports_without_server_dependencies() -> None:
    import subprocess
    import sys

    code = (
        "import sys, celestial_client, celestial_client.cli\n"
        "heavy = {'torch', 'qdrant_client', 'qdrant_edge', 'sentence_transformers', 'numpy'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_status_code_has_its_own_error() -> None:
    import grpc
    from celestial_client.errors import from_rpc_error

    for status in grpc.StatusCode:
        if status == grpc.StatusCode.OK:
            continue

        class Fake(grpc.RpcError):
            def code(self, s: grpc.StatusCode = status) -> grpc.StatusCode:
                return s

            def details(self) -> str:
                return "x"

        err = from_rpc_error(Fake())
        assert type(err).code == status and err.reason is None and err.field is None


def test_docs_name_every_agent_tool() -> None:
    from celestial_client.agent_tools import TOOLS

    page = (Path(__file__).resolve().parents[2] / "docs" / "agents.md").read_text()
    assert [t.name for t in TOOLS if f"`{t.name}`" not in page] == []
