"""A reward reaches the decision that earned it, and only once: decision ids that a kill or a
reset would number again, a Restore retried, an Import of an old dump."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from celestial_memory.clock import ManualClock
from celestial_memory.domain.models import Memory, Vector
from celestial_memory.domain.requests import NewMemory
from celestial_memory.memory.observing import ObservedTurn
from celestial_memory.memory.service import MemoryService
from celestial_memory.policy.bandit import BanditConfig
from celestial_memory.policy.keeping import PolicyKeeper
from celestial_memory.policy.turn_policy import PolicyConfig

T = "rewards"


def _skipped(service: MemoryService, text: str = "hey") -> Memory:
    out = service.observing.observe(T, ObservedTurn(text, session="s"))
    assert out.decision.action.value == "SKIP" and out.memory is not None
    return out.memory


def _penalties(service: MemoryService) -> float:
    return sum(v for v in service.observing.policies.of(T).counters.by_rule.values() if v < 0)


def test_a_decision_numbered_again_after_a_kill_takes_no_other_turns_reward(
        service: MemoryService, clock: ManualClock) -> None:
    service.observing.policies.close()
    service.observing.policies = PolicyKeeper(service.store, clock, 60.0)  # no save meanwhile
    old = _skipped(service)
    # A kill before the policy was saved: the next process reads no policy, and numbers from 1.
    service.observing.policies.close(save=False)
    service.observing.policies = PolicyKeeper(service.store, clock, 60.0)
    clock.advance(5)
    new = _skipped(service, "good morning")
    assert new.metadata["policy_decision"] == old.metadata["policy_decision"] == "1"
    service.restore(T, old.id)  # the old turn's skip, not the new one's
    assert _penalties(service) == 0.0
    service.restore(T, new.id)
    assert _penalties(service) == -1.0


def test_a_restore_retried_is_not_a_second_penalty(service: MemoryService) -> None:
    m = _skipped(service)
    service.restore(T, m.id)
    after_one = service.observing.policies.of(T).counters.rewards
    service.restore(T, m.id)  # a retry: the memory is live, answered as it is
    assert service.observing.policies.of(T).counters.rewards == after_one


def test_a_reset_keeps_numbering_on_across_a_restart(
        service: MemoryService, clock: ManualClock) -> None:
    _skipped(service)
    _skipped(service, "thanks!")
    assert service.observing.policies.reset(T) == 2
    service.observing.policies.close(save=False)  # a kill right after the reset answered
    restarted = PolicyKeeper(service.store, clock, 60.0)  # reads what the reset saved
    assert sum(restarted.of(T).counters.decisions.values()) == 0
    service.observing.policies = restarted
    assert _skipped(service, "hello!").metadata["policy_decision"] == "3"


def test_an_import_keeps_a_tenants_own_policy_unless_it_replaces(
        service: MemoryService) -> None:
    keeper = service.observing.policies
    _skipped(service)
    dump = keeper.exported(T)
    assert dump is not None
    _skipped(service, "thanks!")
    assert not keeper.restore(T, dump)  # the tenant's own policy decided: it stays
    assert sum(keeper.of(T).counters.decisions.values()) == 2
    assert keeper.restore(T, dump, replace=True)
    assert sum(keeper.of(T).counters.decisions.values()) == 1
    # Its ids still never go back.
    assert _skipped(service, "hi!").metadata["policy_decision"] == "3"
    assert keeper.restore("fresh", dump)  # a tenant that never decided takes it


def test_a_saved_turn_that_repeats_a_live_memory_merges_into_it(
        service: MemoryService, monkeypatch: pytest.MonkeyPatch) -> None:
    fact = "I moved to Lisbon in May 2023 with my sister Ana."
    first = service.store_memory(T, NewMemory(fact))
    searches: list[int] = []
    real = service.store.nearest_live

    def counted(tenant: str, vectors: Sequence[Vector], limit: int) -> list[list[tuple[str, float]]]:
        searches.append(len(vectors))
        return real(tenant, vectors, limit)

    monkeypatch.setattr(service.store, "nearest_live", counted)
    service.observing.policies.close()
    service.observing.policies = PolicyKeeper(
        service.store, service.clock, 60.0, PolicyConfig(BanditConfig(epsilon=0.0)))
    out = service.observing.observe(T, ObservedTurn(fact, session="s"))
    assert out.decision.keep and not out.created and out.merged_into == first.id
    # The novelty search served the repeat check: one search for the whole turn.
    assert searches == [1]
