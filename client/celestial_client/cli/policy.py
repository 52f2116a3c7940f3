"""``celestial observe``: one conversation turn through the turn policy (SAVE, SKIP or RETRIEVE,
and why); ``celestial policy``: the tenant's policy, its counts and last decisions (``--reset``
starts it again). The parser registers both with ``add_policy_commands``; cli.py runs them."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

from celestial_client.cli.input_text import memory_text
from celestial_client.cli.output import Answer, table
from celestial_client.cli.recording import RecordingClient
from celestial_client.types import Observation, PolicyDecision, PolicySharing, PolicyStatus

COMMANDS = {"observe", "policy"}
PHASE_NAMES = {"0": "retrieve rules", "1": "clear-case rules", "2": "bandit"}


def add_policy_commands(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    from celestial_client.cli.parser import positive  # the parser imports this module

    o = command("observe", "one conversation turn through the turn policy: SAVE stores it, "
                           "SKIP archives it, RETRIEVE answers the context block it needs; "
                           "prints the decision and why")
    o.add_argument("text", metavar="TEXT", help="the turn's text; - reads it from stdin")
    o.add_argument("--session", default="", help="the conversation the turn belongs to")
    o.add_argument("--role", default="",
                   help="who said it (default user; an assistant's question retrieves nothing)")
    o.add_argument("--previous", action="append", default=[], metavar="T",
                   help="an earlier turn of the session (repeat, oldest first): the turn's "
                        "position, and a saved turn's context")
    o.add_argument("--agent", default="", help="the agent a saved turn is attributed to")
    o.add_argument("--limit", type=positive, help="RETRIEVE: memories to consider (default 10)")
    o.add_argument("--max-tokens", type=positive,
                   help="RETRIEVE: the context block's budget (default 1000)")
    o.add_argument("--dry-run", action="store_true",
                   help="decide only: nothing stored, recalled or learnt")
    p = command("policy", "the tenant's turn policy: decisions by action and phase, rewards, "
                          "and the last decisions with why (--reset starts it again)")
    p.add_argument("--last", type=positive, default=10,
                   help="the last decisions to list, newest first (default 10, at most 256)")
    p.add_argument("--reset", action="store_true",
                   help="drop what the policy learnt, its counts and its log (its memories "
                        "stay); prints how many decisions it had taken")


def run_policy(args: argparse.Namespace, client: RecordingClient) -> Answer:
    if args.command == "observe":
        return _observe(args, client)
    if args.reset:
        n = client.reset_policy()
        return Answer(f"turn policy reset: the dropped policy had taken {n} decision"
                      f"{'' if n == 1 else 's'}", client.answer())
    status = client.policy(last=args.last)
    return Answer(show_policy(status), client.answer())


def _observe(args: argparse.Namespace, client: RecordingClient) -> Answer:
    text = memory_text(args.text, None, text_flag="TEXT", required=True) or ""
    o = client.observe(text, session_id=args.session, role=args.role, previous=args.previous,
                       dry_run=args.dry_run, agent_id=args.agent, limit=args.limit or 0,
                       max_tokens=args.max_tokens or 0)
    return Answer(show_observation(o), client.answer())


def _parts(parts: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1]))


def show_observation(o: Observation) -> str:
    d = o.decision
    head = f"{d.action} (dry run: nothing stored, recalled or learnt)" if d.dry_run else (
        f"{d.action} (#{d.id})")
    t = d.trace
    lines = [f"decision     {head}", f"why          {d.why}",
             f"importance   {t.importance:.2f}" + (f": {_parts(t.parts)}" if t.parts else "")]
    m = o.memory
    if m is not None:
        if m.archived:
            where = f"archived {m.id} (celestial restore {m.id})"
        elif o.merged_into:
            where = f"kept: a repeat, merged into {o.merged_into}"
        else:
            where = f"kept in {m.zone.value}: {m.id}" + ("" if o.created else " (held before)")
        lines.append(f"turn         {where}")
    if d.action == "RETRIEVE" and not d.dry_run:
        n = len(o.results)
        lines.append(f"context      {o.context_tokens} tokens, {n} memor{'y' if n == 1 else 'ies'}"
                     if o.context else "context      nothing found")
        if o.context:
            lines.append(o.context)
    return "\n".join(lines)


def _counts(counts: dict[str, int], names: dict[str, str] | None = None) -> str:
    return ", ".join(f"{(names or {}).get(k, k)} {v}" for k, v in counts.items())


def show_policy(s: PolicyStatus) -> str:
    lines = [
        f"decisions    {s.total}: {_counts(s.decisions)}; kept {s.kept}",
        f"phases       {_counts(s.phases, PHASE_NAMES)}",
        f"exploration  {s.exploration:.2f}; explored {s.explored}",
        f"rewards      {s.rewards}, sum {s.reward_sum:+.3f}; bandit updates {s.updates}",
    ]
    for i, (rule, credited) in enumerate(s.reward_by_rule.items()):  # no reward changes a rule
        lines.append(("by rule      " if i == 0 else " " * 13) + f"{credited:+.3f}  {rule}")
    if s.sharing is not None:
        lines += show_sharing(s.sharing)
    if s.last:
        lines += ["last decisions, newest first:", show_decisions(s.last)]
    return "\n".join(lines)


def show_sharing(s: PolicySharing) -> list[str]:
    spent = (f"; epsilon {s.epsilon:.3g} at delta {s.delta:g}"
             + (f" of {s.epsilon_budget:g}" if s.epsilon_budget else "")
             + (" (spent: no more updates sent)" if s.budget_spent else "")) if s.noise else ""
    lines = [f"sharing      {s.rounds} rounds, {s.merges} merged, {s.released} updates sent; "
             f"noise {s.noise:g}{spent}"]
    if s.waiting:
        lines.append(f"             {s.waiting}")
    rows = [(p.peer, p.exchanged, _counts(p.refused) or "-",
             f"{p.last_at:%Y-%m-%d %H:%M:%S}" if p.last_at else "never", p.last_error[:60])
            for p in s.peers]
    return [*lines, table(["peer", "taken", "refused", "last taken", "last error"], rows)]


def show_decisions(decisions: Sequence[PolicyDecision]) -> str:
    rows = [(d.id, f"{d.at:%Y-%m-%d %H:%M:%S}", d.action, "yes" if d.keep else "no", d.why)
            for d in decisions]
    return table(["#", "at", "action", "kept", "why"], rows)
