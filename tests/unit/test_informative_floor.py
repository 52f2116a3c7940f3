"""The floor on importance for a statement that holds a fact (``RuleBasedEvaluator``,
``domain/statement_cues.py`` ``informative``): plain facts enter outer, not the belt, and greetings,
thanks and fillers stay at 0.

FACTS and FILLERS were written for this floor before it was run on them, and measured once; the
rules were not tuned to them.
"""

from __future__ import annotations

import pytest
from celestial_memory.config import Settings
from celestial_memory.domain.importance import RuleBasedEvaluator
from celestial_memory.domain.scoring import MemoryFunction
from celestial_memory.domain.statement_cues import informative
from celestial_memory.domain.zones import Zone, ZoneTable

rules = RuleBasedEvaluator()
FLOOR = RuleBasedEvaluator.INFORMATIVE_FLOOR

# Plain facts: places, names, numbers, things as they are; a few happen to show a cue.
FACTS: list[str] = [
    "The Lisbon conference hotel is on Avenida da Liberdade",
    "Flight delays at Lisbon airport are common in summer",
    "The museum closes early on public holidays",
    "Our office building has a rooftop garden",
    "The train from Porto to Lisbon takes about three hours",
    "Priya's team moved the release to the Berlin data centre",
    "The bakery on Rua Augusta sells the best custard tarts",
    "The spare keys are in the blue drawer in the hallway",
    "Marco plays bass in a jazz band on weekends",
    "The quarterly report covers sales in Spain and Portugal",
    "Gym membership costs 45 euros per month",
    "The new printer on the third floor jams with thick paper",
    "Nadia studied marine biology at the University of Lisbon",
    "The heating in the guest room does not work properly",
    "Tokyo was the first stop on our trip",
    "The parking garage under the hotel fills up by eight",
    "Elena speaks Portuguese, French and a little Japanese",
    "The hiking trail to the lighthouse starts behind the church",
    "Our landlord replaced the kitchen windows last spring",
    "The water in the old town tastes of chlorine",
    "Sunrise over the Tagus river is spectacular from the castle",
    "The conference badge pickup desk is next to the main entrance",
    "Ahmed drives a grey Volvo estate",
    "Most restaurants in the neighbourhood close on Mondays",
    "리스본 회의 호텔은 리베르다드 대로에 있어",
    "그 박물관은 공휴일에 일찍 문을 닫아",
    "포르투에서 리스본까지 기차로 세 시간 정도 걸려",
    "사무실 건물 옥상에 작은 정원이 있어",
    "지하 주차장은 아침 여덟 시면 꽉 차",
    "여름에는 리스본 공항에서 비행기 지연이 잦아",
]
# Greetings, thanks, acknowledgements, farewells.
FILLERS: list[str] = [
    "Hi!",
    "Hey, how's it going?",
    "Good morning, everyone",
    "Thanks so much!",
    "Thank you, Mel!",
    "Thanks a lot for your help",
    "You're welcome",
    "No worries at all",
    "ok cool",
    "Sounds good to me",
    "Sure, no problem",
    "Haha yes, exactly",
    "Got it, thanks",
    "Have a great weekend!",
    "Good night, talk to you soon",
    "See you later!",
    "Bye for now",
    "Hmm, okay",
    "Nice to meet you",
    "Cheers, mate",
    "안녕!",
    "고마워요",
    "감사합니다!",
    "네 알겠습니다",
    "ㅋㅋㅋㅋ",
    "잘 자, 내일 봐",
]

# A filler the cues read on their own, before the floor as after: the date cue reads 내일
# (tomorrow), as it reads "See you tomorrow!" (importance_cases.FRESH).
CUED_FILLERS = {"잘 자, 내일 봐": 0.45}


def first_zone(importance: float) -> Zone:
    """The zone a new memory enters with default settings: R = F = C = 0 at its creation."""
    s = Settings()
    score = float(MemoryFunction.from_settings(s).total(0, 100.0, importance, 0.0, 100.0))
    return ZoneTable.from_settings(s).zone_of_score(score)


def test_the_floor_enters_outer_and_no_importance_enters_the_belt() -> None:
    assert first_zone(FLOOR) is Zone.OUTER
    assert first_zone(0.0) is Zone.BELT


@pytest.mark.parametrize("text", ["The Lisbon conference hotel is on Avenida da Liberdade",
                                  "Flight delays at Lisbon airport are common in summer"])
def test_a_fact_without_cues_gets_the_floor(text: str) -> None:
    assert informative(text)
    assert rules.evaluate(text) == FLOOR


def test_most_plain_facts_reach_the_floor() -> None:
    low = [(t, rules.evaluate(t)) for t in FACTS if rules.evaluate(t) < FLOOR]
    assert len(low) <= 0.1 * len(FACTS), low


def test_greetings_thanks_and_fillers_stay_at_zero() -> None:
    for text in FILLERS:
        assert not informative(text), text
        assert rules.evaluate(text) == CUED_FILLERS.get(text, 0.0), text


def test_the_floor_lifts_a_weaker_cue_and_leaves_a_stronger_one() -> None:
    # A feeling beside a fact does not leave it below the fact alone; a feeling alone stays.
    assert rules.evaluate("Flight delays at Lisbon airport are common in summer, it is awful") \
        == FLOOR
    assert rules.evaluate("I am so worried") == 0.3
    assert rules.evaluate("Bob's cat is named Whiskers") == 0.5


def test_evaluate_many_agrees_with_evaluate() -> None:
    texts = FACTS + FILLERS
    assert rules.evaluate_many(texts) == [rules.evaluate(t) for t in texts]
