"""Typed Python clients for the Celestial Memory service, synchronous and asynchronous.

    with CelestialClient("localhost:50051") as client:
        m = client.store("Alice prefers espresso", importance=0.8, tags=["prefs"])
        for r in client.recall("what does Alice drink?", limit=5):
            print(r.zone, r.relevance, r.content)

Errors are raised as ``celestial_client.errors.CelestialClientError`` subclasses.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self, TypedDict, Unpack

import grpc
from celestial.v1 import memory_pb2 as pb
from celestial.v1 import memory_pb2_grpc as pb_grpc

from celestial_client import _convert as cv
from celestial_client import connection
from celestial_client.connection import TLS
from celestial_client.errors import from_rpc_error
from celestial_client.types import (
    Memory,
    RebalanceReport,
    RecallResult,
    Stats,
    StoreItem,
    Zone,
    ZoneEvent,
)


class RecallOptions(TypedDict, total=False):
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
    reinforce: bool
    context: str
    query_vector: Sequence[float]
    min_relevance: float
    ignore_zones: bool


class UpdateOptions(TypedDict, total=False):
    content: str
    importance: float
    tags: Sequence[str]
    metadata: Mapping[str, str]
    pinned: bool
    vector: Sequence[float]


def _item(content: str | StoreItem, fields: Mapping[str, Any]) -> StoreItem:
    return content if isinstance(content, StoreItem) else StoreItem(content=content, **fields)


class CelestialClient:
    """Blocking client. ``target`` is host:port; ``tenant`` is sent with every call (with an API
    key, empty means the key's own tenant); ``api_key`` is sent as ``authorization: Bearer``;
    ``tls`` connects with TLS (and a client certificate, for mTLS)."""

    def __init__(
        self,
        target: str = "localhost:50051",
        *,
        tenant: str = "",
        timeout: float | None = 30.0,
        channel: grpc.Channel | None = None,
        api_key: str | None = None,
        tls: TLS | None = None,
    ) -> None:
        self._channel = channel or connection.channel(target, tls)
        self._metadata = connection.key_metadata(api_key)
        self._stub = pb_grpc.MemoryServiceStub(self._channel)
        self.tenant = tenant
        self.timeout = timeout

    def _call(self, method: str, request: Any) -> Any:
        try:
            return getattr(self._stub, method)(
                request, timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    def store(self, content: str | StoreItem, **fields: Any) -> Memory:
        """Store one memory. ``fields`` are those of ``StoreItem`` (importance, tags, ...)."""
        resp = self._call("Store", cv.store_request(self.tenant, _item(content, fields)))
        return cv.memory(resp.memory)

    def store_batch(self, items: Iterable[str | StoreItem]) -> list[str]:
        """Store many memories in one stream; all or nothing. Returns their ids in order."""
        reqs: Iterator[pb.StoreRequest] = (
            cv.store_request(self.tenant, _item(i, {})) for i in items
        )
        return list(self._call("StoreBatch", reqs).ids)

    def recall(self, query: str = "", limit: int = 10, **opts: Unpack[RecallOptions]) -> list[
        RecallResult
    ]:
        resp = self._call("Recall", cv.recall_request(self.tenant, query, limit, **opts))
        return cv.recall_results(resp)

    def get(self, memory_id: str) -> Memory:
        return cv.memory(self._call("Get", pb.GetRequest(tenant=self.tenant, id=memory_id)).memory)

    def update(self, memory_id: str, **changes: Unpack[UpdateOptions]) -> Memory:
        resp = self._call("Update", cv.update_request(self.tenant, memory_id, **changes))
        return cv.memory(resp.memory)

    def delete(self, memory_id: str) -> bool:
        return bool(self._call("Delete", pb.DeleteRequest(tenant=self.tenant, id=memory_id)).deleted)

    def stats(self) -> Stats:
        return cv.stats(self._call("Stats", pb.StatsRequest(tenant=self.tenant)))

    def rebalance(
        self, dry_run: bool = False, full: bool = False, forget: bool = True
    ) -> RebalanceReport:
        req = pb.RebalanceRequest(
            tenant=self.tenant, dry_run=dry_run, full=full, no_forget=not forget
        )
        return cv.rebalance(self._call("Rebalance", req))

    def recent(self, limit: int = 10, **filters: Unpack[RecallOptions]) -> list[Memory]:
        """The newest memories (filters as for recall, e.g. ``session_id``), newest first."""
        f = cv.recall_request(self.tenant, "", 1, **filters).filter
        resp = self._call("Recent", pb.RecentRequest(tenant=self.tenant, page_size=limit, filter=f))
        return [cv.memory(m) for m in resp.memories]

    def export(self, after_id: str = "") -> Iterator[pb.ExportedMemory]:
        """Every memory of the tenant with its vectors, in id order; resume after ``after_id``.
        The records are protobuf messages, meant for ``import_memories`` (here or on another
        server) or a file (``celestial export``)."""
        try:
            yield from self._stub.Export(
                pb.ExportRequest(tenant=self.tenant, after_id=after_id), timeout=None,
                metadata=self._metadata,
            )
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    def import_memories(self, records: Iterable[pb.ExportedMemory]) -> int:
        """Write exported memories into this client's tenant; ids it holds already are
        skipped. Returns how many were written."""
        def stamped() -> Iterator[pb.ExportedMemory]:
            for r in records:
                r.tenant = self.tenant
                yield r

        try:
            return int(self._stub.Import(stamped(), timeout=None, metadata=self._metadata).imported)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    def set_clock(self, now: datetime | float) -> datetime:
        """Admin, for replays: set the server's clock (the server needs
        CELESTIAL_ADMIN_CLOCK=true, else FailedPrecondition)."""
        resp = self._call("SetClock", pb.SetClockRequest(now=cv.timestamp(now)))
        return cv.to_datetime(resp.now)

    def ledger(
        self, since: datetime | float | None = None, limit: int = 100, memory_id: str = ""
    ) -> list[ZoneEvent]:
        """Evictions and forgotten memories, oldest first."""
        req = cv.ledger_request(self.tenant, since, limit, memory_id)
        return cv.events(self._call("Ledger", req))

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AsyncCelestialClient:
    """asyncio client with the same methods as ``CelestialClient``, awaited."""

    def __init__(
        self,
        target: str = "localhost:50051",
        *,
        tenant: str = "",
        timeout: float | None = 30.0,
        channel: grpc.aio.Channel | None = None,
        api_key: str | None = None,
        tls: TLS | None = None,
    ) -> None:
        self._channel = channel or connection.aio_channel(target, tls)
        self._metadata = connection.key_metadata(api_key)
        self._stub = pb_grpc.MemoryServiceStub(self._channel)
        self.tenant = tenant
        self.timeout = timeout

    async def _call(self, method: str, request: Any) -> Any:
        try:
            return await getattr(self._stub, method)(
                request, timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    async def store(self, content: str | StoreItem, **fields: Any) -> Memory:
        resp = await self._call("Store", cv.store_request(self.tenant, _item(content, fields)))
        return cv.memory(resp.memory)

    async def store_batch(self, items: Iterable[str | StoreItem]) -> list[str]:
        async def requests() -> AsyncIterator[pb.StoreRequest]:
            for i in items:
                yield cv.store_request(self.tenant, _item(i, {}))

        return list((await self._call("StoreBatch", requests())).ids)

    async def recall(
        self, query: str = "", limit: int = 10, **opts: Unpack[RecallOptions]
    ) -> list[RecallResult]:
        resp = await self._call("Recall", cv.recall_request(self.tenant, query, limit, **opts))
        return cv.recall_results(resp)

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

    async def rebalance(
        self, dry_run: bool = False, full: bool = False, forget: bool = True
    ) -> RebalanceReport:
        req = pb.RebalanceRequest(
            tenant=self.tenant, dry_run=dry_run, full=full, no_forget=not forget
        )
        return cv.rebalance(await self._call("Rebalance", req))

    async def recent(self, limit: int = 10, **filters: Unpack[RecallOptions]) -> list[Memory]:
        f = cv.recall_request(self.tenant, "", 1, **filters).filter
        req = pb.RecentRequest(tenant=self.tenant, page_size=limit, filter=f)
        return [cv.memory(m) for m in (await self._call("Recent", req)).memories]

    async def export(self, after_id: str = "") -> AsyncIterator[pb.ExportedMemory]:
        call = self._stub.Export(pb.ExportRequest(tenant=self.tenant, after_id=after_id),
                                metadata=self._metadata)
        try:
            async for r in call:
                yield r
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    async def import_memories(
        self, records: Iterable[pb.ExportedMemory] | AsyncIterator[pb.ExportedMemory]
    ) -> int:
        async def stamped() -> AsyncIterator[pb.ExportedMemory]:
            if isinstance(records, AsyncIterator):
                async for r in records:
                    r.tenant = self.tenant
                    yield r
            else:
                for r in records:
                    r.tenant = self.tenant
                    yield r

        try:
            return int((await self._stub.Import(stamped(), metadata=self._metadata)).imported)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    async def set_clock(self, now: datetime | float) -> datetime:
        resp = await self._call("SetClock", pb.SetClockRequest(now=cv.timestamp(now)))
        return cv.to_datetime(resp.now)

    async def ledger(
        self, since: datetime | float | None = None, limit: int = 100, memory_id: str = ""
    ) -> list[ZoneEvent]:
        req = cv.ledger_request(self.tenant, since, limit, memory_id)
        return cv.events(await self._call("Ledger", req))

    async def close(self) -> None:
        await self._channel.close(None)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
