"""Typed Python clients for the Celestial Memory service, synchronous and asynchronous.

    with CelestialClient("localhost:50051", api_key=key, tls=TLS.from_files("ca.pem")) as client:
        m = client.store("Alice prefers espresso", importance=0.8, tags=["prefs"])
        for r in client.recall("what does Alice drink?", limit=5):
            print(r.zone, r.relevance, r.content)
        quick = client.with_options(timeout=0.5)  # per-call options, same connection

Errors are raised as ``celestial_client.errors.CelestialClientError`` subclasses. Calls that
fail with UNAVAILABLE are retried by gRPC itself (``RetryPolicy``); every store carries an id or
a request_id, so a retried store creates its memory once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self, Unpack

import grpc

from celestial_client._core import convert as cv
from celestial_client._core import operations as ops
from celestial_client._core.base import (
    MAX_PAGE,
    UNSET,
    Credential,
    Filters,
    RecallOptions,
    UpdateOptions,
    _all,
    _Base,
    _first,
    _Unset,
)
from celestial_client._core.policy import PolicyCalls
from celestial_client.aio import AsyncCelestialClient
from celestial_client.connection import TLS, Connection, RetryPolicy
from celestial_client.errors import from_rpc_error
from celestial_client.types import (
    Consolidation,
    Entity,
    EntityProfile,
    ExportedMemory,
    ImportResult,
    LedgerPage,
    Memory,
    Operation,
    Page,
    PromptContext,
    RebalanceReport,
    RecallResult,
    Reflection,
    RelatedMemory,
    Relation,
    ServerSetting,
    Stats,
    StoreItem,
    ZoneEvent,
)
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc

# The async client and the shared option types stay importable from here, where they were first.
__all__ = [
    "MAX_PAGE",
    "UNSET",
    "AsyncCelestialClient",
    "CelestialClient",
    "Credential",
    "Filters",
    "RecallOptions",
    "UpdateOptions",
]


class CelestialClient(PolicyCalls, _Base):
    """Blocking client. ``target`` is host:port. ``tenant`` is sent with every call (with an API
    key, empty means the key's own tenant). ``api_key`` (a string, or a function returning the
    current key) is sent as ``authorization: Bearer``. ``tls`` connects with TLS (and a client
    certificate, for mTLS). ``timeout`` is every call's deadline in seconds (None: none; see
    ``with_options``). ``retry``: gRPC's retries on UNAVAILABLE (None: off). ``keepalive_s``:
    ping an idle connection this often. ``options``: more gRPC channel options. ``channel``: a
    channel of your own instead (then tls, retry, keepalive and options do not apply). The turn
    policy's calls (observe, policy, reset_policy) are ``PolicyCalls``'."""

    def __init__(
        self,
        target: str = "localhost:50051",
        *,
        tenant: str = "",
        timeout: float | None = 30.0,
        api_key: Credential | None = None,
        metadata: Sequence[tuple[str, str]] = (),
        tls: TLS | None = None,
        retry: RetryPolicy | None = RetryPolicy(),  # noqa: B008 (frozen, shared safely)
        keepalive_s: float | None = 60.0,
        wait_for_ready: bool = False,
        max_message_bytes: int = 16 * 1024 * 1024,
        options: Sequence[tuple[str, Any]] = (),
        channel: grpc.Channel | None = None,
    ) -> None:
        super().__init__(tenant, timeout, api_key, metadata, wait_for_ready)
        self._tls = None if channel is not None else tls is not None
        self._channel = channel or Connection(
            target, tls, retry, keepalive_s, max_message_bytes, tuple(options)).channel()
        self._stub = pb_grpc.MemoryServiceStub(self._channel)

    def _call(self, method: str, request: Any, timeout: float | _Unset | None = UNSET) -> Any:
        try:
            return getattr(self._stub, method)(request, **self._options(timeout))
        except grpc.RpcError as err:
            raise from_rpc_error(err, self._tls) from None

    def store(
        self, content: str | StoreItem, *, importance: float | None = None,
        tags: Sequence[str] = (), session_id: str = "", agent_id: str = "",
        metadata: Mapping[str, str] | None = None, created_at: datetime | float | None = None,
        vector: Sequence[float] | None = None, id: str = "", pinned: bool = False,
        context: str = "", request_id: str = "", upsert: bool = False,
        memory_type: str = "", immutable: bool = False,
    ) -> Memory:
        """Store one memory (or a ``StoreItem``). With ``id`` or ``request_id``, storing again
        returns the memory already there (same content) or raises AlreadyExistsError; with
        neither, the client makes a request_id so that retries are safe. ``upsert`` replaces
        the memory this tenant holds under the id. Content that repeats a live memory (the
        server's merge rule) returns that memory, which lists the repeat in ``merged``."""
        fields = {"importance": importance, "tags": list(tags), "session_id": session_id,
                  "agent_id": agent_id, "metadata": dict(metadata or {}),
                  "created_at": created_at, "vector": list(vector) if vector else None,
                  "id": id, "pinned": pinned, "context": context, "request_id": request_id,
                  "upsert": upsert, "memory_type": memory_type, "immutable": immutable}
        return cv.memory(self._call("Store", self._store(content, fields)).memory)

    def store_batch(self, items: Iterable[str | StoreItem]) -> list[str]:
        """Store many memories in one stream; all or nothing. Returns their ids in order."""
        reqs = [self._store(i, {}) for i in items]  # built once: a retry resends the same
        return list(self._call("StoreBatch", iter(reqs)).ids)

    def recall(self, query: str = "", limit: int = 10, **opts: Unpack[RecallOptions]) -> list[
        RecallResult
    ]:
        resp = self._call("Recall", cv.recall_request(self.tenant, query, limit, **opts))
        return cv.recall_results(resp)

    def context(self, query: str, max_tokens: int, limit: int = 0, *, neighbours: bool = False,
                **opts: Unpack[RecallOptions]) -> PromptContext:
        """The memories most relevant to ``query`` as a block for a prompt, within
        ``max_tokens`` (the server's tokenizer): grouped by zone, dated, repeats folded, saying
        what it left out. ``limit``: how many memories to consider (0: the server's 30);
        ``neighbours``: bring each included memory's related memories (one step) too, as far
        as the budget allows; the options are recall's. Reinforces the memories the block
        holds."""
        return cv.prompt_context(self._call("Context", self._context(query, max_tokens, limit,
                                                                     neighbours, opts)))

    def get(self, memory_id: str) -> Memory:
        return cv.memory(self._call("Get", pb.GetRequest(tenant=self.tenant, id=memory_id)).memory)

    def update(self, memory_id: str, **changes: Unpack[UpdateOptions]) -> Memory:
        resp = self._call("Update", cv.update_request(self.tenant, memory_id, **changes))
        return cv.memory(resp.memory)

    def delete(self, memory_id: str) -> bool:
        return bool(self._call("Delete", pb.DeleteRequest(tenant=self.tenant, id=memory_id)).deleted)

    def feedback(self, memory_id: str, helpful: bool) -> Memory:
        """Say whether a memory (one a recall returned) helped: its importance moves toward 1
        or toward 0 and it is re-placed; the vote is a ledger event. Every call is a vote."""
        return cv.memory(self._call("Feedback", self._feedback(memory_id, helpful)).memory)

    def stats(self) -> Stats:
        return cv.stats(self._call("Stats", pb.StatsRequest(tenant=self.tenant)))

    def restore(self, memory_id: str) -> Memory:
        """Bring an archived (forgotten) memory back into the zones."""
        return cv.memory(self._call("Restore", pb.RestoreRequest(tenant=self.tenant,
                                                                 id=memory_id)).memory)

    def reflect(self, dry_run: bool = True, window: int = 0,
                entities: Sequence[str] = ()) -> Reflection:
        """Insights about the entities of the tenant's newest ``window`` memories (0: the
        server's default), by the server's model: stored as memories tagged "insight", related
        derived_from their sources, with a summary per entity (its profile's). A dry run by
        default: see what it would write, then call again with ``dry_run=False``. Without a
        model on the server: FailedPreconditionError. Starts the reflection as an operation and
        waits for it (``start_reflection`` and ``watch_operation``), so the client's timeout
        bounds each call, not the reflection; a failed one raises its error."""
        started = self.start_reflection(dry_run, window, entities)
        last = started
        try:
            for op in self.watch_operation(started.name):
                last = op
        except BaseException:  # interrupted (Ctrl-C, an error): stop it, as Reflect does
            if not last.done:
                with contextlib.suppress(Exception):
                    self.cancel_operation(started.name)
            raise
        return ops.result(last)

    def start_reflection(self, dry_run: bool = True, window: int = 0,
                         entities: Sequence[str] = (), request_id: str = "") -> Operation:
        """Start a reflection (``reflect``'s work) and return its operation at once: follow it
        with ``watch_operation`` or ``get_operation``, stop it with ``cancel_operation``.
        ``request_id``: starting again with the same one returns the same operation (the
        client makes one when none is given, so a retried start starts one reflection)."""
        req = ops.start_request(self.tenant, dry_run, window, entities, request_id)
        return ops.operation(self._call("StartReflection", req).operation)

    def get_operation(self, name: str) -> Operation:
        """One of the tenant's operations as it is now (NotFoundError when it has none)."""
        req = pb.GetOperationRequest(tenant=self.tenant, name=name)
        return ops.operation(self._call("GetOperation", req).operation)

    def watch_operation(self, name: str) -> Iterator[Operation]:
        """The operation now, then each time it changes, until it is done (the last one
        yielded). A stream has no deadline; one the server ends first is opened again."""
        req = pb.WatchOperationRequest(tenant=self.tenant, name=name)
        seen: Operation | None = None
        while True:
            last: Operation | None = None
            try:
                for r in self._stub.WatchOperation(req, **self._options(None)):
                    last = ops.operation(r.operation)
                    if last != seen:  # a reopened stream starts with the state already seen
                        seen = last
                        yield last
            except grpc.RpcError as err:
                raise from_rpc_error(err, self._tls) from None
            if last is None or last.done:
                return

    def cancel_operation(self, name: str) -> Operation:
        """Ask an operation to stop: one not yet writing ends at once with the error CANCELLED,
        one writing completes, one done stays as it was. Returns it after the attempt."""
        req = pb.CancelOperationRequest(tenant=self.tenant, name=name)
        return ops.operation(self._call("CancelOperation", req).operation)

    def list_operations(self, page_size: int = 0, page_token: str = "") -> Page[Operation]:
        """One page of the tenant's operations, newest first (0: the server's 20 a page)."""
        req = pb.ListOperationsRequest(tenant=self.tenant, page_size=page_size,
                                       page_token=page_token)
        return ops.operations_page(self._call("ListOperations", req))

    def consolidate(self, dry_run: bool = True) -> Consolidation:
        """Merge the repeats among memories stored before (admin). A dry run by default: see
        what would merge, then call again with ``dry_run=False``."""
        return cv.consolidation(self._call("Consolidate", pb.ConsolidateRequest(
            tenant=self.tenant, dry_run=dry_run)))

    def rebalance(
        self, dry_run: bool = False, full: bool = False, forget: bool = True
    ) -> RebalanceReport:
        return cv.rebalance(self._call("Rebalance", self._rebalance(dry_run, full, forget)))

    def relate(self, from_id: str, to_id: str, relation: str,
               weight: float | None = None) -> Relation:
        """Relate two memories of the tenant: a directed edge named ``relation`` (lower-case
        letters, digits, '_' or '-') from ``from_id`` to ``to_id``, weighing ``weight`` (0 to
        1; None: 1). Relating them again sets the weight. Returns the relation as ``from_id``
        holds it."""
        resp = self._call("Relate", self._relate(from_id, to_id, relation, weight))
        return cv.relation(resp.relation)

    def unrelate(self, from_id: str, to_id: str, relation: str = "") -> int:
        """Remove the relation from ``from_id`` to ``to_id`` (every one in that direction when
        ``relation`` is empty). Returns how many were removed (0 when none was there)."""
        return int(self._call("Unrelate", self._unrelate(from_id, to_id, relation)).removed)

    def related(
        self, id: str, depth: int = 1, relations: Sequence[str] = (), page_size: int = 0
    ) -> list[RelatedMemory]:
        """The memories a walk of ``depth`` steps (1 to 3) along relations reaches from memory
        ``id``, in either direction and only along ``relations`` when given, nearest first,
        each with its path; read ``page_size`` at a time (0: the server's 50). Nothing is
        reinforced."""
        def page(token: str) -> tuple[list[RelatedMemory], str]:
            resp = self._call("Related", self._related(id, depth, relations, page_size, token))
            return cv.related(resp), resp.next_page_token

        return _all(page)

    def entities(self, page_size: int = 0) -> list[Entity]:
        """The entities the tenant's memories mention (names, places, dates, numbers with
        units, quoted titles), most mentioned first; read ``page_size`` at a time (0: the
        server's 100)."""
        def page(token: str) -> tuple[list[Entity], str]:
            resp = self._call("Entities", self._entities(page_size, token))
            return [cv.entity(e) for e in resp.entities], resp.next_page_token

        return _all(page)

    def entity(self, entity_id: str) -> EntityProfile:
        """One entity's profile, by its id "<kind>:<key>" (NotFoundError when no memory
        mentions it)."""
        return cv.entity_profile(self._call("Entities", self._entity(entity_id)).profile)

    def recent_page(
        self, page_size: int = 10, page_token: str = "", *, archived: bool = False,
        **filters: Unpack[Filters],
    ) -> Page[Memory]:
        """One page of the newest memories (filters as for recall), newest first."""
        resp = self._call("Recent", pb.RecentRequest(
            tenant=self.tenant, page_size=page_size, page_token=page_token,
            filter=self._filter(filters), archived=archived))
        return Page([cv.memory(m) for m in resp.memories], resp.next_page_token)

    def recent(
        self, limit: int = 10, *, archived: bool = False, **filters: Unpack[Filters]
    ) -> list[Memory]:
        """The ``limit`` newest memories (e.g. of a ``session_id``), newest first, read a page at
        a time."""
        def page(size: int, token: str) -> tuple[list[Memory], str]:
            p = self.recent_page(size, token, archived=archived, **filters)
            return p.items, p.next_page_token

        return _first(limit, page)

    def list_page(
        self, page_size: int = 100, page_token: str = "", *, archived: bool = False,
        **filters: Unpack[Filters],
    ) -> Page[Memory]:
        """One page of the memories matching ``filters``, in id order."""
        resp = self._call("List", pb.ListRequest(
            tenant=self.tenant, page_size=page_size, page_token=page_token,
            filter=self._filter(filters), archived=archived))
        return Page([cv.memory(m) for m in resp.memories], resp.next_page_token)

    def iter_memories(
        self, page_size: int = 500, *, archived: bool = False, **filters: Unpack[Filters]
    ) -> Iterator[Memory]:
        """Every memory matching ``filters`` (``archived``: the archive's instead of the
        zones'), in id order, a page at a time."""
        token = ""
        while True:
            page = self.list_page(page_size, token, archived=archived, **filters)
            yield from page.items
            if not (token := page.next_page_token):
                return

    def export(self, after_id: str = "") -> Iterator[ExportedMemory]:
        """Every memory of the tenant with its vectors, in id order; resume after ``after_id``.
        The records go to ``import_memories`` (here or on another server) or to a file
        (``celestial export``). A stream has no deadline."""
        try:
            for r in self._stub.Export(pb.ExportRequest(tenant=self.tenant, after_id=after_id),
                                       **self._options(None)):
                yield cv.exported(r)
        except grpc.RpcError as err:
            raise from_rpc_error(err, self._tls) from None

    def import_memories(
        self, records: Iterable[ExportedMemory | pb.ExportedMemory], replace: bool = False
    ) -> ImportResult:
        """Write exported memories into this client's tenant. Ids it holds already are skipped
        (so an import can be sent again), or replaced with ``replace``."""
        stream = (self._record(r, i == 0, replace) for i, r in enumerate(records))
        resp = self._call("Import", stream, None)
        return ImportResult(int(resp.imported), int(resp.skipped))

    def set_clock(self, now: datetime | float) -> datetime:
        """Admin, for replays: set the server's clock (the server needs
        CELESTIAL_ADMIN_CLOCK=true, else FailedPrecondition)."""
        resp = self._call("SetClock", pb.SetClockRequest(now=cv.timestamp(now)))
        return cv.to_datetime(resp.now)

    def server_config(self) -> dict[str, ServerSetting]:
        """Admin, with a key for every tenant: the server's settings (``ServerSetting``)."""
        return cv.server_config(self._call("GetConfig", pb.GetConfigRequest()))

    def ledger_page(
        self, since: datetime | float | None = None, page_size: int = 100,
        page_token: str = "", memory_id: str = "",
    ) -> LedgerPage:
        """One page of the ledger, oldest first: zone events and admin calls."""
        req = cv.ledger_request(self.tenant, since, page_size, memory_id, page_token)
        return cv.ledger_page(self._call("Ledger", req))

    def ledger(
        self, since: datetime | float | None = None, limit: int = 100, memory_id: str = ""
    ) -> list[ZoneEvent]:
        """The first ``limit`` evictions and forgotten memories, oldest first."""
        def page(size: int, token: str) -> tuple[list[ZoneEvent], str]:
            p = self.ledger_page(since, size, token, memory_id)
            return p.events, p.next_page_token

        return _first(limit, page)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
