"""``celestial eval locomo PATH --policy``: LoCoMo replayed through the turn policy (Observe),
beside storing every turn, in one report.

Two tenants per conversation, both with the server's defaults (zone order, forgetting, deep
recall: ``zones+archive`` of ``celestial eval locomo``), rebalanced after every session:

- ``every turn``: each turn stored as ``celestial eval locomo`` stores it;
- ``policy``: each turn sent to Observe as it comes (the session's earlier turns as
  ``previous``, the speaker as the role, the server's clock at the turn's time): SAVE stores
  it, SKIP archives it, RETRIEVE answers and keeps it when the policy would.

Then, one hour after the last session, each question is first sent to the policy tenant as a
dry run (is it a RETRIEVE?) and then recalled in both tenants. A result counts for the turn
the memory was stored for and for the repeats merged into it (Observe answers which memory a
turn went into). Figures: the share of turns skipped, the share of the questions' evidence
turns kept (not skipped), recall at each k in both tenants, RETRIEVE on the questions, and the
turns a model would be sent for extraction (every kept turn; a skipped one never is).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from celestial_client.cli.locomo_eval import CATEGORIES, Conversation, load
from celestial_client.cli.output import table
from celestial_client.client import CelestialClient

SETTINGS = ("every turn", "policy")
MAX_PREVIOUS = 64  # Observe's bound on earlier turns


@dataclass
class PolicyScores:
    hits: dict[tuple[str, int], list[float]] = field(default_factory=lambda: defaultdict(list))
    by_category: dict[tuple[str, int, int], list[float]] = field(
        default_factory=lambda: defaultdict(list))
    turns: int = 0
    skipped: int = 0
    retrieved: int = 0  # turns the policy answered with a recall
    evidence: int = 0
    evidence_kept: int = 0
    questions: int = 0
    questions_retrieve: int = 0
    decisions: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    phases: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    observe_ms: list[float] = field(default_factory=list)


def _tenant(conv: str, setting: str) -> str:
    return f"locomo-policy-{conv}-{setting.replace(' ', '-')}-{int(time.time())}"


def run(target: str, paths: Sequence[Path], ks: Sequence[int],
        progress: Callable[[str], None] = lambda s: None) -> PolicyScores:
    sc = PolicyScores()
    limit = max(ks)
    for path in paths:
        conv = load(path)
        every = CelestialClient(target, tenant=_tenant(conv.name, "every"), timeout=120)
        policy = CelestialClient(target, tenant=_tenant(conv.name, "policy"), timeout=120)
        try:
            _replay(conv, every, policy, sc, ks, limit, progress)
        finally:
            every.close()
            policy.close()
    return sc


def _replay(conv: Conversation, every: CelestialClient, policy: CelestialClient,
            sc: PolicyScores, ks: Sequence[int], limit: int,
            progress: Callable[[str], None]) -> None:
    evidence = set().union(*(e for _, e, _ in conv.questions))
    kept_as: dict[str, set[str]] = defaultdict(set)  # policy memory id -> dia_ids
    for n, (start, items) in enumerate(conv.sessions, 1):
        every.set_clock(start + len(items))
        every.store_batch(items)
        said: list[str] = []
        for i, it in enumerate(items):
            policy.set_clock(start + i)
            t0 = time.perf_counter()
            r = policy.observe(it.content, session_id=it.session_id,
                               role=it.metadata["speaker"],
                               previous=said[-MAX_PREVIOUS:])
            sc.observe_ms.append((time.perf_counter() - t0) * 1000)
            said.append(it.content)
            d, dia, action = r.decision, it.metadata["dia_id"], r.decision.action
            sc.decisions[action] += 1
            sc.phases[d.trace.phase] += 1
            sc.turns += 1
            sc.skipped += not d.keep
            sc.retrieved += action == "RETRIEVE"
            if dia in evidence:
                sc.evidence += 1
                sc.evidence_kept += d.keep
            if r.memory is not None:
                kept_as[r.merged_into or r.memory.id].add(dia)
        policy.set_clock(start + len(items))
        for c in (every, policy):
            c.rebalance()
        progress(f"{conv.name}: session {n}/{len(conv.sessions)} observed")
    every.set_clock(conv.sessions[-1][0] + 3600)
    for c in (every, policy):
        c.rebalance()
    for qi, (question, ev, cat) in enumerate(conv.questions, 1):
        d = policy.observe(question, role="user", dry_run=True).decision
        sc.questions += 1
        sc.questions_retrieve += d.action == "RETRIEVE"
        for s, c in zip(SETTINGS, (every, policy), strict=True):
            res = c.recall(question, limit)
            if s == "policy":
                got = [kept_as.get(m.memory.id, set()) for m in res]
            else:
                got = [{m.memory.metadata.get("dia_id", ""),
                        *(p.metadata.get("dia_id", "") for p in m.memory.merged)} for m in res]
            for k in ks:
                hit = len(ev & set().union(*got[:k])) / len(ev)
                sc.hits[(s, k)].append(hit)
                sc.by_category[(s, k, cat)].append(hit)
        if qi % 50 == 0:
            progress(f"{conv.name}: {qi}/{len(conv.questions)} questions")


def report(sc: PolicyScores, ks: Sequence[int]) -> str:
    head = ["setting", *(f"R@{k}" for k in ks),
            *(f"{name} R@{k}" for k in ks for name in CATEGORIES.values())]
    rows = [[s, *(f"{_mean(sc.hits[(s, k)]):.3f}" for k in ks),
             *(f"{_mean(sc.by_category[(s, k, c)]):.3f}" for k in ks for c in CATEGORIES)]
            for s in SETTINGS]
    ms = sorted(sc.observe_ms)
    lines = [
        f"{sc.turns} turns, {sc.questions} questions",
        table(head, rows),
        f"skipped: {_share(sc.skipped, sc.turns)} of turns; evidence turns kept: "
        f"{_share(sc.evidence_kept, sc.evidence)} ({sc.evidence_kept}/{sc.evidence})",
        "decisions: " + ", ".join(f"{a} {n}" for a, n in sorted(sc.decisions.items()))
        + "; by phase: " + ", ".join(f"{p}: {n}" for p, n in sorted(sc.phases.items())),
        f"questions sent as turns decided RETRIEVE: "
        f"{_share(sc.questions_retrieve, sc.questions)}",
        f"turns a model would be sent for extraction, per 100 turns: every turn 100, policy "
        f"{100 * (sc.turns - sc.skipped) / max(sc.turns, 1):.1f}",
        f"Observe p50: {ms[len(ms) // 2]:.1f} ms" if ms else "",
    ]
    return "\n".join(line for line in lines if line)


def summary(sc: PolicyScores, ks: Sequence[int]) -> dict[str, object]:
    return {"turns": sc.turns, "questions": sc.questions,
            "skip_rate": _ratio(sc.skipped, sc.turns),
            "evidence_kept": _ratio(sc.evidence_kept, sc.evidence),
            "questions_retrieve": _ratio(sc.questions_retrieve, sc.questions),
            "decisions": dict(sc.decisions), "phases": {str(p): n for p, n in sc.phases.items()},
            "settings": {s: {f"R@{k}": round(_mean(sc.hits[(s, k)]), 4) for k in ks}
                         for s in SETTINGS}}


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _ratio(a: int, b: int) -> float | None:
    return round(a / b, 4) if b else None


def _share(a: int, b: int) -> str:
    return f"{100 * a / b:.1f}%" if b else "-"
