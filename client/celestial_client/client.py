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

import copy
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self, TypedDict, TypeVar, Unpack

import grpc

from celestial_client import _convert as cv
from celestial_client.connection import TLS, Connection, RetryPolicy, key_metadata
from celestial_client.errors import from_rpc_error
from celestial_client.types import (
    Consolidation,
    ExportedMemory,
    ImportResult,
    LedgerPage,
    Memory,
    Page,
    PromptContext,
    RebalanceReport,
    RecallResult,
    Stats,
    StoreItem,
    Zone,
    ZoneEvent,
)
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc

# An API key, or a function that returns the current one (called for every call: tokens that
# rotate).
Credential = str | Callable[[], str]
MAX_PAGE = 1000  # the server's largest page
T = TypeVar("T")


class Filters(TypedDict, total=False):
    zones: Iterable[Zone | str]
    tags_any: Sequence[str]
    tags_all: Sequence[str]
    session_id: str
    agent_id: str
    created_after: datetime | float
    created_before: datetime | float
    recalled_after: datetime | float
    recalled_before: datetime | float
    min_importance: float
    metadata: Mapping[str, str]


class RecallOptions(Filters, total=False):
    reinforce: bool
    context: str
    query_vector: Sequence[float]
    min_relevance: float
    ignore_zones: bool
    include_archived: bool  # search the archive (forgotten memories) too
    deep: bool  # the archive only when the zones fall short; unset: the server's default


class UpdateOptions(TypedDict, total=False):
    content: str
    importance: float
    tags: Sequence[str]
    metadata: Mapping[str, str]
    pinned: bool
    vector: Sequence[float]


class _Unset:
    """The default of ``with_options(timeout=...)``, where None means "no deadline"."""


UNSET = _Unset()


def _first(limit: int, page: Callable[[int, str], tuple[list[T], str]]) -> list[T]:
    """The first ``limit`` items of a paged list: ``page(size, token)`` answers one page's
    items and the next token ("" at the end)."""
    out: list[T] = []
    token = ""
    while len(out) < limit:
        items, token = page(min(limit - len(out), MAX_PAGE), token)
        out += items
        if not token:
            break
    return out[:limit]


def _item(content: str | StoreItem, fields: Mapping[str, Any]) -> StoreItem:
    return content if isinstance(content, StoreItem) else StoreItem(content=content, **fields)


class _Base:
    """What both clients share: the tenant, the credentials and metadata sent with every call,
    per-call options and the requests."""

    def __init__(
        self, tenant: str, timeout: float | None, api_key: Credential | None,
        metadata: Sequence[tuple[str, str]], wait_for_ready: bool,
    ) -> None:
        self.tenant = tenant
        self.timeout = timeout
        self.wait_for_ready = wait_for_ready
        self._api_key = api_key
        self._extra = tuple(metadata)

    def _metadata(self) -> tuple[tuple[str, str], ...]:
        key = self._api_key() if callable(self._api_key) else self._api_key
        return key_metadata(key) + self._extra

    def _options(self, timeout: float | _Unset | None = UNSET) -> dict[str, Any]:
        return {"timeout": self.timeout if isinstance(timeout, _Unset) else timeout,
                "metadata": self._metadata(), "wait_for_ready": self.wait_for_ready}

    def with_options(
        self, *, timeout: float | _Unset | None = UNSET, wait_for_ready: bool | None = None,
        metadata: Sequence[tuple[str, str]] | None = None, tenant: str | None = None,
    ) -> Self:
        """This client on the same connection with other per-call options: ``timeout``
        (seconds; None: no deadline), ``wait_for_ready`` (wait while the server is unreachable
        instead of failing at once), more ``metadata``, another ``tenant``."""
        other = copy.copy(self)
        if not isinstance(timeout, _Unset):
            other.timeout = timeout
        if wait_for_ready is not None:
            other.wait_for_ready = wait_for_ready
        if metadata is not None:
            other._extra = self._extra + tuple(metadata)
        if tenant is not None:
            other.tenant = tenant
        return other

    def _context(self, query: str, max_tokens: int, limit: int,
                 opts: RecallOptions) -> pb.ContextRequest:
        return pb.ContextRequest(recall=cv.recall_request(self.tenant, query, limit, **opts),
                                 max_tokens=max_tokens)

    def _filter(self, filters: Filters) -> pb.RecallFilter:
        return cv.recall_request(self.tenant, "", 1, **filters).filter

    def _store(self, content: str | StoreItem, fields: Mapping[str, Any]) -> pb.StoreRequest:
        return cv.store_request(self.tenant, _item(content, fields))

    def _rebalance(self, dry_run: bool, full: bool, forget: bool) -> pb.RebalanceRequest:
        return pb.RebalanceRequest(tenant=self.tenant, dry_run=dry_run, full=full,
                                   no_forget=not forget)

    def _record(
        self, r: ExportedMemory | pb.ExportedMemory, first: bool, replace: bool
    ) -> pb.ExportedMemory:
        """One record of an import stream: the first names the tenant and whether to replace."""
        rec = cv.exported_record(r)
        rec.tenant, rec.replace = (self.tenant, replace) if first else ("", False)
        return rec


class CelestialClient(_Base):
    """Blocking client. ``target`` is host:port. ``tenant`` is sent with every call (with an API
    key, empty means the key's own tenant). ``api_key`` (a string, or a function returning the
    current key) is sent as ``authorization: Bearer``. ``tls`` connects with TLS (and a client
    certificate, for mTLS). ``timeout`` is every call's deadline in seconds (None: none; see
    ``with_options``). ``retry``: gRPC's retries on UNAVAILABLE (None: off). ``keepalive_s``:
    ping an idle connection this often. ``options``: more gRPC channel options. ``channel``: a
    channel of your own instead (then tls, retry, keepalive and options do not apply)."""

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
        self._channel = channel or Connection(
            target, tls, retry, keepalive_s, max_message_bytes, tuple(options)).channel()
        self._stub = pb_grpc.MemoryServiceStub(self._channel)

    def _call(self, method: str, request: Any, timeout: float | _Unset | None = UNSET) -> Any:
        try:
            return getattr(self._stub, method)(request, **self._options(timeout))
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    def store(
        self, content: str | StoreItem, *, importance: float | None = None,
        tags: Sequence[str] = (), session_id: str = "", agent_id: str = "",
        metadata: Mapping[str, str] | None = None, created_at: datetime | float | None = None,
        vector: Sequence[float] | None = None, id: str = "", pinned: bool = False,
        context: str = "", request_id: str = "", upsert: bool = False,
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
                  "upsert": upsert}
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

    def context(self, query: str, max_tokens: int, limit: int = 0,
                **opts: Unpack[RecallOptions]) -> PromptContext:
        """The memories most relevant to ``query`` as a block for a prompt, within
        ``max_tokens`` (the server's tokenizer): grouped by zone, dated, repeats folded, saying
        what it left out. ``limit``: how many memories to consider (0: the server's 30); the
        options are recall's. Reinforces the memories the block holds."""
        return cv.prompt_context(self._call("Context", self._context(query, max_tokens, limit,
                                                                     opts)))

    def get(self, memory_id: str) -> Memory:
        return cv.memory(self._call("Get", pb.GetRequest(tenant=self.tenant, id=memory_id)).memory)

    def update(self, memory_id: str, **changes: Unpack[UpdateOptions]) -> Memory:
        resp = self._call("Update", cv.update_request(self.tenant, memory_id, **changes))
        return cv.memory(resp.memory)

    def delete(self, memory_id: str) -> bool:
        return bool(self._call("Delete", pb.DeleteRequest(tenant=self.tenant, id=memory_id)).deleted)

    def stats(self) -> Stats:
        return cv.stats(self._call("Stats", pb.StatsRequest(tenant=self.tenant)))

    def restore(self, memory_id: str) -> Memory:
        """Bring an archived (forgotten) memory back into the zones."""
        return cv.memory(self._call("Restore", pb.RestoreRequest(tenant=self.tenant,
                                                                 id=memory_id)).memory)

    def consolidate(self, dry_run: bool = True) -> Consolidation:
        """Merge the repeats among memories stored before (admin). A dry run by default: see
        what would merge, then call again with ``dry_run=False``."""
        return cv.consolidation(self._call("Consolidate", pb.ConsolidateRequest(
            tenant=self.tenant, dry_run=dry_run)))

    def rebalance(
        self, dry_run: bool = False, full: bool = False, forget: bool = True
    ) -> RebalanceReport:
        return cv.rebalance(self._call("Rebalance", self._rebalance(dry_run, full, forget)))

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
            raise from_rpc_error(err) from None

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


class AsyncCelestialClient(_Base):
    """asyncio client with the same methods and options as ``CelestialClient``, awaited."""

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
        channel: grpc.aio.Channel | None = None,
    ) -> None:
        super().__init__(tenant, timeout, api_key, metadata, wait_for_ready)
        self._channel = channel or Connection(
            target, tls, retry, keepalive_s, max_message_bytes, tuple(options)).aio_channel()
        self._stub = pb_grpc.MemoryServiceStub(self._channel)

    async def _call(
        self, method: str, request: Any, timeout: float | _Unset | None = UNSET
    ) -> Any:
        try:
            return await getattr(self._stub, method)(request, **self._options(timeout))
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    async def store(
        self, content: str | StoreItem, *, importance: float | None = None,
        tags: Sequence[str] = (), session_id: str = "", agent_id: str = "",
        metadata: Mapping[str, str] | None = None, created_at: datetime | float | None = None,
        vector: Sequence[float] | None = None, id: str = "", pinned: bool = False,
        context: str = "", request_id: str = "", upsert: bool = False,
    ) -> Memory:
        fields = {"importance": importance, "tags": list(tags), "session_id": session_id,
                  "agent_id": agent_id, "metadata": dict(metadata or {}),
                  "created_at": created_at, "vector": list(vector) if vector else None,
                  "id": id, "pinned": pinned, "context": context, "request_id": request_id,
                  "upsert": upsert}
        return cv.memory((await self._call("Store", self._store(content, fields))).memory)

    async def store_batch(self, items: Iterable[str | StoreItem]) -> list[str]:
        reqs = [self._store(i, {}) for i in items]
        return list((await self._call("StoreBatch", iter(reqs))).ids)

    async def recall(
        self, query: str = "", limit: int = 10, **opts: Unpack[RecallOptions]
    ) -> list[RecallResult]:
        resp = await self._call("Recall", cv.recall_request(self.tenant, query, limit, **opts))
        return cv.recall_results(resp)

    async def context(self, query: str, max_tokens: int, limit: int = 0,
                      **opts: Unpack[RecallOptions]) -> PromptContext:
        return cv.prompt_context(await self._call("Context", self._context(
            query, max_tokens, limit, opts)))

    async def get(self, memory_id: str) -> Memory:
        resp = await self._call("Get", pb.GetRequest(tenant=self.tenant, id=memory_id))
        return cv.memory(resp.memory)

    async def update(self, memory_id: str, **changes: Unpack[UpdateOptions]) -> Memory:
        resp = await self._call("Update", cv.update_request(self.tenant, memory_id, **changes))
        return cv.memory(resp.memory)

    async def delete(self, memory_id: str) -> bool:
        resp = await self._call("Delete", pb.DeleteRequest(tenant=self.tenant, id=memory_id))
        return bool(resp.deleted)

    async def stats(self) -> Stats:
        return cv.stats(await self._call("Stats", pb.StatsRequest(tenant=self.tenant)))

    async def restore(self, memory_id: str) -> Memory:
        resp = await self._call("Restore", pb.RestoreRequest(tenant=self.tenant, id=memory_id))
        return cv.memory(resp.memory)

    async def consolidate(self, dry_run: bool = True) -> Consolidation:
        return cv.consolidation(await self._call("Consolidate", pb.ConsolidateRequest(
            tenant=self.tenant, dry_run=dry_run)))

    async def rebalance(
        self, dry_run: bool = False, full: bool = False, forget: bool = True
    ) -> RebalanceReport:
        return cv.rebalance(await self._call("Rebalance", self._rebalance(dry_run, full, forget)))

    async def recent_page(
        self, page_size: int = 10, page_token: str = "", *, archived: bool = False,
        **filters: Unpack[Filters],
    ) -> Page[Memory]:
        resp = await self._call("Recent", pb.RecentRequest(
            tenant=self.tenant, page_size=page_size, page_token=page_token,
            filter=self._filter(filters), archived=archived))
        return Page([cv.memory(m) for m in resp.memories], resp.next_page_token)

    async def recent(
        self, limit: int = 10, *, archived: bool = False, **filters: Unpack[Filters]
    ) -> list[Memory]:
        out: list[Memory] = []
        token = ""
        while len(out) < limit:
            page = await self.recent_page(min(limit - len(out), MAX_PAGE), token,
                                          archived=archived, **filters)
            out += page.items
            if not (token := page.next_page_token):
                break
        return out[:limit]

    async def list_page(
        self, page_size: int = 100, page_token: str = "", *, archived: bool = False,
        **filters: Unpack[Filters],
    ) -> Page[Memory]:
        resp = await self._call("List", pb.ListRequest(
            tenant=self.tenant, page_size=page_size, page_token=page_token,
            filter=self._filter(filters), archived=archived))
        return Page([cv.memory(m) for m in resp.memories], resp.next_page_token)

    async def iter_memories(
        self, page_size: int = 500, *, archived: bool = False, **filters: Unpack[Filters]
    ) -> AsyncIterator[Memory]:
        token = ""
        while True:
            page = await self.list_page(page_size, token, archived=archived, **filters)
            for m in page.items:
                yield m
            if not (token := page.next_page_token):
                return

    async def export(self, after_id: str = "") -> AsyncIterator[ExportedMemory]:
        call = self._stub.Export(pb.ExportRequest(tenant=self.tenant, after_id=after_id),
                                 **self._options(None))
        try:
            async for r in call:
                yield cv.exported(r)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    async def import_memories(
        self,
        records: Iterable[ExportedMemory | pb.ExportedMemory]
        | AsyncIterator[ExportedMemory | pb.ExportedMemory],
        replace: bool = False,
    ) -> ImportResult:
        async def stream() -> AsyncIterator[pb.ExportedMemory]:
            first = True
            if isinstance(records, AsyncIterator):
                async for r in records:
                    yield self._record(r, first, replace)
                    first = False
            else:
                for r in records:
                    yield self._record(r, first, replace)
                    first = False

        resp = await self._call("Import", stream(), None)
        return ImportResult(int(resp.imported), int(resp.skipped))

    async def set_clock(self, now: datetime | float) -> datetime:
        resp = await self._call("SetClock", pb.SetClockRequest(now=cv.timestamp(now)))
        return cv.to_datetime(resp.now)

    async def ledger_page(
        self, since: datetime | float | None = None, page_size: int = 100,
        page_token: str = "", memory_id: str = "",
    ) -> LedgerPage:
        req = cv.ledger_request(self.tenant, since, page_size, memory_id, page_token)
        return cv.ledger_page(await self._call("Ledger", req))

    async def ledger(
        self, since: datetime | float | None = None, limit: int = 100, memory_id: str = ""
    ) -> list[ZoneEvent]:
        out: list[ZoneEvent] = []
        token = ""
        while len(out) < limit:
            page = await self.ledger_page(since, min(limit, MAX_PAGE), token, memory_id)
            out += page.events
            if not (token := page.next_page_token):
                break
        return out[:limit]

    async def close(self) -> None:
        await self._channel.close(None)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
