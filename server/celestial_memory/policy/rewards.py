"""Rewards for the turn policy's decisions, each bounded (docs/design.md, the turn policy).

- Explicit, in the user's next turn: "exactly", "perfect", "that's right", "맞아", "좋아" +1;
  "wrong", "no", "that's not it", "아니야", "틀렸어" -1.
- Implicit: the conversation goes on +0.3; the decided turn's keywords come back +0.2 for a kept
  turn (what was kept is being used), -0.2 for a skipped one (what was dropped is back); a
  short, disinterested reply -0.1.
- A SKIPped turn later restored, or returned by deep recall: ``SKIP_FOUND`` (-1).
- A Feedback vote on a decided turn's memory (memory/observing.py, ``VOTE``): 0.5 to the
  decision, positive for a helpful kept turn or an unhelpful skipped one, negative otherwise.

Every reward is within [-1, 1]; the policy also caps what one decision can be credited in all
(policy/turn_policy.py), so a burst on one decision counts once at most.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from celestial_memory.policy import cues

CONTINUES = 0.3
KEYWORDS_BACK = 0.2
DISINTERESTED = -0.1
SKIP_FOUND = -1.0
# A reply this short with nothing of its own reads as disinterest ("ok", "whatever", "응").
SHORT_REPLY_WORDS = 3

_POSITIVE = tuple(re.compile(p, re.IGNORECASE) for p in (
    r"^\s*(?:exactly|perfect|correct|precisely|spot on|right on|bingo|yes,? (?:that'?s|exactly)|"
    r"that'?s (?:right|it|correct|exactly it|perfect|what i (?:meant|wanted)))\b",
    r"\b(?:that'?s exactly|exactly right|you got it|well remembered|good memory)\b",
    r"^\s*(?:맞아|맞아요|맞습니다|맞네|정확해|정확하다|정확합니다|그거야|그거예요|바로 그거|좋아|"
    r"좋아요|완벽)",
))
_NEGATIVE = tuple(re.compile(p, re.IGNORECASE) for p in (
    r"^\s*(?:no|nope|wrong|incorrect|not really)\b(?![- ](?:problem|worries|way|doubt))",
    r"\b(?:that'?s (?:wrong|not (?:it|right|true|what i))|you'?re wrong|you got it wrong|"
    r"you (?:forgot|misremember)|i never said|that'?s incorrect)\b",
    r"^\s*(?:아니야|아니요|아뇨|아닌데|틀렸어|틀렸어요|틀려|잘못|그게 아니)",
    r"(?:틀렸어|틀렸네|그게 아니라|잘못 기억)",
))
_DISMISSIVE = frozenset({
    "ok", "okay", "k", "kk", "whatever", "fine", "sure", "meh", "idk", "nvm", "nevermind",
    "hm", "hmm", "응", "어", "그래", "몰라", "됐어", "ㅇㅇ",
})


@dataclass(frozen=True)
class Reward:
    """A reward and its parts (signal -> value), the value clipped to [-1, 1]."""

    value: float
    parts: dict[str, float] = field(default_factory=dict)


def clip(value: float) -> float:
    return max(-1.0, min(1.0, value)) if value == value else 0.0


def explicit(text: str) -> float | None:
    """+1 or -1 for explicit feedback, None when the turn gives none. A turn that says both
    counts as neither."""
    pos = any(p.search(text) for p in _POSITIVE)
    neg = any(p.search(text) for p in _NEGATIVE)
    if pos == neg:
        return None
    return 1.0 if pos else -1.0


def from_next_turn(next_text: str, keywords: Sequence[str], kept: bool) -> Reward:
    """The reward the user's next turn gives the decision before it: explicit feedback when
    there is some, else the implicit signals, summed and clipped."""
    said = explicit(next_text)
    if said is not None:
        return Reward(said, {"explicit": said})
    parts = {"continues": CONTINUES}
    back = set(keywords) & set(cues.content_words(next_text))
    if back:
        parts["keywords_back"] = KEYWORDS_BACK if kept else -KEYWORDS_BACK
    ws = cues.words(next_text)
    if len(ws) <= SHORT_REPLY_WORDS and (not ws or all(w in _DISMISSIVE for w in ws)):
        parts["disinterested"] = DISINTERESTED
    return Reward(clip(sum(parts.values())), parts)


def skip_found(how: str) -> Reward:
    """The penalty for a SKIP whose turn was needed after all (``how``: "restored" or
    "deep recall")."""
    return Reward(SKIP_FOUND, {f"skip {how}": SKIP_FOUND})


def rule_text() -> str:
    return "\n".join([p.pattern for p in (*_POSITIVE, *_NEGATIVE)]
                     + [" ".join(sorted(_DISMISSIVE)),
                        f"{CONTINUES} {KEYWORDS_BACK} {DISINTERESTED} {SKIP_FOUND}"])
