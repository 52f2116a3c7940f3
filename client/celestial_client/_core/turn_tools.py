"""The turn policy's agent tools (``agent_tools.TOOLS`` holds them with the others):
``memory_auto``, the one call an agent makes each turn (the memory decides SAVE, SKIP or
RETRIEVE and does it, answering why and, for a RETRIEVE, the context block); ``policy_decide``,
the same decision as a dry run; ``policy_status``, the tenant's policy."""

from __future__ import annotations

import dataclasses
from typing import Any

from celestial_client._core.tool_spec import (
    ToolOutput,
    ToolSpec,
    _schema,
    _str,
    memory_data,
    result_data,
)
from celestial_client.client import CelestialClient
from celestial_client.types import Observation, PolicyDecision


def decision_data(d: PolicyDecision) -> dict[str, Any]:
    return {"id": d.id, "action": d.action, "keep": d.keep, "why": d.why,
            "at": d.at.isoformat(), "dry_run": d.dry_run,
            "trace": dataclasses.asdict(d.trace)}


def _observed(o: Observation) -> ToolOutput:
    d, m = o.decision, o.memory
    if d.dry_run:
        where = " (a dry run: nothing was stored, recalled or learnt)"
    elif m is None:
        where = ""
    elif m.archived:  # never lost: deep recall still finds it
        where = f"; the turn is archived as {m.id}"
    else:
        where = f"; the turn is kept as {m.id} ({m.zone.value})"
    lines = [f"{d.action}: {d.why}{where}"]
    if d.action == "RETRIEVE" and not d.dry_run:
        lines.append(o.context or "nothing relevant is remembered")
    return ToolOutput("\n".join(lines), {
        "action": d.action, "keep": d.keep, "why": d.why, "decision": decision_data(d),
        "memory": None if m is None else memory_data(m), "created": o.created,
        "merged_into": o.merged_into, "context": o.context, "context_tokens": o.context_tokens,
        "results": [result_data(r) for r in o.results]})


def _turn(c: CelestialClient, a: dict[str, Any], dry_run: bool) -> ToolOutput:
    return _observed(c.observe(
        a["text"], session_id=a.get("session_id", ""), role=a.get("role", ""),
        previous=a.get("previous", []), dry_run=dry_run, limit=a.get("limit", 0),
        max_tokens=a.get("max_tokens", 0)))


def _auto(c: CelestialClient, a: dict[str, Any]) -> ToolOutput:
    return _turn(c, a, False)


def _decide(c: CelestialClient, a: dict[str, Any]) -> ToolOutput:
    return _turn(c, a, True)


def _status(c: CelestialClient, a: dict[str, Any]) -> ToolOutput:
    s = c.policy(last=a["last"])
    counts = ", ".join(f"{k} {v}" for k, v in s.decisions.items())
    lines = [f"{_n(s.total, 'decision')} ({counts}), {_n(s.kept, 'turn')} kept; "
             f"{_n(s.rewards, 'reward')} (sum {s.reward_sum:+.2f}), "
             f"{_n(s.updates, 'bandit update')}"]
    lines += [f"#{d.id} {d.action}: {d.why}" for d in s.last]
    return ToolOutput("\n".join(lines), {
        "decisions": s.decisions, "phases": s.phases, "kept": s.kept, "explored": s.explored,
        "exploration": s.exploration, "rewards": s.rewards, "reward_sum": s.reward_sum,
        "updates": s.updates, "reward_by_rule": s.reward_by_rule,
        "last": [decision_data(d) for d in s.last], "fingerprint": s.fingerprint,
        "saved_at": None if s.saved_at is None else s.saved_at.isoformat()})


TURN: dict[str, dict[str, Any]] = {
    "text": _str("The turn's text, as it was said.", minLength=1),
    "session_id": _str("The conversation it belongs to (the same for each of its turns)."),
    "role": _str("Who said it: user (the default), assistant, system or tool. An assistant's "
                 "own question retrieves nothing."),
    "previous": {"type": "array", "items": {"type": "string"}, "maxItems": 64, "default": [],
                 "description": "The conversation's earlier turns, oldest first, when you have "
                                "them (the last few are kept as a saved turn's context)."},
    "limit": {"type": "integer", "minimum": 1, "maximum": 100,
              "description": "RETRIEVE: how many memories to consider (default 10)."},
    "max_tokens": {"type": "integer", "minimum": 1, "maximum": 32768,
                   "description": "RETRIEVE: the context block's budget in tokens (default "
                                  "1000)."},
}

TURN_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("memory_auto", "Call this with every conversation turn: the memory decides what to "
             "do with it and does it. SAVE keeps it; SKIP (a greeting, thanks, a reaction) puts "
             "it in the archive, where deep recall still finds it; RETRIEVE (a question, a "
             "reference to the past) answers the remembered context to read before replying. "
             "Answers the action, why, and for RETRIEVE the context block.",
             _schema("text", **TURN), _auto, read_only=False),
    ToolSpec("policy_decide", "What memory_auto would decide for a turn (SAVE, SKIP or RETRIEVE) "
             "and why, without doing it: nothing is stored, recalled or learnt.",
             _schema("text", **TURN), _decide),
    ToolSpec("policy_status", "The turn policy behind memory_auto: its decisions by action and "
             "by phase (rules or learnt), the rewards it learnt from, and its last decisions "
             "with why.",
             _schema(last={"type": "integer", "minimum": 1, "maximum": 256, "default": 10,
                           "description": "How many of the last decisions to list."}),
             _status),
)


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
