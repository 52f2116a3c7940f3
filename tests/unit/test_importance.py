from __future__ import annotations

import pytest
from celestial_memory.config import Settings
from celestial_memory.domain.importance import (
    DefaultEvaluator,
    RuleBasedEvaluator,
    evaluator_from_settings,
)
from celestial_memory.domain.importance_cues import KINDS

from tests.unit.importance_cases import (
    CASES,
    FRESH,
    HELD_OUT,
    agreement,
    band,
    misses,
    zone_agreement,
)

rules = RuleBasedEvaluator()


def test_default_evaluator_is_constant() -> None:
    assert DefaultEvaluator().evaluate("anything") == 0.5


def test_plain_small_talk_scores_zero() -> None:
    assert rules.evaluate("hello there, how are you") == 0.0
    assert rules.evaluate("안녕하세요 반가워요") == 0.0


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Remember the garden gate sticks", "explicit"),
        ("잊지 마", "explicit"),
        ("the wifi password is long", "secret"),
        ("비밀번호 바꿨어", "secret"),
        ("we should tidy the shed", "duty"),
        ("보고서 제출해야 해", "duty"),
        ("Ana's brother is a chef", "person"),
        ("민수 고양이 이름은 나비", "person"),
        ("Theo prefers tea", "preference"),
        ("매운 음식을 좋아해요", "preference"),
        ("the parcel weighs 3 kg", "date or number"),
        ("9월 21일", "date or number"),
        ("I am so worried", "feeling"),
        ("걱정돼", "feeling"),
    ],
)
def test_one_kind_of_cue_gives_its_weight(text: str, kind: str) -> None:
    weights = {k.name: k.weight for k in KINDS}
    assert [k.name for k in KINDS if k.matches(text)] == [kind]
    assert rules.evaluate(text) == weights[kind]


def test_each_further_kind_adds_the_bonus_to_the_strongest() -> None:
    duty = rules.evaluate("I have a dentist appointment")
    assert rules.evaluate("I have a dentist appointment on March 3") == pytest.approx(
        duty + RuleBasedEvaluator.BONUS)  # a duty with a date
    assert rules.evaluate("I have a dentist appointment on March 3, I am worried") == \
        pytest.approx(duty + 2 * RuleBasedEvaluator.BONUS)


def test_a_feeling_alone_stays_in_the_belt() -> None:
    assert band(rules.evaluate("Haha, I love this, it is amazing")) == "low"
    assert band(rules.evaluate("정말 행복하고 멋진 하루")) == "low"


def test_the_reported_sentences_now_enter_outer() -> None:
    assert band(rules.evaluate("Bob's cat is named Whiskers")) == "medium"
    assert band(rules.evaluate("Remember: never deploy on Fridays")) == "high"


def test_short_korean_stems_do_not_match_inside_other_words() -> None:
    assert rules.evaluate("딸기가 맛있네") == 0.0  # strawberries, not a daughter
    assert rules.evaluate("형태가 특이하네") == 0.0  # a shape, not an elder brother
    assert band(rules.evaluate("형은 부산에 살아")) == "medium"


def test_the_labelled_table_agrees() -> None:
    assert len(CASES) >= 40
    assert agreement(rules.evaluate, CASES) >= 0.95, misses(rules.evaluate, CASES)


def test_sentences_the_rules_were_not_tuned_on_agree_too() -> None:
    assert agreement(rules.evaluate, HELD_OUT) >= 0.9, misses(rules.evaluate, HELD_OUT)
    assert zone_agreement(rules.evaluate, FRESH) >= 0.85, misses(rules.evaluate, FRESH)


def test_scores_stay_in_unit_interval() -> None:
    text = "remember: urgent meeting 2024-01-01 5 kg, my wife loves it, amazing, password"
    assert rules.evaluate(text) == 1.0
    assert all(0.0 <= rules.evaluate(t) <= 1.0 for t, _ in CASES + HELD_OUT + FRESH)


def test_settings_choose_the_evaluator() -> None:
    assert isinstance(evaluator_from_settings(Settings()), RuleBasedEvaluator)
    d = evaluator_from_settings(Settings(importance_evaluator="default", default_importance=0.7))
    assert d.evaluate("x") == 0.7
