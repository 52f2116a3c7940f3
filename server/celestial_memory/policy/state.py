"""The state the bandit decides from: one vector per turn, every feature in [0, 1].

| feature | what it is |
|---------|------------|
| bias | 1: the action's base rate |
| position | the turn's place in its session: previous turns / 20, at most 1 |
| memory_count | log(1 + memories the tenant holds) / log(1 + 10,000), at most 1 |
| keywords | content words / 20, at most 1 |
| is_question | the turn asks something |
| personal | personal information: names, relations, places, dates, numbers, duties |
| preference | a like, dislike, habit or diet |
| technical | code, systems and their words |
| emotion | a feeling |
| density | content words over words |
| novelty | 1 - the best cosine to what the tenant holds (1 when it holds nothing) |
| novelty_known | the caller measured novelty (else novelty reads 0.5) |
| recent_saves | the share of the last ``RECENT`` decisions that kept their turn |
| recent_retrieves | the share of the last ``RECENT`` decisions that were RETRIEVE |
| first_person | the speaker talks about themselves ("I", "my", "나는", "제가") |
| second_person | the turn addresses the other ("you", "너는") |
| names_numbers | a name or a number: 1 for two or more, 0.5 for one |
| length | log(1 + words) / log(1 + 100), at most 1 |
| reactions | the share of its sentences that only react to the other speaker ("Wow, cool!") |

``FEATURES`` is the schema: its order is the vector's, and its names are part of the policy's
fingerprint, so a state saved under another schema is not read as this one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from celestial_memory.policy.cues import Reading

FloatArray = npt.NDArray[np.float64]

FEATURES: tuple[str, ...] = (
    "bias", "position", "memory_count", "keywords", "is_question", "personal", "preference",
    "technical", "emotion", "density", "novelty", "novelty_known", "recent_saves",
    "recent_retrieves", "first_person", "second_person", "names_numbers", "length", "reactions",
)
RECENT = 10
_LOG_MEMORIES = math.log1p(10_000)
_LOG_WORDS = math.log1p(100)


def features(r: Reading, position: int, memory_count: int, novelty: float | None,
             recent_keeps: Sequence[bool], recent_retrieves: Sequence[bool]) -> FloatArray:
    """The state vector for one turn, in ``FEATURES`` order."""
    # With nothing held, everything is new; unmeasured, novelty sits in the middle and says so.
    known = memory_count <= 0 or (novelty is not None and math.isfinite(novelty))
    if memory_count <= 0:
        nov = 1.0
    elif novelty is not None and known:
        nov = min(1.0, max(0.0, float(novelty)))
    else:
        nov = 0.5
    keeps = recent_keeps[-RECENT:]
    rets = recent_retrieves[-RECENT:]
    x = np.array([
        1.0,
        min(1.0, max(0, position) / 20.0),
        min(1.0, math.log1p(max(0, memory_count)) / _LOG_MEMORIES),
        min(1.0, len(r.content_words) / 20.0),
        float(r.question),
        float(r.personal),
        float(r.preference),
        float(r.technical),
        float(r.emotion),
        r.density,
        nov,
        float(known),
        sum(keeps) / len(keeps) if keeps else 0.0,
        sum(rets) / len(rets) if rets else 0.0,
        float(r.first_person),
        float(r.second_person),
        min(1.0, (r.names + int(r.has_number)) / 2.0),
        min(1.0, math.log1p(r.words) / _LOG_WORDS),
        r.reactions,
    ], dtype=np.float64)
    return x


def named(x: FloatArray) -> dict[str, float]:
    """The vector by feature name, for a trace."""
    return {name: round(float(v), 4) for name, v in zip(FEATURES, x, strict=True)}
