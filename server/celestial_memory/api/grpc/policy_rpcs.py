"""The turn policy's calls (Observe, GetPolicy, ResetPolicy), as a mixin of ``MemoryServicer``:
the same thin translation over the service's observing (memory/observing.py)."""

from __future__ import annotations

from typing import Any

from celestial_client.v1 import memory_pb2 as pb
from celestial_memory.access.roles import CALLER, Role
from celestial_memory.api.grpc import converters as cv
from celestial_memory.api.grpc.gossip import status_to_pb
from celestial_memory.api.grpc.servicer_parts import Context, ServicerParts
from celestial_memory.api.grpc.status import mapped
from celestial_memory.errors import InvalidArgument
from celestial_memory.memory.observing import ObservedTurn
from celestial_memory.policy.decision import Action, Decision
from celestial_memory.sharing.node import SharingNode

ACTIONS = {Action.SAVE: pb.TURN_ACTION_SAVE, Action.SKIP: pb.TURN_ACTION_SKIP,
           Action.RETRIEVE: pb.TURN_ACTION_RETRIEVE}
LAST_DEFAULT, LAST_MAX = 20, 256


def decision_to_pb(d: Decision) -> pb.PolicyDecision:
    t = d.trace
    return pb.PolicyDecision(
        id=d.id, action=ACTIONS[d.action], keep=d.keep, at=cv.ts_to_pb(d.at), dry_run=d.dry_run,
        trace=pb.PolicyTrace(phase=int(t.phase), rule=t.rule, importance=t.importance,
                             parts=t.parts, scores=t.scores, probability=t.probability,
                             explored=t.explored, features=t.features, keep_by=t.keep_by))


class PolicyRpcs(ServicerParts):
    sharing: SharingNode | None = None  # set by the server when sharing is on

    @mapped
    async def Observe(self, request: pb.ObserveRequest, context: Context) -> pb.ObserveResponse:
        if not request.dry_run:  # a dry run writes, recalls and learns nothing
            CALLER.get().require(Role.WRITE, "Observe (other than a dry run)")
        turn = ObservedTurn(request.text, request.session_id, request.role,
                            list(request.previous), request.dry_run, request.agent_id,
                            request.limit, request.max_tokens)
        out = await self._run(context, self._service.observing.observe,
                              self._tenant(request.tenant), turn, cancellable=True)
        answer = pb.ObserveResponse(decision=decision_to_pb(out.decision), created=out.created,
                                    merged_into=out.merged_into)
        if out.memory is not None:
            m = out.memory
            answer.memory.CopyFrom(self._memory(m, m.written_at if out.created else None))
        answer.results.extend(cv.recall_result_to_pb(r, self._service.breakdown(r.memory, r.at),
                                                     self._service.next_move(r.memory))
                              for r in out.results)
        if out.context is not None:
            answer.context, answer.context_tokens = out.context.text, out.context.tokens
        return answer

    @mapped
    async def GetPolicy(self, request: pb.GetPolicyRequest,
                        context: Context) -> pb.GetPolicyResponse:
        if not 0 <= request.last <= LAST_MAX:
            raise InvalidArgument("last", f"must be 0 to {LAST_MAX}, got {request.last}")
        tenant = self._tenant(request.tenant)
        keeper = self._service.observing.policies

        def read() -> tuple[dict[str, Any], list[Decision], float | None]:
            p = keeper.of(tenant)
            return p.stats(), p.last(request.last or LAST_DEFAULT), keeper.saved_at(tenant)

        stats, last, saved_at = await self._run(context, read)
        answer = pb.GetPolicyResponse(
            fingerprint=stats["fingerprint"], exploration=stats["epsilon"],
            decisions=stats["decisions"], phases=stats["phases"], kept=stats["kept"],
            explored=stats["explored"], rewards=stats["rewards"],
            reward_sum=stats["reward_sum"], updates=stats["updates"],
            reward_by_rule=stats["by_rule"], last=[decision_to_pb(d) for d in last])
        if saved_at is not None:
            answer.saved_at.CopyFrom(cv.ts_to_pb(saved_at))
        if self.sharing is not None:
            answer.sharing.CopyFrom(status_to_pb(self.sharing.status()))
        return answer

    @mapped
    async def ResetPolicy(self, request: pb.ResetPolicyRequest,
                          context: Context) -> pb.ResetPolicyResponse:
        n = await self._run(context, self._service.observing.policies.reset,
                            self._tenant(request.tenant))
        return pb.ResetPolicyResponse(decisions=n)
