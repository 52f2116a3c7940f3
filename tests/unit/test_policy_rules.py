"""Phases 0 and 1 of the turn policy decide and say why, in English and Korean."""

from __future__ import annotations

import numpy as np
import pytest
from celestial_memory.clock import ManualClock
from celestial_memory.policy import Action, Phase, Turn, TurnPolicy, cues, rules
from celestial_memory.policy.turn_policy import said


def decide(text: str, memory_count: int = 10, role: str = "user") -> tuple[Action, bool, Phase, str]:
    p = TurnPolicy(rng=np.random.default_rng(1), clock=ManualClock())
    d = p.decide(Turn(text, role), memory_count, dry_run=True)
    return d.action, d.keep, d.trace.phase, d.trace.rule


@pytest.mark.parametrize("text, rule", [
    ("As I said, the deploy moved to Friday", "refers back"),
    ("Do you remember the hotel we picked?", "refers back"),
    ("지난번에 말한 그 식당 이름이 뭐였지?", "refers back"),
    ("그때 우리 같이 갔던 곳", "refers back"),
    ("When did Caroline go to the support group?", "question"),
    ("어디서 만나기로 했어?", "question"),
])
def test_phase0_retrieves_questions_and_references_back(text: str, rule: str) -> None:
    action, _, phase, why = decide(text)
    assert (action, phase, why) == (Action.RETRIEVE, Phase.RETRIEVE_RULES, rule)


def test_phase0_needs_memories_and_a_caller_who_asks() -> None:
    assert decide("Do you remember the hotel?", memory_count=0)[0] is not Action.RETRIEVE
    assert decide("What kind of jobs are you thinking of?", role="assistant")[0] \
        is not Action.RETRIEVE


@pytest.mark.parametrize("text, rule", [
    ("Thanks!", "greeting, thanks or acknowledgement"),
    ("ok sounds good", "greeting, thanks or acknowledgement"),
    ("Good morning!", "greeting, thanks or acknowledgement"),
    ("안녕하세요 반가워요", "greeting, thanks or acknowledgement"),
    ("고마워요", "greeting, thanks or acknowledgement"),
    ("ㅋㅋㅋ", "greeting, thanks or acknowledgement"),
    ("Wow, that's so cool, you are amazing!", "reaction without news"),
])
def test_phase1_skips_fillers(text: str, rule: str) -> None:
    assert decide(text) == (Action.SKIP, False, Phase.CLEAR_RULES, rule)


@pytest.mark.parametrize("text, rule", [
    ("Remember: never deploy on Fridays", "explicit ask or secret"),
    ("The wifi password is hunter2", "explicit ask or secret"),
    ("기억해: 금요일에는 절대 배포하지 마", "explicit ask or secret"),
    ("My sister Emma lives in Toronto and she loves sushi", "importance >= 0.7"),
    ("저는 매운 음식을 좋아해요, 제 남편은 판교 회사에 다녀요", "importance >= 0.7"),
    ("I need to fix the gRPC server: it crashes with a timeout error", "importance >= 0.7"),
])
def test_phase1_saves_clear_facts(text: str, rule: str) -> None:
    assert decide(text) == (Action.SAVE, True, Phase.CLEAR_RULES, rule)


def test_importance_is_the_sum_of_its_parts() -> None:
    score, parts = rules.importance(cues.read("My sister Emma lives in Toronto and she loves sushi"))
    assert parts.keys() >= {"personal", "preference"}
    assert score == pytest.approx(min(1.0, sum(parts.values())))
    assert rules.importance(cues.read("ok"))[0] == 0.0


def test_a_plain_statement_goes_to_the_bandit() -> None:
    p = TurnPolicy(rng=np.random.default_rng(1), clock=ManualClock())
    d = p.decide(Turn("The Lisbon conference hotel is on Avenida da Liberdade"), 10, 0.6)
    assert d.trace.phase is Phase.BANDIT
    assert set(d.trace.scores) == {"SAVE", "SKIP"}
    assert 0.0 < d.trace.probability <= 1.0
    # A new tenant's bandit keeps what it has not learnt about.
    assert d.keep


def test_a_retrieve_says_whether_the_turn_is_kept_and_why() -> None:
    p = TurnPolicy(rng=np.random.default_rng(1), clock=ManualClock())
    d = p.decide(Turn("As I said, my wife Priya is allergic to peanuts, what should I cook?"),
                 10)
    assert d.action is Action.RETRIEVE and d.keep
    assert d.trace.keep_by == "importance >= 0.7"
    d = p.decide(Turn("Wow, really? Did you like it?"), 10)
    assert d.action is Action.RETRIEVE and not d.keep
    assert d.trace.keep_by == "reaction without news"


def test_informative_statements_without_cues() -> None:
    assert cues.informative("The Lisbon conference hotel is on Avenida da Liberdade")
    assert cues.informative("Flight delays at Lisbon airport are common in summer")
    for text in ("What a nice day it is today", "This pizza is great", "Thanks, that helps!",
                 "Where is the hotel?", "그렇구나"):
        assert not cues.informative(text), text


@pytest.mark.parametrize("text", ["", "   ", "ㅋ" * 50_000 + "x", "a" * 4_000_000,
                                  bytes(range(256)).decode("latin-1") * 4096])
def test_hostile_turns_are_decided_and_read_by_their_head(text: str) -> None:
    assert cues.read(text).words <= cues.MAX_READ
    action, _, phase, why = decide(text)
    assert why or phase is Phase.BANDIT  # every decision says why
    if not text.strip():
        assert (action, why) == (Action.SKIP, "greeting, thanks or acknowledgement")


def test_a_transcript_label_naming_the_speaker_is_read_past() -> None:
    assert said(Turn("Ann: Hi Bo!", role="Ann")) == "Hi Bo!"
    assert said(Turn("ann:  Thanks!", role="Ann")) == "Thanks!"
    # Only the role's own name: an ask to remember keeps its word, another name stays.
    assert said(Turn("Remember: never deploy on Fridays", role="user")) \
        == "Remember: never deploy on Fridays"
    assert said(Turn("Bo: Hi Ann!", role="Ann")) == "Bo: Hi Ann!"


@pytest.mark.parametrize(("text", "action", "rule"), [
    ("Please remember that my sister Ana lives in Lisbon.", "SAVE", "explicit ask or secret"),
    ("Remember my PIN is 1234", "SAVE", "explicit ask or secret"),
    ("Remember when we went to Porto", "RETRIEVE", "refers back"),
    ("Remind me where my sister lives", "RETRIEVE", "refers back"),
])
def test_an_ask_to_remember_keeps_and_an_ask_to_recall_retrieves(
        text: str, action: str, rule: str) -> None:
    d = TurnPolicy().decide(Turn(text, session="s"), memory_count=3, novelty=0.5, dry_run=True)
    assert (d.action.value, d.trace.rule) == (action, rule)


def test_a_reward_about_keeping_a_retrieve_turn_counts_against_the_keeping_rule() -> None:
    p = TurnPolicy()
    d = p.decide(Turn("Do you remember that my PIN is 1234? Remember: it's a secret.",
                      session="s"), memory_count=3, novelty=0.5)
    assert d.action is Action.RETRIEVE and d.trace.keep_by not in ("", "bandit")
    p.learn(d.id, -0.5, keep=True)
    assert p.counters.by_rule == {f"1:{d.trace.keep_by}": -0.5}
    p.learn(d.id, -0.25)  # about the answer: the question's rule
    assert p.counters.by_rule[f"0:{d.trace.rule}"] == -0.25
