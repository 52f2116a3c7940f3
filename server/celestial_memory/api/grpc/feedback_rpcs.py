"""Feedback, as a mixin of ``MemoryServicer``: the same thin translation over the service's
feedback (understanding/feedback.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import grpc
from celestial_client.v1 import memory_pb2 as pb
from celestial_memory.api.grpc.status import mapped
from celestial_memory.errors import InvalidArgument
from celestial_memory.memory.service import MemoryService

T = TypeVar("T")
Context = grpc.aio.ServicerContext[Any, Any]
VERDICTS = {pb.VERDICT_HELPFUL: True, pb.VERDICT_NOT_HELPFUL: False}


class FeedbackRpcs:
    _service: MemoryService

    # MemoryServicer's own, which come first in its method order.
    def _tenant(self, requested: str) -> str:
        raise NotImplementedError

    async def _run(self, context: Context, fn: Callable[..., T], *args: Any,
                   cancellable: bool = False) -> T:
        raise NotImplementedError

    def _memory(self, m: Any) -> pb.Memory:
        raise NotImplementedError

    @mapped
    async def Feedback(self, request: pb.FeedbackRequest, context: Context) -> pb.FeedbackResponse:
        helpful = VERDICTS.get(request.verdict)
        if helpful is None:
            raise InvalidArgument("verdict", "is required: VERDICT_HELPFUL or VERDICT_NOT_HELPFUL")
        tenant = self._tenant(request.tenant)
        voted = await self._run(context, self._service.feedback.give, tenant, request.id, helpful)
        # A vote also rewards the turn policy's decisions about the memory (memory/observing.py).
        await self._run(context, self._service.observing.voted, tenant, voted.memory, helpful)
        return pb.FeedbackResponse(memory=self._memory(voted.memory),
                                   importance_before=voted.importance_before)
