"""Reflect and the reflection operations (StartReflection, GetOperation, WatchOperation,
CancelOperation, ListOperations), a mixin of ``MemoryServicer``: the same thin translation over
the service's reflections (reflection/operations.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from celestial_client.v1 import memory_pb2 as pb
from celestial_memory.api.grpc.operation_pb import error, operation_to_pb, reflection_to_pb
from celestial_memory.api.grpc.servicer_parts import Context, ServicerParts
from celestial_memory.api.grpc.status import mapped, mapped_stream
from celestial_memory.domain import paging
from celestial_memory.domain.operations import Operation
from celestial_memory.domain.paging import PageSize

OPERATIONS_PAGE = PageSize(20, 100)
# How often a watch (or Reflect, waiting) looks at an operation this process runs: a read of
# memory, no store read; once the process no longer runs it, one store read ends the wait.
WATCH_POLL_S = 0.1


class ReflectRpcs(ServicerParts):
    async def _start(self, context: Context, r: pb.ReflectRequest, request_id: str) -> Operation:
        return await self._run(context, self._service.reflection.start, self._tenant(r.tenant),
                               r.dry_run, r.window, list(r.entities), request_id)

    async def _changes(self, context: Context, tenant: str, op: Operation,
                       seen: int | None) -> AsyncIterator[Operation]:
        """The operation each time it changes until it is done, after ``op`` as read at change
        counter ``seen`` (None: any state read here is news). Counting from that read, not from
        a second one, so that a change between the two is still reported."""
        ops = self._service.reflection
        while not op.done:
            await asyncio.sleep(WATCH_POLL_S)
            now = ops.peek(tenant, op.name)
            if now is None:  # no longer run here: ended (the store has its last state)
                op = (await self._run(context, ops.get, tenant, op.name))[0]
                yield op
                return
            if now[1] != seen:
                op, seen = now
                yield op

    @mapped
    async def Reflect(self, request: pb.ReflectRequest, context: Context) -> pb.ReflectResponse:
        tenant = self._tenant(request.tenant)
        started = ended = await self._start(context, request, "")
        try:
            async for later in self._changes(context, tenant, started, None):
                ended = later
        except asyncio.CancelledError:  # the caller went away: its reflection is not wanted
            await asyncio.to_thread(self._service.reflection.cancel, tenant, started.name)
            raise
        if ended.failure is not None:
            raise error(ended.failure)
        assert ended.result is not None
        return reflection_to_pb(ended.result)

    @mapped
    async def StartReflection(self, request: pb.StartReflectionRequest,
                              context: Context) -> pb.StartReflectionResponse:
        op = await self._start(context, request.reflection, request.request_id)
        return pb.StartReflectionResponse(operation=operation_to_pb(op))

    @mapped
    async def GetOperation(self, request: pb.GetOperationRequest,
                           context: Context) -> pb.GetOperationResponse:
        op, _ = await self._run(context, self._service.reflection.get,
                                self._tenant(request.tenant), request.name)
        return pb.GetOperationResponse(operation=operation_to_pb(op))

    @mapped_stream
    async def WatchOperation(self, request: pb.WatchOperationRequest,
                             context: Context) -> AsyncIterator[pb.WatchOperationResponse]:
        tenant = self._tenant(request.tenant)
        first, seen = await self._run(context, self._service.reflection.get, tenant, request.name)
        yield pb.WatchOperationResponse(operation=operation_to_pb(first))
        # Bounded like every stream: one left open would hold its slot; the caller watches again.
        try:
            async with asyncio.timeout(self._service.settings.max_stream_s):
                async for op in self._changes(context, tenant, first, seen):
                    yield pb.WatchOperationResponse(operation=operation_to_pb(op))
        except TimeoutError:
            return

    @mapped
    async def CancelOperation(self, request: pb.CancelOperationRequest,
                              context: Context) -> pb.CancelOperationResponse:
        op = await self._run(context, self._service.reflection.cancel,
                             self._tenant(request.tenant), request.name)
        return pb.CancelOperationResponse(operation=operation_to_pb(op))

    @mapped
    async def ListOperations(self, request: pb.ListOperationsRequest,
                             context: Context) -> pb.ListOperationsResponse:
        tenant = self._tenant(request.tenant)
        size = OPERATIONS_PAGE.of(request.page_size)
        bound = paging.fingerprint(request, tenant)
        cursor = paging.decode(request.page_token, bound, ["operations"], True)["operations"]
        ops, more = await self._run(context, self._service.reflection.page, tenant, size, cursor)
        token = ""
        if more and ops:
            token = paging.encode(bound, {"operations": (ops[-1].created_at, ops[-1].id)})
        return pb.ListOperationsResponse(operations=[operation_to_pb(o) for o in ops],
                                         next_page_token=token)
