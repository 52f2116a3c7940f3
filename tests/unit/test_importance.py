from __future__ import annotations

import pytest
from celestial_memory.config import Settings
from celestial_memory.domain.importance import (
    DefaultEvaluator,
    RuleBasedEvaluator,
    evaluator_from_settings,
)

rules = RuleBasedEvaluator()


def test_default_evaluator_is_constant() -> None:
    assert DefaultEvaluator().evaluate("anything") == 0.5


def test_plain_small_talk_scores_zero() -> None:
    assert rules.evaluate("hello there, how are you") == 0.0
    assert rules.evaluate("안녕하세요 반가워요") == 0.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("the meeting deadline is urgent", 0.30),  # actionable: both cues
        ("I love this, it is amazing", 0.25),  # emotional: both cues
        ("remember my password", 0.20),  # explicit: both cues
        ("on 2024-05-01 the result was 5 kg", 0.25),  # factual: all three cues
    ],
)
def test_each_english_category_weighs_as_the_seed_says(text: str, expected: float) -> None:
    assert rules.evaluate(text) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("내일 회의 마감이 있어서 해야 해", 0.30),
        ("정말 행복하고 멋진 하루", 0.25),
        ("이 비밀번호는 중요해", 0.20),
    ],
)
def test_korean_cues_count_like_their_english_pairs(text: str, expected: float) -> None:
    assert rules.evaluate(text) == pytest.approx(expected)


def test_scores_stay_in_unit_interval() -> None:
    text = "remember: urgent meeting 2024-01-01 5 kg data, I love it, amazing, password"
    assert 0.0 < rules.evaluate(text) <= 1.0


def test_settings_choose_the_evaluator() -> None:
    assert isinstance(evaluator_from_settings(Settings()), RuleBasedEvaluator)
    d = evaluator_from_settings(Settings(importance_evaluator="default", default_importance=0.7))
    assert d.evaluate("x") == 0.7
