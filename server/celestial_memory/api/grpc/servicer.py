"""The gRPC servicer: a thin translation layer, protobuf -> domain -> service -> protobuf.

Service calls are synchronous (the embedding model and the embedded store are CPU work), so
each runs in a worker thread, keeping the event loop free.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import grpc
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from celestial_memory.access.audit import audit
from celestial_memory.access.roles import CALLER, Role
from celestial_memory.api.grpc import converters as cv
from celestial_memory.api.grpc.feedback_rpcs import FeedbackRpcs
from celestial_memory.api.grpc.graph_rpcs import GraphRpcs
from celestial_memory.api.grpc.idle_streams import items_until_idle
from celestial_memory.api.grpc.observer import TENANT
from celestial_memory.api.grpc.policy_rpcs import PolicyRpcs
from celestial_memory.api.grpc.reflect_rpcs import ReflectRpcs
from celestial_memory.api.grpc.status import mapped
from celestial_memory.api.grpc.transfer_rpcs import TransferRpcs
from celestial_memory.domain import paging
from celestial_memory.domain.models import AdminEvent, ZoneEvent
from celestial_memory.domain.paging import PageSize
from celestial_memory.domain.requests import NewMemory
from celestial_memory.errors import DeadlineExceeded, InvalidArgument
from celestial_memory.memory.cancellation import Cancellation, InFlight
from celestial_memory.memory.service import MemoryService
from celestial_memory.ops.running_config import running_config

T = TypeVar("T")
# Page sizes of the lists (AIP-158): the default and the most one page may ask for.
RECENT_PAGE = PageSize(10, 1000)
LIST_PAGE = PageSize(100, 1000)
LEDGER_PAGE = PageSize(100, 1000)
LEDGER_LIMIT = 10_000  # the deprecated Ledger limit's old bound
# What a recall result adds to its memory: zone, relevance, breakdown, and the counts a
# reinforcement may lengthen by a byte or two.
RESULT_EXTRA_BYTES = 128
Context = grpc.aio.ServicerContext[Any, Any]
RpcContext = Context


class MemoryServicer(GraphRpcs, FeedbackRpcs, ReflectRpcs, TransferRpcs, PolicyRpcs,
                     pb_grpc.MemoryServiceServicer):
    def __init__(self, service: MemoryService) -> None:
        self._service = service
        self.inflight = InFlight()

    def _tenant(self, requested: str) -> str:
        """The tenant the caller may use (its key decides; access/roles.py); the access log
        names it (observer.py)."""
        s = self._service.settings
        tenant = CALLER.get().tenant(requested, s.default_tenant, s.max_tenant_chars)
        TENANT.set(tenant)
        return tenant

    async def _run(
        self, context: Context, fn: Callable[..., T], *args: Any, cancellable: bool = False
    ) -> T:
        """Run ``fn`` in a worker thread. Work that waited past its deadline, or was cancelled
        while waiting, never starts; ``cancellable`` work is handed the cancellation to check
        as it goes (memory/cancellation.py)."""
        left = context.time_remaining()
        cancel = Cancellation(None if left is None else time.monotonic() + left)

        def work() -> T:
            with self.inflight.track(cancel):
                cancel.check()
                return fn(*args, cancel=cancel) if cancellable else fn(*args)

        try:
            return await asyncio.to_thread(work)
        except asyncio.CancelledError:  # the caller went away or the server stopped
            cancel.cancel()
            raise

    @contextlib.asynccontextmanager
    async def _client_stream(
        self, method: str, requests: AsyncIterator[T], context: Context
    ) -> AsyncIterator[AsyncIterator[T]]:
        """A client stream's items, within its bounds: at most ``max_stream_s`` in all, and
        ended when it sends nothing for ``stream_idle_s``. Streams opened and left idle would
        otherwise hold their slots for as long as their callers like (how many one caller may
        hold is stream_limit.py's)."""
        s = self._service.settings
        try:
            async with asyncio.timeout(s.max_stream_s):
                yield items_until_idle(requests, method, s.stream_idle_s)
        except TimeoutError:
            raise DeadlineExceeded(f"{method} took longer than {s.max_stream_s:g} s") from None

    async def _admin(self, context: Context, tenant: str, method: str) -> None:
        """Admin calls, once admitted to their tenant, go to the audit log and into the ledger
        before they run (access/roles.py names them)."""
        key_id = CALLER.get().key_id
        audit("admin", method=method, tenant=tenant, key_id=key_id, peer=context.peer())
        await self._run(context, self._service.record_admin, tenant, method, key_id)

    def _memory(self, m: Any, at: float | None = None) -> pb.Memory:
        return cv.memory_to_pb(m, self._service.breakdown(m, at), self._service.next_move(m))

    def _page_budget(self) -> int:
        """Bytes a page's items may take: every answer stays under the message limit."""
        return self._service.settings.max_message_bytes - paging.ENVELOPE_BYTES

    @mapped
    async def Store(self, request: pb.StoreRequest, context: Context) -> pb.StoreResponse:
        item = cv.new_memory_from_pb(request)
        out = await self._run(context, self._service.store_batch,
                              self._tenant(request.tenant), [item], cancellable=True)
        m, created, into = out.memories[0], out.created[0], out.merged_into[0]
        # A memory this store wrote (new, or the one a repeat merged into) is answered as of
        # that write, when its score was computed: the clock read again after the write would
        # age it by the write's own milliseconds.
        return pb.StoreResponse(memory=self._memory(m, m.written_at if created or into else None),
                                created=created, merged_into=into)

    @mapped
    async def StoreBatch(
        self, request_iterator: AsyncIterator[pb.StoreRequest], context: Context
    ) -> pb.StoreBatchResponse:
        async with self._client_stream("StoreBatch", request_iterator, context) as requests:
            return await self._store_batch(requests, context)

    async def _store_batch(
        self, request_iterator: AsyncIterator[pb.StoreRequest], context: Context
    ) -> pb.StoreBatchResponse:
        settings = self._service.settings
        limit, byte_limit = settings.max_batch, settings.max_batch_bytes
        items: list[NewMemory] = []
        tenant: str | None = None
        size = 0
        async for req in request_iterator:
            # Each item is checked as it arrives, so a bad or oversized stream is refused at
            # its first bad item, without holding the rest.
            if len(items) >= limit:
                raise InvalidArgument("requests", f"more than {limit} items in one batch")
            size += req.ByteSize()
            if size > byte_limit:
                raise InvalidArgument("requests", f"more than {byte_limit} bytes in one batch")
            t = self._tenant(req.tenant)
            if tenant is not None and t != tenant:
                raise InvalidArgument(f"requests[{len(items)}].tenant", "differs within a batch")
            tenant = t
            items.append(self._service.check_new(cv.new_memory_from_pb(req), len(items), True))
        if tenant is None:
            return pb.StoreBatchResponse(ids=[], stored=0)
        out = await self._run(context, self._service.store_batch, tenant, items, True,
                              cancellable=True)
        merged = sum(1 for m in out.merged_into if m)
        return pb.StoreBatchResponse(ids=[m.id for m in out.memories], stored=len(out.memories),
                                     existing=out.created.count(False) - merged, merged=merged)

    def _fit(self, mems: Sequence[Any]) -> int:
        """How many recalled memories, from the first, one answer can carry: a memory is always
        under the message limit (config.py), a list of them may not be. A bound on their sizes
        answers without converting them (the answer converts them once); only an answer near
        the limit is measured exactly."""
        budget = self._page_budget()
        if sum(cv.memory_size_bound(m) + RESULT_EXTRA_BYTES + 6 for m in mems) <= budget:
            return len(mems)
        return paging.fitting([self._memory(m) for m in mems], budget, RESULT_EXTRA_BYTES)

    @mapped
    async def Recall(self, request: pb.RecallRequest, context: Context) -> pb.RecallResponse:
        q = replace(cv.recall_query_from_pb(request), fit=self._fit)
        if q.reinforce:
            CALLER.get().require(Role.WRITE, "Recall with reinforcement")
        results = await self._run(context, self._service.recall, self._tenant(request.tenant), q,
                                  cancellable=True)
        return pb.RecallResponse(
            results=[
                cv.recall_result_to_pb(r, self._service.breakdown(r.memory, r.at),
                                       self._service.next_move(r.memory))
                for r in results
            ]
        )

    @mapped
    async def Get(self, request: pb.GetRequest, context: Context) -> pb.GetResponse:
        m = await self._run(context, self._service.get, self._tenant(request.tenant), request.id)
        return pb.GetResponse(memory=self._memory(m))

    @mapped
    async def Update(self, request: pb.UpdateRequest, context: Context) -> pb.UpdateResponse:
        ch = cv.changes_from_pb(request)
        m = await self._run(context, self._service.update, self._tenant(request.tenant), request.id, ch)
        return pb.UpdateResponse(memory=self._memory(m))

    @mapped
    async def Delete(self, request: pb.DeleteRequest, context: Context) -> pb.DeleteResponse:
        # Only an admin key erases an immutable memory (memory/archive.py).
        ok = await self._run(context, self._service.delete, self._tenant(request.tenant),
                             request.id, CALLER.get().role >= Role.ADMIN)
        return pb.DeleteResponse(deleted=ok)

    @mapped
    async def DeleteByFilter(
        self, request: pb.DeleteByFilterRequest, context: Context
    ) -> pb.DeleteByFilterResponse:
        flt = cv.filter_from_pb(request.filter)
        tenant = self._tenant(request.tenant)
        await self._admin(context, tenant, "DeleteByFilter")
        n = await self._run(context, self._service.delete_by_filter, tenant, flt)
        return pb.DeleteByFilterResponse(deleted=n)

    @mapped
    async def Restore(self, request: pb.RestoreRequest, context: Context) -> pb.RestoreResponse:
        m = await self._run(context, self._service.restore, self._tenant(request.tenant),
                            request.id)
        return pb.RestoreResponse(memory=self._memory(m))

    @mapped
    async def Consolidate(
        self, request: pb.ConsolidateRequest, context: Context
    ) -> pb.ConsolidateResponse:
        tenant = self._tenant(request.tenant)
        await self._admin(context, tenant, "Consolidate")
        merges, scanned = await self._run(context, self._service.consolidate, tenant,
                                          request.dry_run)
        listed = [pb.Merge(into=into, ids=ids) for into, ids in merges]
        n = paging.fitting(listed, self._page_budget()) if listed else 0
        return pb.ConsolidateResponse(merges=listed[:n], scanned=scanned,
                                      dry_run=request.dry_run, unlisted=len(listed) - n)

    @mapped
    async def Rebalance(
        self, request: pb.RebalanceRequest, context: Context
    ) -> pb.RebalanceResponse:
        tenant = self._tenant(request.tenant)
        await self._admin(context, tenant, "Rebalance")
        rep = await self._run(context, self._service.rebalance, tenant, request.dry_run,
                              request.full, not request.no_forget)
        return cv.rebalance_to_pb(rep)

    @mapped
    async def Recent(self, request: pb.RecentRequest, context: Context) -> pb.RecentResponse:
        tenant = self._tenant(request.tenant)
        size = RECENT_PAGE.of(request.page_size, request.limit, self._service.settings.max_batch)
        bound = paging.fingerprint(request, tenant)
        cursor = paging.decode(request.page_token, bound, ["memories"], True)["memories"]
        memories, more = await self._run(context, self._service.listing.recent, tenant,
                                         cv.filter_from_pb(request.filter), size, cursor,
                                         request.archived)
        page, token = self._memory_page(memories, more, bound, by_time=True)
        return pb.RecentResponse(memories=page, next_page_token=token)

    @mapped
    async def List(self, request: pb.ListRequest, context: Context) -> pb.ListResponse:
        tenant = self._tenant(request.tenant)
        size = LIST_PAGE.of(request.page_size)
        bound = paging.fingerprint(request, tenant)
        cursor = paging.decode(request.page_token, bound, ["memories"], False)["memories"]
        memories, more = await self._run(context, self._service.listing.in_id_order, tenant,
                                         cv.filter_from_pb(request.filter), size, cursor,
                                         request.archived)
        page, token = self._memory_page(memories, more, bound, by_time=False)
        return pb.ListResponse(memories=page, next_page_token=token)

    def _memory_page(
        self, memories: list[Any], more: bool, bound: str, by_time: bool
    ) -> tuple[list[pb.Memory], str]:
        """The memories that fit in one answer, and the token that goes on after the last."""
        out = [self._memory(m) for m in memories]
        n = paging.fitting(out, self._page_budget())
        if not (more or n < len(out)) or n == 0:
            return out[:n], ""
        last = memories[n - 1]
        cursor = (last.created_at if by_time else None, last.id)
        return out[:n], paging.encode(bound, {"memories": cursor})

    @mapped
    async def SetClock(
        self, request: pb.SetClockRequest, context: Context
    ) -> pb.SetClockResponse:
        now = cv.ts_from_pb(request, "now", "now")
        if now is None:
            raise InvalidArgument("now", "is required")
        CALLER.get().require_every_tenant("SetClock")  # the clock is every tenant's
        await self._admin(context, "", "SetClock")
        return pb.SetClockResponse(now=cv.ts_to_pb(await self._run(context, self._service.set_clock, now)))

    @mapped
    async def GetConfig(
        self, request: pb.GetConfigRequest, context: Context
    ) -> pb.GetConfigResponse:
        caller = CALLER.get()
        caller.require_every_tenant("GetConfig")  # the settings are every tenant's
        audit("admin", method="GetConfig", tenant="", key_id=caller.key_id, peer=context.peer())
        return cv.config_to_pb(running_config(self._service.settings))

    @mapped
    async def Ledger(self, request: pb.LedgerRequest, context: Context) -> pb.LedgerResponse:
        since = cv.ts_from_pb(request, "since", "since")
        tenant = self._tenant(request.tenant)
        size = LEDGER_PAGE.of(request.page_size, request.limit, LEDGER_LIMIT)
        bound = paging.fingerprint(request, tenant)
        after = paging.decode(request.page_token, bound, ["events", "admin"], True)
        events, more, admin, more_admin = await self._run(
            context, self._service.listing.ledger, tenant, since, size, request.memory_id,
            after["events"], after["admin"])
        # Both streams in one time order; the page takes the first that fit.
        streams: dict[str, Sequence[ZoneEvent | AdminEvent]] = {"events": events, "admin": admin}
        items = paging.merged(streams, lambda e: (e.at, e.id), size)
        out: list[pb.ZoneEvent | pb.AdminEvent] = [
            cv.event_to_pb(e) if isinstance(e, ZoneEvent) else cv.admin_event_to_pb(e)
            for _, e in items]
        n = paging.fitting(out, self._page_budget())
        token = ""
        if more or more_admin or n < len(events) + len(admin):
            for name, e in items[:n]:
                after[name] = (e.at, e.id)
            token = paging.encode(bound, after)
        page = out[:n]
        return pb.LedgerResponse(
            events=[m for m in page if isinstance(m, pb.ZoneEvent)],
            admin_events=[m for m in page if isinstance(m, pb.AdminEvent)],
            next_page_token=token)

    @mapped
    async def Stats(self, request: pb.StatsRequest, context: Context) -> pb.StatsResponse:
        s = await self._run(context, self._service.stats, self._tenant(request.tenant))
        return cv.stats_to_pb(s)

    # Last in the class: the method's name hides the Context type in the class body below it.
    @mapped
    async def Context(self, request: pb.ContextRequest, context: RpcContext) -> pb.ContextResponse:
        q = cv.recall_query_from_pb(request.recall)
        if q.reinforce:
            CALLER.get().require(Role.WRITE, "Context with reinforcement")
        b = await self._run(context, self._service.context, self._tenant(request.recall.tenant),
                            q, request.max_tokens, request.neighbours, cancellable=True)
        return pb.ContextResponse(text=b.text, tokens=b.tokens, tokenizer=b.tokenizer,
                                  included_ids=b.included, folded_ids=b.folded,
                                  omitted_ids=b.omitted,
                                  included_resolutions=[cv.RESOLUTIONS[f] for f in b.forms])
