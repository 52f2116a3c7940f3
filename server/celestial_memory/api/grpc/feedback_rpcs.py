"""Feedback, as a mixin of ``MemoryServicer``: the same thin translation over the service's
feedback (understanding/feedback.py)."""

from __future__ import annotations

from celestial_client.v1 import memory_pb2 as pb
from celestial_memory.api.grpc.servicer_parts import Context, ServicerParts
from celestial_memory.api.grpc.status import mapped
from celestial_memory.errors import InvalidArgument

VERDICTS = {pb.VERDICT_HELPFUL: True, pb.VERDICT_NOT_HELPFUL: False}


class FeedbackRpcs(ServicerParts):
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
