"""Importance evaluators: A(m) when the caller does not give one (docs/design.md, "The memory function").

- ``DefaultEvaluator``: a constant (0.5).
- ``RuleBasedEvaluator``: factual / emotional / actionable / explicit patterns, each
  with Korean counterparts (personal-information and preference cues included).
  Korean attaches particles to words, so its patterns match stems without word boundaries.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from celestial_memory.config import Settings


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


Cue = tuple[re.Pattern[str], re.Pattern[str]]


def _cue(english: str, korean: str) -> Cue:
    return re.compile(english, re.IGNORECASE), re.compile(korean, re.IGNORECASE)


# Each category is a list of cues; a cue is an English pattern and its Korean
# counterpart, and it matches when either does.
FACTUAL: list[Cue] = [
    _cue(r"\b\d{4}[-/]\d{1,2}[-/]\d{1,2}\b", r"\d{4}\s*년|\d{1,2}\s*월\s*\d{1,2}\s*일"),
    _cue(r"\b\d+\s*(kg|km|m|cm|mm|gb|mb|tb|%)(?!\w)", r"\d+\s*(킬로|미터|센티|기가|메가|퍼센트)"),
    _cue(
        r"\b(fact|data|statistic|number|result)s?\b",
        r"사실|데이터|통계|수치|결과|내 이름은|제 이름은|에 살아|에 살고|생일|전화번호|주소",
    ),
]
EMOTIONAL: list[Cue] = [
    _cue(
        r"\b(love|hate|happy|sad|angry|fear|joy|excited|worried)\b",
        r"사랑|싫어|미워|행복|슬퍼|슬프|화가|화나|무서|두려|기뻐|기쁘|신나|걱정|번아웃|좋아해|좋아하",
    ),
    _cue(r"\b(amazing|terrible|wonderful|horrible|fantastic|awful)\b", r"최고|끔찍|멋지|멋진|훌륭|최악"),
]
ACTIONABLE: list[Cue] = [
    _cue(
        r"\b(todo|must|should|need to|have to|deadline|urgent|asap)\b",
        r"해야|할 일|마감|급해|급한|긴급|반드시",
    ),
    _cue(r"\b(schedule|meeting|appointment|task|action item)s?\b", r"일정|회의|미팅|약속|예약|업무|과제"),
]
EXPLICIT: list[Cue] = [
    _cue(
        r"\b(important|critical|remember|never forget|key|essential)\b",
        r"중요|핵심|기억해|잊지 ?마|필수",
    ),
    _cue(r"\b(password|secret|api.?key|token|credential)s?\b", r"비밀번호|암호|비밀|토큰|인증|api ?키"),
]


class RuleBasedEvaluator:
    """Weighted share of matched cues: 0.25 factual, 0.25 emotional, 0.30 actionable,
    0.20 explicit; a category's share is matched cues / cues."""

    WEIGHTS = ((FACTUAL, 0.25), (EMOTIONAL, 0.25), (ACTIONABLE, 0.30), (EXPLICIT, 0.20))

    def evaluate(self, content: str) -> float:
        total = sum(w * self._share(content, cues) for cues, w in self.WEIGHTS)
        return max(0.0, min(1.0, total))

    def evaluate_many(self, contents: Sequence[str], tenant: str = "") -> list[float]:
        return [self.evaluate(c) for c in contents]

    @staticmethod
    def _share(text: str, cues: list[Cue]) -> float:
        matched = sum(1 for en, ko in cues if en.search(text) or ko.search(text))
        return matched / len(cues)


def evaluator_from_settings(s: Settings) -> ImportanceEvaluator:
    """The rules or the constant; "llm" calls out, so the wiring makes it (app.py)."""
    if s.importance_evaluator == "default":
        return DefaultEvaluator(s.default_importance)
    return RuleBasedEvaluator()
