"""What the turn policy answers for a turn: the decision and its trace (docs/design.md, the turn
policy). A trace says which phase decided and why: the rule that matched, or the bandit's score
for each action with the probability the chosen one had, so that a policy can be evaluated off
the log."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Any

from celestial_memory.domain.models import Memory

# The metadata a turn's memory carries its decision in (memory/observing.py writes them): the
# action, why, the decision's id and its time, which is how a later Feedback, Restore or deep
# recall of the memory finds the decision to reward.
POLICY, WHY, DECISION, AT = "policy", "policy_why", "policy_decision", "policy_at"


class Action(StrEnum):
    SAVE = "SAVE"
    SKIP = "SKIP"
    RETRIEVE = "RETRIEVE"


class Phase(int, Enum):
    RETRIEVE_RULES = 0
    CLEAR_RULES = 1
    BANDIT = 2


@dataclass(frozen=True)
class Trace:
    """Why a decision was taken.

    ``rule``: the rule that decided (phases 0 and 1), empty for the bandit. ``importance``: the
    turn's rule score and ``parts`` its terms (cue kind -> weight). ``scores``: the bandit's
    upper confidence bound for each action it weighed (phase 2). ``probability``: the chance the
    chosen action had of being chosen (1 for a rule). ``features``: the state, by feature name.
    ``keep_by``: for a RETRIEVE, what decided whether the turn is also kept.
    """

    phase: Phase
    rule: str = ""
    importance: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    probability: float = 1.0
    explored: bool = False
    features: dict[str, float] = field(default_factory=dict)
    keep_by: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"phase": int(self.phase), "rule": self.rule, "importance": self.importance,
                "parts": dict(self.parts), "scores": dict(self.scores),
                "probability": self.probability, "explored": self.explored,
                "features": dict(self.features), "keep_by": self.keep_by}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Trace:
        return cls(Phase(int(d["phase"])), str(d["rule"]), float(d["importance"]),
                   {str(k): float(v) for k, v in d["parts"].items()},
                   {str(k): float(v) for k, v in d["scores"].items()},
                   float(d["probability"]), bool(d["explored"]),
                   {str(k): float(v) for k, v in d["features"].items()}, str(d["keep_by"]))


@dataclass(frozen=True)
class Decision:
    """``action``: what to do with the turn. ``keep``: whether the turn goes into the zones
    (SAVE always, RETRIEVE when it also carries something worth keeping, SKIP never: a skipped
    turn goes to the archive). ``id``: what a reward names. ``at``: the policy clock's time."""

    id: int
    action: Action
    keep: bool
    trace: Trace
    at: float
    dry_run: bool = False

    @property
    def skipped(self) -> bool:
        return not self.keep

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "action": self.action.value, "keep": self.keep,
                "trace": self.trace.to_dict(), "at": self.at, "dry_run": self.dry_run}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Decision:
        return cls(int(d["id"]), Action(d["action"]), bool(d["keep"]),
                   Trace.from_dict(d["trace"]), float(d["at"]), bool(d["dry_run"]))


def kept_out(m: Memory) -> bool:
    """Whether the turn policy wrote ``m`` straight into the archive (a SKIP, or a RETRIEVE that
    did not keep its turn) and it has stayed there since: archived when it was written, never
    restored."""
    return m.archived and POLICY in m.metadata and m.archived_at == m.created_at
