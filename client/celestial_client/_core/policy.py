"""The turn policy's calls (Observe, GetPolicy, ResetPolicy) for both clients, as mixins, and
their requests and answers between the wire and the client's types. Apart from the clients'
modules, which hold every other call, so that each stays one screenful of concept."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from celestial_client._core import convert as cv
from celestial_client._core.base import UNSET, _Unset
from celestial_client._core.policy_types import (
    ACTIONS,
    Observation,
    PeerSharing,
    PolicyDecision,
    PolicySharing,
    PolicyStatus,
    PolicyTrace,
)
from celestial_client.v1 import memory_pb2 as pb

_ACTION = {pb.TURN_ACTION_SAVE: "SAVE", pb.TURN_ACTION_SKIP: "SKIP",
           pb.TURN_ACTION_RETRIEVE: "RETRIEVE"}


def observe_request(tenant: str, text: str, session_id: str, role: str,
                    previous: Sequence[str], dry_run: bool, agent_id: str, limit: int,
                    max_tokens: int) -> pb.ObserveRequest:
    if isinstance(previous, str):  # a string is a sequence too: one turn, not its letters
        raise TypeError("previous must be a sequence of earlier turns, not a string")
    return pb.ObserveRequest(tenant=tenant, text=text, session_id=session_id, role=role,
                             previous=list(previous), dry_run=dry_run, agent_id=agent_id,
                             limit=limit, max_tokens=max_tokens)


def decision(d: pb.PolicyDecision) -> PolicyDecision:
    t = d.trace
    return PolicyDecision(
        id=int(d.id), action=_ACTION.get(d.action, "UNSPECIFIED"), keep=d.keep,
        trace=PolicyTrace(phase=t.phase, rule=t.rule, importance=t.importance,
                          parts=dict(t.parts), scores=dict(t.scores),
                          probability=t.probability, explored=t.explored,
                          features=dict(t.features), keep_by=t.keep_by),
        at=cv.to_datetime(d.at), dry_run=d.dry_run)


def observation(r: pb.ObserveResponse) -> Observation:
    return Observation(
        decision=decision(r.decision),
        memory=cv.memory(r.memory) if r.HasField("memory") else None, created=r.created,
        merged_into=r.merged_into,
        results=cv.recall_results(pb.RecallResponse(results=r.results)), context=r.context,
        context_tokens=r.context_tokens)


def _ordered(counts: dict[str, Any], keys: Sequence[str]) -> dict[str, int]:
    """Every one of ``keys`` in its order (0 when the server sent none), then any other."""
    return {**{k: int(counts.get(k, 0)) for k in keys},
            **{k: int(v) for k, v in sorted(counts.items()) if k not in keys}}


def policy_status(r: pb.GetPolicyResponse) -> PolicyStatus:
    return PolicyStatus(
        fingerprint=r.fingerprint, exploration=r.exploration,
        decisions=_ordered(dict(r.decisions), ACTIONS),
        phases=_ordered(dict(r.phases), ("0", "1", "2")), kept=int(r.kept),
        explored=int(r.explored), rewards=int(r.rewards), reward_sum=r.reward_sum,
        updates=int(r.updates), reward_by_rule=dict(sorted(r.reward_by_rule.items())),
        last=[decision(d) for d in r.last],
        saved_at=cv.to_datetime(r.saved_at) if r.HasField("saved_at") else None,
        sharing=sharing(r.sharing) if r.HasField("sharing") else None)


def sharing(s: pb.PolicySharingStatus) -> PolicySharing:
    return PolicySharing(
        rounds=int(s.rounds), merges=int(s.merges), waiting=s.waiting,
        peers=[PeerSharing(p.peer, int(p.exchanged), {k: int(v) for k, v in
                                                      sorted(p.refused.items())},
                           cv.to_datetime(p.last_at) if p.HasField("last_at") else None,
                           p.last_error) for p in s.peers],
        noise=s.noise, released=int(s.released), epsilon=s.epsilon, delta=s.delta,
        epsilon_budget=s.epsilon_budget, budget_spent=s.budget_spent)


class PolicyCalls:
    """``CelestialClient``'s turn-policy methods."""

    tenant: str

    # The client's own, which comes first in its method order.
    def _call(self, method: str, request: Any, timeout: float | _Unset | None = UNSET) -> Any:
        raise NotImplementedError

    def observe(
        self, text: str, *, session_id: str = "", role: str = "", previous: Sequence[str] = (),
        dry_run: bool = False, agent_id: str = "", limit: int = 0, max_tokens: int = 0,
    ) -> Observation:
        """One conversation turn, and the memory decides what to do with it (the turn
        policy): SAVE stores it (``previous``, the session's earlier turns oldest first, as
        its context); SKIP writes it straight into the archive (``recent(archived=True)``
        lists it, deep recall finds it, ``restore`` brings it back); RETRIEVE answers the
        context block and the memories in it (``limit`` to consider, 0: 10; within
        ``max_tokens``, 0: 1,000) and keeps the turn too when it is worth keeping. The
        decision says why (``decision.trace``, ``decision.why``). ``role``: "user" when empty;
        an assistant's, system's or tool's question asks the memory nothing. ``dry_run``
        decides only: nothing is stored, recalled or learnt. Every call is a turn: it is not
        retried."""
        return observation(self._call("Observe", observe_request(
            self.tenant, text, session_id, role, previous, dry_run, agent_id, limit,
            max_tokens)))

    def policy(self, last: int = 0) -> PolicyStatus:
        """The tenant's turn policy: its counts by action and phase, exploration, rewards and
        updates, and its ``last`` decisions with their traces, newest first (0: 20; at most
        256)."""
        return policy_status(self._call("GetPolicy", pb.GetPolicyRequest(tenant=self.tenant,
                                                                          last=last)))

    def reset_policy(self) -> int:
        """Start the tenant's turn policy again: what it learnt, its counts and its log are
        dropped; its memories stay. Returns how many decisions the dropped policy had
        taken."""
        return int(self._call("ResetPolicy", pb.ResetPolicyRequest(tenant=self.tenant)).decisions)


class AsyncPolicyCalls:
    """``AsyncCelestialClient``'s turn-policy methods: ``PolicyCalls``', awaited."""

    tenant: str

    async def _call(
        self, method: str, request: Any, timeout: float | _Unset | None = UNSET
    ) -> Any:
        raise NotImplementedError

    async def observe(
        self, text: str, *, session_id: str = "", role: str = "", previous: Sequence[str] = (),
        dry_run: bool = False, agent_id: str = "", limit: int = 0, max_tokens: int = 0,
    ) -> Observation:
        return observation(await self._call("Observe", observe_request(
            self.tenant, text, session_id, role, previous, dry_run, agent_id, limit,
            max_tokens)))

    async def policy(self, last: int = 0) -> PolicyStatus:
        return policy_status(await self._call(
            "GetPolicy", pb.GetPolicyRequest(tenant=self.tenant, last=last)))

    async def reset_policy(self) -> int:
        resp = await self._call("ResetPolicy", pb.ResetPolicyRequest(tenant=self.tenant))
        return int(resp.decisions)
