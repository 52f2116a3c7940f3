"""The turn policy's bandit and rewards: bounded under bursts, rules never flipped, state
round-trips through its dict, decisions reproducible from the random generator."""

from __future__ import annotations

import json

import numpy as np
import pytest
from celestial_memory.clock import ManualClock
from celestial_memory.policy import (
    FEATURES,
    Action,
    BanditConfig,
    LinUCB,
    Phase,
    PolicyConfig,
    PolicyStateError,
    Turn,
    TurnPolicy,
    fingerprint,
    rewards,
)

CONVERSATION = [
    "Hey! How have you been?", "I went to a support group yesterday and it was powerful.",
    "Wow, that's cool! What happened?", "The Lisbon conference hotel is on Avenida da Liberdade",
    "My sister Emma lives in Toronto", "Thanks!", "I started pottery classes last week",
    "Do you remember the hotel?", "오늘 회의 자료를 정리했어", "ok", "그때 먹은 파스타 맛있었지",
    "We adopted a puppy called Max", "That sounds fun", "I finally finished the marathon",
]


def policy(seed: int = 3, implicit: bool = True, **bandit: float) -> TurnPolicy:
    cfg = PolicyConfig(BanditConfig(**bandit), implicit)  # type: ignore[arg-type]
    return TurnPolicy(cfg, np.random.default_rng(seed), ManualClock())


def run(p: TurnPolicy, texts: list[str]) -> list[tuple[str, bool, int, float]]:
    out = []
    for i, t in enumerate(texts):
        d = p.decide(Turn(t, session="s"), memory_count=i, novelty=0.5)
        p.learn(d.id, 0.5 if d.keep else -0.5)
        out.append((d.action.value, d.keep, int(d.trace.phase), d.trace.probability))
    return out


def test_the_bandit_stays_within_its_bound_under_1000_negative_rewards() -> None:
    b = LinUCB(["SAVE", "SKIP"], len(FEATURES), BanditConfig(max_norm=2.0),
               np.random.default_rng(0))
    rng = np.random.default_rng(1)
    for _ in range(1000):
        x = rng.random(len(FEATURES))
        b.update(int(rng.integers(2)), x, -1e9)  # far past the reward bound
    theta = b.theta()
    assert np.all(np.linalg.norm(theta, axis=1) <= 2.0 + 1e-9)
    x = np.ones(len(FEATURES))
    s = b.scores(x)
    assert np.all(np.isfinite(s))
    width = b.config.alpha * np.sqrt(x @ x / b.config.ridge)  # A ⪰ λI
    assert np.all(np.abs(s) <= b.bound(float(np.linalg.norm(x))) + width + 1e-9)
    # The ridge stays: A's smallest eigenvalue never drops below λ.
    assert np.linalg.eigvalsh(b.A).min() >= b.config.ridge - 1e-9


def test_a_reward_is_bounded_per_decision() -> None:
    p = policy()
    d = p.decide(Turn("The Lisbon conference hotel is on Avenida da Liberdade"), 10, 0.5)
    assert d.trace.phase is Phase.BANDIT
    learnt = [p.learn(d.id, -5.0) for _ in range(1000)]
    assert learnt[0] == -1.0 and all(v == 0.0 for v in learnt[1:])
    assert p.counters.updates == 1
    # Each reward is clipped to [-1, 1], and all the decision is credited stays there too.
    assert [p.learn(d.id, 3.0) for _ in range(3)] == [1.0, 1.0, 0.0]
    assert p.learn(987654, -1.0) == 0.0  # a decision it never took


def test_a_burst_of_negative_rewards_cannot_flip_a_rules_decision() -> None:
    p = policy(implicit=False)  # only the burst's rewards
    ruled = {"Thanks!": Action.SKIP, "Remember: my PIN is 4821": Action.SAVE,
             "지난번에 말한 식당 어디였지?": Action.RETRIEVE,
             "My sister Emma lives in Toronto and she loves sushi": Action.SAVE}
    for text, action in ruled.items():
        for _ in range(1000):
            d = p.decide(Turn(text, session=text), 50, 0.5)
            assert d.action is action
            assert d.trace.phase is not Phase.BANDIT
            p.learn(d.id, -1.0)
    # The rules' rewards are counted against them, not fed to the bandit.
    assert p.counters.updates == 0
    assert p.counters.by_rule["1:greeting, thanks or acknowledgement"] == pytest.approx(-1000)
    theta = p.bandit.theta()
    assert np.all(np.linalg.norm(theta, axis=1) <= p.config.bandit.max_norm + 1e-9)


def test_explicit_feedback_in_english_and_korean() -> None:
    for text in ("Exactly, that's it", "Perfect!", "맞아, 그거야", "좋아요"):
        assert rewards.explicit(text) == 1.0, text
    for text in ("No, that's wrong", "Wrong, I said Tuesday", "아니야, 틀렸어", "틀렸어"):
        assert rewards.explicit(text) == -1.0, text
    for text in ("No problem, see you", "I moved to Lisbon"):
        assert rewards.explicit(text) is None, text


def test_implicit_rewards_and_the_skip_penalty() -> None:
    r = rewards.from_next_turn("The hotel on Liberdade was lovely", ("hotel", "liberdade"), True)
    assert r.parts == {"continues": 0.3, "keywords_back": 0.2} and r.value == pytest.approx(0.5)
    r = rewards.from_next_turn("The hotel on Liberdade was lovely", ("hotel",), False)
    assert r.parts["keywords_back"] == -0.2
    r = rewards.from_next_turn("ok", ("hotel",), True)
    assert r.parts == {"continues": 0.3, "disinterested": -0.1}
    assert rewards.from_next_turn("틀렸어", (), True).value == -1.0
    p = policy()
    skip = p.decide(Turn("Thanks!"), 5)
    save = p.decide(Turn("Remember: the gate code is 1942"), 5)
    assert p.skip_found(save.id) == 0.0  # only a SKIP is penalised
    assert p.skip_found(skip.id, "restored") == -1.0


def test_the_next_turn_rewards_the_decision_before_it() -> None:
    p = policy()
    first = p.decide(Turn("I adopted a guinea pig called Oscar", session="a"), 5, 0.5)
    p.decide(Turn("Perfect, exactly", session="b"), 5, 0.5)  # another session: not its reward
    assert p.counters.rewards == 0
    p.decide(Turn("Oscar loves carrots", session="a"), 5, 0.5)
    assert p.counters.rewards == 1
    assert p._pending[first.id].credited == pytest.approx(0.5)  # goes on, and "oscar" is back


def test_state_round_trips_through_its_dict() -> None:
    p = policy()
    run(p, CONVERSATION)
    saved = json.loads(json.dumps(p.to_dict()))  # JSON-ready, as Export would carry it
    assert saved["version"] == 1 and saved["fingerprint"] == fingerprint()
    q = TurnPolicy.from_dict(saved, np.random.default_rng(9), ManualClock())
    assert q.to_dict() == p.to_dict()
    np.testing.assert_allclose(q.bandit.theta(), p.bandit.theta())
    assert [d.to_dict() for d in q.last(5)] == [d.to_dict() for d in p.last(5)]
    # Both go on alike from the same generator state.
    p2 = TurnPolicy.from_dict(saved, np.random.default_rng(9), ManualClock())
    assert run(q, CONVERSATION) == run(p2, CONVERSATION)


def test_another_version_is_refused_and_another_schema_starts_the_bandit_again() -> None:
    p = policy()
    run(p, CONVERSATION)
    saved = p.to_dict()
    with pytest.raises(PolicyStateError):
        TurnPolicy.from_dict({**saved, "version": 99})
    q = TurnPolicy.from_dict({**saved, "fingerprint": "0" * 64}, clock=ManualClock())
    assert q.counters == p.counters
    assert int(q.bandit.updates.sum()) == 0
    assert not any(d.trace.phase is Phase.BANDIT for d in q.last(100))


def test_decisions_are_reproducible_from_the_generator() -> None:
    texts = CONVERSATION * 20
    a = run(policy(seed=11, epsilon=0.3), texts)
    b = run(policy(seed=11, epsilon=0.3), texts)
    assert a == b
    assert any(p < 1.0 - 0.3 + 0.3 / 2 - 1e-9 for _, _, ph, p in a if ph == 2)  # it explored


def test_propensities_follow_the_exploration() -> None:
    p = policy(seed=5, epsilon=0.2)
    probs = []
    for i in range(300):
        d = p.decide(Turn(f"I walked {i} steps along the river path near the old mill"), 10, 0.5)
        if d.trace.phase is Phase.BANDIT:
            probs.append((d.trace.explored, d.trace.probability))
    assert {round(pr, 6) for _, pr in probs} <= {0.9, 0.1}
    explored = sum(e for e, _ in probs) / len(probs)
    assert 0.03 < explored < 0.2  # half of ε's draws land on the best action anyway


def test_a_dry_run_records_nothing_and_draws_nothing() -> None:
    p = policy(epsilon=0.5)
    before = p.to_dict()
    state = p.bandit._rng.bit_generator.state
    d = p.decide(Turn("I went hiking near Sintra last weekend"), 10, 0.5, dry_run=True)
    assert d.dry_run and d.id == 0 and d.trace.probability == 1.0
    assert p.to_dict() == before
    assert p.bandit._rng.bit_generator.state == state
