"""Importance evaluators: A(m) when the caller does not give one (docs/design.md, "The memory function").

- ``DefaultEvaluator``: a constant (0.5).
- ``RuleBasedEvaluator``: kinds of cues in English and Korean (``importance_cues.py``):
  explicit asks, secrets, duties, people and their relations, preferences, dates and numbers,
  feelings; and a floor for a statement that holds a fact without them (``statement_cues.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from celestial_memory.config import Settings
from celestial_memory.domain.importance_cues import KINDS
from celestial_memory.domain.statement_cues import informative


class ImportanceEvaluator(Protocol):
    def evaluate(self, content: str) -> float:
        """Importance of ``content`` in [0, 1]."""
        ...

    def evaluate_many(self, contents: Sequence[str], tenant: str = "") -> list[float]:
        """Importances of a Store's or StoreBatch's contents, in order (one round trip for
        an evaluator that calls out; ``tenant`` keeps what it remembers apart)."""
        ...


class DefaultEvaluator:
    def __init__(self, value: float = 0.5) -> None:
        self._value = value

    def evaluate(self, content: str) -> float:
        return self._value

    def evaluate_many(self, contents: Sequence[str], tenant: str = "") -> list[float]:
        return [self._value] * len(contents)


class RuleBasedEvaluator:
    """The weight of the strongest kind of cue the text shows, plus ``BONUS`` for each other
    kind it shows, at most 1; at least ``INFORMATIVE_FLOOR`` for a statement that holds a fact
    (a name, a place, a number, dense content words); 0 when it shows neither, as greetings,
    thanks and fillers do (docs/design.md, "Importance by rules")."""

    BONUS = 0.15
    # A new memory's score is w_a·A and outer starts at 0.10: with the default weights a fact
    # enters outer, at its edge, and reaches the cloud 16 h after its last recall, not 8.
    INFORMATIVE_FLOOR = 0.4

    def evaluate(self, content: str) -> float:
        weights = sorted((k.weight for k in KINDS if k.matches(content)), reverse=True)
        score = min(1.0, weights[0] + self.BONUS * (len(weights) - 1)) if weights else 0.0
        # A floor, not a kind: a feeling beside a fact lifts no further, and a fact is read
        # only when the cues leave the text below it.
        if score < self.INFORMATIVE_FLOOR and informative(content):
            return self.INFORMATIVE_FLOOR
        return score

    def evaluate_many(self, contents: Sequence[str], tenant: str = "") -> list[float]:
        return [self.evaluate(c) for c in contents]


def evaluator_from_settings(s: Settings) -> ImportanceEvaluator:
    """The rules or the constant; "llm" calls out, so the wiring makes it (app.py)."""
    if s.importance_evaluator == "default":
        return DefaultEvaluator(s.default_importance)
    return RuleBasedEvaluator()
