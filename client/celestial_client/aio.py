"""The asyncio client: ``CelestialClient``'s methods and options, awaited (``grpc.aio``).

    async with AsyncCelestialClient("localhost:50051", api_key=key) as client:
        await client.store("Alice prefers espresso")
        results = await client.recall("what does Alice drink?")

Also importable from ``celestial_client`` and ``celestial_client.client``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
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
    _Base,
    _Unset,
)
from celestial_client._core.policy import AsyncPolicyCalls
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


class AsyncCelestialClient(AsyncPolicyCalls, _Base):
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
        self._tls = None if channel is not None else tls is not None
        self._channel = channel or Connection(
            target, tls, retry, keepalive_s, max_message_bytes, tuple(options)).aio_channel()
        # The generated stub is untyped (mypy's override covers only the sync client's module).
        self._stub = pb_grpc.MemoryServiceStub(self._channel)  # type: ignore[no-untyped-call]

    async def _call(
        self, method: str, request: Any, timeout: float | _Unset | None = UNSET
    ) -> Any:
        try:
            return await getattr(self._stub, method)(request, **self._options(timeout))
        except grpc.RpcError as err:
            raise from_rpc_error(err, self._tls) from None

    async def store(
        self, content: str | StoreItem, *, importance: float | None = None,
        tags: Sequence[str] = (), session_id: str = "", agent_id: str = "",
        metadata: Mapping[str, str] | None = None, created_at: datetime | float | None = None,
        vector: Sequence[float] | None = None, id: str = "", pinned: bool = False,
        context: str = "", request_id: str = "", upsert: bool = False,
        memory_type: str = "", immutable: bool = False,
    ) -> Memory:
        fields = {"importance": importance, "tags": list(tags), "session_id": session_id,
                  "agent_id": agent_id, "metadata": dict(metadata or {}),
                  "created_at": created_at, "vector": list(vector) if vector else None,
                  "id": id, "pinned": pinned, "context": context, "request_id": request_id,
                  "upsert": upsert, "memory_type": memory_type, "immutable": immutable}
        return cv.memory((await self._call("Store", self._store(content, fields))).memory)

    async def store_batch(self, items: Iterable[str | StoreItem]) -> list[str]:
        reqs = [self._store(i, {}) for i in items]
        return list((await self._call("StoreBatch", iter(reqs))).ids)

    async def recall(
        self, query: str = "", limit: int = 10, **opts: Unpack[RecallOptions]
    ) -> list[RecallResult]:
        resp = await self._call("Recall", cv.recall_request(self.tenant, query, limit, **opts))
        return cv.recall_results(resp)

    async def context(self, query: str, max_tokens: int, limit: int = 0, *,
                      neighbours: bool = False, **opts: Unpack[RecallOptions]) -> PromptContext:
        return cv.prompt_context(await self._call("Context", self._context(
            query, max_tokens, limit, neighbours, opts)))

    async def get(self, memory_id: str) -> Memory:
        resp = await self._call("Get", pb.GetRequest(tenant=self.tenant, id=memory_id))
        return cv.memory(resp.memory)

    async def update(self, memory_id: str, **changes: Unpack[UpdateOptions]) -> Memory:
        resp = await self._call("Update", cv.update_request(self.tenant, memory_id, **changes))
        return cv.memory(resp.memory)

    async def delete(self, memory_id: str) -> bool:
        resp = await self._call("Delete", pb.DeleteRequest(tenant=self.tenant, id=memory_id))
        return bool(resp.deleted)

    async def feedback(self, memory_id: str, helpful: bool) -> Memory:
        """Say whether a memory (one a recall returned) helped: its importance moves toward 1
        or toward 0 and it is re-placed; the vote is a ledger event. Every call is a vote."""
        return cv.memory((await self._call("Feedback", self._feedback(memory_id, helpful))).memory)

    async def stats(self) -> Stats:
        return cv.stats(await self._call("Stats", pb.StatsRequest(tenant=self.tenant)))

    async def restore(self, memory_id: str) -> Memory:
        resp = await self._call("Restore", pb.RestoreRequest(tenant=self.tenant, id=memory_id))
        return cv.memory(resp.memory)

    async def reflect(self, dry_run: bool = True, window: int = 0,
                      entities: Sequence[str] = ()) -> Reflection:
        started = await self.start_reflection(dry_run, window, entities)
        last = started
        try:
            async for op in self.watch_operation(started.name):
                last = op
        except BaseException:  # cancelled, interrupted, an error: stop it, as Reflect does
            if not last.done:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.cancel_operation(started.name))
            raise
        return ops.result(last)

    async def start_reflection(self, dry_run: bool = True, window: int = 0,
                               entities: Sequence[str] = (), request_id: str = "") -> Operation:
        req = ops.start_request(self.tenant, dry_run, window, entities, request_id)
        return ops.operation((await self._call("StartReflection", req)).operation)

    async def get_operation(self, name: str) -> Operation:
        req = pb.GetOperationRequest(tenant=self.tenant, name=name)
        return ops.operation((await self._call("GetOperation", req)).operation)

    async def watch_operation(self, name: str) -> AsyncIterator[Operation]:
        req = pb.WatchOperationRequest(tenant=self.tenant, name=name)
        seen: Operation | None = None
        while True:
            last: Operation | None = None
            call = self._stub.WatchOperation(req, **self._options(None))
            try:
                async for r in call:
                    last = ops.operation(r.operation)
                    if last != seen:  # a reopened stream starts with the state already seen
                        seen = last
                        yield last
            except grpc.RpcError as err:
                raise from_rpc_error(err, self._tls) from None
            if last is None or last.done:
                return

    async def cancel_operation(self, name: str) -> Operation:
        req = pb.CancelOperationRequest(tenant=self.tenant, name=name)
        return ops.operation((await self._call("CancelOperation", req)).operation)

    async def list_operations(self, page_size: int = 0, page_token: str = "") -> Page[Operation]:
        req = pb.ListOperationsRequest(tenant=self.tenant, page_size=page_size,
                                       page_token=page_token)
        return ops.operations_page(await self._call("ListOperations", req))

    async def consolidate(self, dry_run: bool = True) -> Consolidation:
        return cv.consolidation(await self._call("Consolidate", pb.ConsolidateRequest(
            tenant=self.tenant, dry_run=dry_run)))

    async def rebalance(
        self, dry_run: bool = False, full: bool = False, forget: bool = True
    ) -> RebalanceReport:
        return cv.rebalance(await self._call("Rebalance", self._rebalance(dry_run, full, forget)))

    async def relate(self, from_id: str, to_id: str, relation: str,
                     weight: float | None = None) -> Relation:
        resp = await self._call("Relate", self._relate(from_id, to_id, relation, weight))
        return cv.relation(resp.relation)

    async def unrelate(self, from_id: str, to_id: str, relation: str = "") -> int:
        resp = await self._call("Unrelate", self._unrelate(from_id, to_id, relation))
        return int(resp.removed)

    async def related(
        self, id: str, depth: int = 1, relations: Sequence[str] = (), page_size: int = 0
    ) -> list[RelatedMemory]:
        out: list[RelatedMemory] = []
        token = ""
        while True:
            resp = await self._call("Related", self._related(id, depth, relations, page_size,
                                                             token))
            out += cv.related(resp)
            if not (token := resp.next_page_token):
                return out

    async def entities(self, page_size: int = 0) -> list[Entity]:
        out: list[Entity] = []
        token = ""
        while True:
            resp = await self._call("Entities", self._entities(page_size, token))
            out += [cv.entity(e) for e in resp.entities]
            if not (token := resp.next_page_token):
                return out

    async def entity(self, entity_id: str) -> EntityProfile:
        return cv.entity_profile((await self._call("Entities", self._entity(entity_id))).profile)

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
            raise from_rpc_error(err, self._tls) from None

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

    async def server_config(self) -> dict[str, ServerSetting]:
        return cv.server_config(await self._call("GetConfig", pb.GetConfigRequest()))

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
