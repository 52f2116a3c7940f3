"""What the turn policy answers (``observe``, ``policy``): plain dataclasses, no protobuf;
importable from ``celestial_client.types`` and ``celestial_client`` too."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types.py names these types too: no import at run time, no cycle
    from celestial_client.types import Memory, RecallResult

# What the policy may decide for a turn, in the contract's order.
ACTIONS = ("SAVE", "SKIP", "RETRIEVE")
# The phases that decide, by number: the retrieve rules, the clear-case rules, the bandit.
PHASES = {0: "retrieve rules", 1: "clear-case rules", 2: "bandit"}


@dataclass(frozen=True, slots=True)
class PolicyTrace:
    """Why the policy decided what it did. ``phase``: 0 the retrieve rules, 1 the clear-case
    rules, 2 the bandit; ``rule``: the rule that decided (phases 0 and 1). ``importance`` and
    its ``parts`` (cue kind -> weight): the turn by the rules. ``scores``: the bandit's bound
    for each action it weighed ("SAVE", "SKIP"); ``probability``: the chance the chosen action
    had (1 for a rule); ``explored``: drawn at random instead of the best. ``features``: the
    state the bandit saw. ``keep_by``: for a RETRIEVE, what decided whether the turn is also
    kept (a rule's name, or "bandit")."""

    phase: int
    rule: str = ""
    importance: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    probability: float = 1.0
    explored: bool = False
    features: dict[str, float] = field(default_factory=dict)
    keep_by: str = ""


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    """One decision: ``action`` is "SAVE", "SKIP" or "RETRIEVE"; ``keep``: whether the turn is
    in the zones (a turn not kept is in the archive); ``id``: what a reward names (0 for a dry
    run); ``at``: the server's clock."""

    id: int
    action: str
    keep: bool
    trace: PolicyTrace
    at: datetime
    dry_run: bool = False

    @property
    def why(self) -> str:
        """The trace in one line: the rule, or the bandit's scores and the chosen action's
        probability (and for a RETRIEVE, what decided keeping the turn)."""
        t = self.trace
        bandit = (", ".join(f"{a} {s:.4f}" for a, s in sorted(t.scores.items()))
                  + f"; p={t.probability:.3f}" + (", explored" if t.explored else ""))
        if t.phase == 2:
            return f"phase 2 ({PHASES[2]}): {bandit}"
        head = f"phase {t.phase} ({PHASES.get(t.phase, '?')}): {t.rule}"
        if t.phase == 0 and t.keep_by:
            kept = "kept" if self.keep else "not kept"
            by = f"the bandit ({bandit})" if t.keep_by == "bandit" else f"rule {t.keep_by!r}"
            return f"{head}; {kept} by {by}"
        return head


@dataclass(frozen=True, slots=True)
class Observation:
    """What ``observe`` did with a turn: the ``decision``; the turn as stored (``memory``: in
    its zone when kept, archived when skipped; None for a dry run), whether it was ``created``
    (False: a repeat went into ``merged_into``); for a RETRIEVE, the memories the ``context``
    block holds (``results``, best first) and the block's size in ``context_tokens``."""

    decision: PolicyDecision
    memory: Memory | None = None
    created: bool = False
    merged_into: str = ""
    results: list[RecallResult] = field(default_factory=list)
    context: str = ""
    context_tokens: int = 0

    @property
    def action(self) -> str:
        return self.decision.action


@dataclass(frozen=True, slots=True)
class PeerSharing:
    """One peer of this node: its address (or name), the updates taken from it, its updates
    or calls ``refused`` by reason ("fingerprint", "damaged", "too_often", "unavailable"...),
    when an update of it was last taken, and the last error since (empty: none)."""

    peer: str
    exchanged: int
    refused: dict[str, int] = field(default_factory=dict)
    last_at: datetime | None = None
    last_error: str = ""


@dataclass(frozen=True, slots=True)
class PolicySharing:
    """A node's sharing with its peers (``PolicyStatus.sharing``): gossip ``rounds`` run and
    ``merges`` taken, why the last round merged nothing (``waiting``), its ``peers``; the
    ``noise`` multiplier, updates ``released``, the privacy spent (``epsilon`` at ``delta``),
    the ``epsilon_budget`` (0: none) and whether it is ``budget_spent``."""

    rounds: int
    merges: int
    waiting: str
    peers: list[PeerSharing]
    noise: float
    released: int
    epsilon: float
    delta: float
    epsilon_budget: float
    budget_spent: bool


@dataclass(frozen=True, slots=True)
class PolicyStatus:
    """A tenant's turn policy (``policy``): the SHA-256 ``fingerprint`` of its rules and
    features; ``exploration`` (the share of the bandit's decisions drawn at random); its
    decisions by action ("SAVE", "SKIP", "RETRIEVE") and by phase ("0", "1", "2"); turns
    ``kept``, decisions ``explored``; ``rewards`` credited and their ``reward_sum``, the
    ``updates`` the bandit learnt, what the rules were credited (``reward_by_rule``, by
    "phase:rule"); the ``last`` decisions, newest first; when it was last ``saved_at``; the
    node's ``sharing`` with its peers (None: off)."""

    fingerprint: str
    exploration: float
    decisions: dict[str, int]
    phases: dict[str, int]
    kept: int
    explored: int
    rewards: int
    reward_sum: float
    updates: int
    reward_by_rule: dict[str, float] = field(default_factory=dict)
    last: list[PolicyDecision] = field(default_factory=list)
    saved_at: datetime | None = None
    sharing: PolicySharing | None = None

    @property
    def total(self) -> int:
        """Decisions taken (dry runs are not counted)."""
        return sum(self.decisions.values())
