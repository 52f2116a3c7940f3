"""Reflect, a mixin of ``MemoryServicer``: the same thin translation over the service's
reflection (reflection/)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import grpc
from celestial_client.v1 import memory_pb2 as pb
from celestial_memory.api.grpc.status import mapped
from celestial_memory.memory.service import MemoryService

T = TypeVar("T")
Context = grpc.aio.ServicerContext[Any, Any]


class ReflectRpcs:
    _service: MemoryService

    # MemoryServicer's own.
    def _tenant(self, requested: str) -> str:
        raise NotImplementedError

    async def _run(self, context: Context, fn: Callable[..., T], *args: Any,
                   cancellable: bool = False) -> T:
        raise NotImplementedError

    @mapped
    async def Reflect(self, request: pb.ReflectRequest, context: Context) -> pb.ReflectResponse:
        r = await self._run(context, self._service.reflect, self._tenant(request.tenant),
                            request.dry_run, request.window, list(request.entities))
        return pb.ReflectResponse(
            insights=[pb.Insight(id=i.id, content=i.content, entity=i.entity,
                                 source_ids=i.sources, created=i.created) for i in r.insights],
            summaries=[pb.EntitySummary(entity=x.entity, summary=x.summary, id=x.id,
                                        source_ids=x.sources) for x in r.summaries],
            dry_run=r.dry_run, memories_read=r.read, model_calls=r.calls, model_tokens=r.tokens)
