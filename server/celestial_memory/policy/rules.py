"""Phases 0 and 1 of the turn policy: the rules for the clear cases, each decision named by the
rule that took it.

- Phase 0: a question, or a turn that refers back ("as I said", "remember when", "지난번에",
  "그때"), RETRIEVEs when the tenant holds memories.
- Phase 1: the turn's importance is the sum of the kinds of content it shows (personal
  information 0.40, preference 0.35, technical 0.30, emotion 0.20, dense content words 0.15), at
  most 1. At or above ``SAVE_AT`` it is SAVEd, as is an explicit ask to remember or a secret.
  A greeting, thanks, acknowledgement, short reply or bare reaction with an importance at or
  below ``SKIP_AT`` (not counting its feeling) is SKIPped. A low score alone does not skip:
  plain statements of fact show no cue (most of the turns a later question asks about), so
  they go on to the bandit.

Rules are pure functions of the text: no reward reaches them, so no burst of feedback can turn
one of their decisions around.
"""

from __future__ import annotations

from dataclasses import dataclass

from celestial_memory.policy import cues
from celestial_memory.policy.cues import Reading
from celestial_memory.policy.decision import Action

WEIGHTS: dict[str, float] = {"personal": 0.40, "preference": 0.35, "technical": 0.30,
                             "emotion": 0.20, "density": 0.15}
SAVE_AT = 0.7
SKIP_AT = 0.1
# Dense enough to count: half the words carry content, and there are a few of them.
DENSITY_AT = 0.5
DENSE_WORDS = 4


@dataclass(frozen=True)
class RuleVerdict:
    action: Action
    rule: str


def importance(r: Reading) -> tuple[float, dict[str, float]]:
    """The turn's importance and its parts (kind -> weight), summed and capped at 1."""
    shown = {"personal": r.personal, "preference": r.preference, "technical": r.technical,
             "emotion": r.emotion,
             "density": r.density >= DENSITY_AT and len(r.content_words) >= DENSE_WORDS}
    parts = {k: WEIGHTS[k] for k, on in shown.items() if on}
    return min(1.0, sum(parts.values())), parts


def phase0(r: Reading, memory_count: int) -> RuleVerdict | None:
    """RETRIEVE for a question or a reference back, when there is something to recall."""
    if memory_count <= 0:
        return None
    if r.refers_back:
        return RuleVerdict(Action.RETRIEVE, "refers back")
    if r.question:
        return RuleVerdict(Action.RETRIEVE, "question")
    return None


def phase1(r: Reading, score: float, parts: dict[str, float]) -> RuleVerdict | None:
    """SAVE or SKIP the clear cases; None leaves the turn to the bandit."""
    if r.explicit:
        return RuleVerdict(Action.SAVE, "explicit ask or secret")
    if score >= SAVE_AT:
        return RuleVerdict(Action.SAVE, f"importance >= {SAVE_AT}")
    # A feeling in a filler or a reaction ("wow, amazing!") is the reaction itself, not news.
    if score - parts.get("emotion", 0.0) <= SKIP_AT:
        if r.filler:
            return RuleVerdict(Action.SKIP, "greeting, thanks or acknowledgement")
        if r.reaction and not r.has_number:
            return RuleVerdict(Action.SKIP, "reaction without news")
    return None


def rule_text() -> str:
    """The thresholds and weights, for the rule set's fingerprint."""
    return (f"save_at={SAVE_AT} skip_at={SKIP_AT} density_at={DENSITY_AT} "
            f"dense_words={DENSE_WORDS} weights={sorted(WEIGHTS.items())}\n{cues.rule_text()}")
