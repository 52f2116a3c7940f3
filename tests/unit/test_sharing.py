"""Sharing what the turn policies learnt (celestial_memory/sharing/): clipping holds its bound,
Krum and Multi-Krum keep a bad update out, an update learnt under other rules or damaged is
refused, what travels holds nothing of the tenant's turns, and a merge keeps the bandit within
its bounds whatever it is sent."""

from __future__ import annotations

import json

import numpy as np
import pytest
from celestial_memory.clock import ManualClock
from celestial_memory.policy import FEATURES, Action, BanditConfig, PolicyConfig, Turn, TurnPolicy
from celestial_memory.policy.turn_policy import ARMS
from celestial_memory.sharing import (
    PolicyUpdate,
    SharingConfig,
    TooFew,
    UpdateRefused,
    aggregate,
    apply,
    clip,
    krum,
    merge,
    multi_krum,
    noised,
    of,
    privacy,
    select,
    step,
)
from celestial_memory.sharing import update as update_mod

DIM = len(FEATURES)
TENANT = "tenant-orangutan-7731"
# Words no feature, rule or schema name holds: if one reaches the bytes, a turn did.
WORDS = ["Zanzibar", "marmalade", "Quetzalcoatl", "Thelonius", "xylophone", "Okavango",
         "Vindaloo", "Pemberley", "bergamot"]
TURNS = [
    "The Zanzibar marmalade festival is near the Quetzalcoatl bridge",
    "Grandpa Thelonius keeps his xylophone in the observatory",
    "The Vindaloo caravan stops by the Okavango pier",
    "the Pemberley orchard smells of bergamot",
]


def trained(seed: int = 3, turns: int = 60, reward: float = 0.5) -> TurnPolicy:
    """A policy whose bandit learnt from ``turns`` of the distinctive turns (SAVE and, by its
    exploration, SKIP)."""
    p = TurnPolicy(PolicyConfig(BanditConfig(epsilon=0.3), implicit=False),
                   np.random.default_rng(seed), ManualClock())
    for i in range(turns):
        d = p.decide(Turn(TURNS[i % len(TURNS)], role="Ann", session=TENANT), i, 0.5)
        p.learn(d.id, reward if d.keep else -reward, keep=True)
    return p


def within_bounds(p: TurnPolicy) -> None:
    cfg = p.config.bandit
    eig = np.linalg.eigvalsh(p.bandit.A)
    assert eig.min() >= cfg.ridge - 1e-9
    assert eig.max() <= cfg.ridge + DIM / (1 - cfg.discount) + 1e-6
    assert np.all(np.linalg.norm(p.bandit.theta(), axis=1) <= cfg.max_norm + 1e-9)
    assert np.isfinite(p.bandit.b).all()
    d = p.decide(Turn(TURNS[0], role="Ann"), 10, 0.5, dry_run=True)
    assert all(np.isfinite(v) for v in d.trace.scores.values())


def test_clipping_holds_its_bound_on_random_vectors() -> None:
    rng = np.random.default_rng(0)
    for _ in range(500):
        v = rng.normal(size=int(rng.integers(1, 400))) * 10 ** rng.uniform(-3, 3)
        bound = 10 ** rng.uniform(-2, 2)
        c = clip(v, bound)
        assert np.linalg.norm(c) <= bound * (1 + 1e-12)
        if np.linalg.norm(v) <= bound:
            assert np.array_equal(c, v)  # a short vector is left as it is
        else:
            assert np.allclose(c / np.linalg.norm(c), v / np.linalg.norm(v))  # same direction
    with pytest.raises(ValueError):
        clip(np.ones(3), 0.0)


def honest_and_bad(attack: str, n_honest: int = 4, seed: int = 1) -> tuple[np.ndarray, int]:
    rng = np.random.default_rng(seed)
    centre = rng.uniform(0.2, 1.0, 50)
    honest = centre + rng.normal(0, 0.05, (n_honest, 50))
    bad = {"far": centre + 20.0, "x100": 100 * honest[0], "sign flip": -honest[0],
           "random": rng.normal(size=50) * np.linalg.norm(honest[0]) / np.sqrt(50)}[attack]
    at = int(rng.integers(n_honest + 1))  # the bad one is not always last
    return np.insert(honest, at, bad, axis=0), at


def test_krum_picks_an_honest_update_among_four_close_and_one_far() -> None:
    x, bad = honest_and_bad("far")
    pick = krum(x, f=1)
    assert pick != bad
    # The pick lies within the honest updates' own spread around their mean.
    honest = np.delete(x, bad, axis=0)
    mean = honest.mean(axis=0)
    assert np.linalg.norm(x[pick] - mean) <= np.linalg.norm(honest - mean, axis=1).max()


def test_krum_refuses_when_too_few_updates_to_tolerate_f() -> None:
    x, _ = honest_and_bad("far", n_honest=3)  # n = 4 = 2f + 2
    with pytest.raises(TooFew, match="more than 4"):
        krum(x, f=1)
    assert krum(x[:3], f=0) in (0, 1, 2)  # f = 0 needs n > 2


@pytest.mark.parametrize("attack", ["x100", "sign flip", "random"])
def test_multi_krum_leaves_out_one_byzantine_update(attack: str) -> None:
    x, bad = honest_and_bad(attack)
    assert bad not in select(x, f=1, m=4)
    honest = np.delete(x, bad, axis=0)
    assert np.allclose(multi_krum(x, f=1, m=4), honest.mean(axis=0))
    # The plain mean is what the bad update drags.
    assert np.linalg.norm(x.mean(axis=0) - honest.mean(axis=0)) > 0.2


def test_a_step_moves_toward_the_aggregate_by_a_bounded_amount() -> None:
    rng = np.random.default_rng(2)
    for _ in range(200):
        own, agg = rng.normal(size=30), rng.normal(size=30) * 100
        rate, bound = rng.uniform(0, 1), rng.uniform(0, 3)
        new = step(own, agg, rate, bound)
        moved = np.linalg.norm(new - own)
        assert moved <= bound + 1e-9
        assert moved <= rate * np.linalg.norm(agg - own) + 1e-9
        assert np.dot(new - own, agg - own) >= 0  # toward it, never away


def test_an_update_round_trips_through_its_bytes() -> None:
    u = of(trained())
    assert u.counts[0] > 0 and u.counts[1] > 0  # both arms learnt something
    back = PolicyUpdate.from_bytes(u.to_bytes())
    assert np.array_equal(back.vector, u.vector) and back.counts == u.counts
    assert back.fingerprint == u.fingerprint
    with pytest.raises(ValueError):
        u.vector[0] = 1.0  # what was read or built is not changed in place


def test_an_update_learnt_under_another_fingerprint_is_refused() -> None:
    p = trained()
    u = of(p)
    other = json.loads(u.to_bytes())
    other["fingerprint"] = "0" * 64
    with pytest.raises(UpdateRefused, match="fingerprint"):
        PolicyUpdate.from_bytes(json.dumps(other).encode())
    with pytest.raises(UpdateRefused, match="fingerprint"):
        PolicyUpdate.from_bytes(u.to_bytes(), expect="f" * 64)
    foreign = PolicyUpdate("0" * 64, u.vector, u.counts)
    before = p.bandit.A.copy()
    with pytest.raises(UpdateRefused, match="fingerprint"):
        merge(p, [u, u, u, foreign])
    with pytest.raises(UpdateRefused, match="fingerprint"):
        apply(p, foreign)
    assert np.array_equal(p.bandit.A, before)


def test_what_travels_holds_none_of_the_tenants_turns() -> None:
    p = trained()
    held = json.dumps(p.to_dict())
    assert any(w.lower() in held.lower() for w in WORDS)  # the policy itself did read them
    data = of(p).to_bytes()
    text = data.decode().lower()
    for word in [*WORDS, TENANT, "ann"]:
        assert word.lower() not in text, word
    assert set(json.loads(data)) == {"format", "version", "fingerprint", "counts", "vector"}
    assert len(data) <= update_mod.MAX_BYTES
    # An arm with too few rewards travels empty: one turn's features are never its moment.
    few = of(trained(turns=3))
    assert 0.0 in few.counts
    assert not few.vector[:update_mod.ARM_SIZE].any() or not few.vector[update_mod.ARM_SIZE:].any()


def test_nan_infinity_wrong_length_and_oversize_are_refused() -> None:
    good = json.loads(of(trained()).to_bytes())

    def with_(key: str, value: object) -> bytes:
        return json.dumps({**good, key: value}).encode()

    nan_vector = [float("nan"), *good["vector"][1:]]
    for data, why in [
        (with_("vector", nan_vector), "NaN"),
        (with_("vector", [float("inf"), *good["vector"][1:]]), "Infinity"),
        (with_("counts", [float("-inf"), 1.0]), "Infinity"),
        (with_("vector", good["vector"][:-1]), "values"),
        (with_("vector", [*good["vector"], 0.0]), "values"),
        (with_("counts", [1.0]), "counts"),
        (with_("counts", [-1.0, 1.0]), "count"),
        (with_("vector", ["0.5"] * update_mod.SIZE), "numbers"),
        (with_("version", 2), "version"),
        (with_("format", "something-else"), "not a celestial-policy-update"),
        (b"\xff\xfe", "JSON"),
        (b"[]", "celestial-policy-update"),
        (with_("padding", "x" * update_mod.MAX_BYTES), "bytes"),
    ]:
        with pytest.raises(UpdateRefused, match=why):
            PolicyUpdate.from_bytes(data)
    with pytest.raises(UpdateRefused, match="NaN"):
        PolicyUpdate(good["fingerprint"], np.array(nan_vector), (1.0, 1.0))


def test_a_merged_bandit_stays_within_its_bounds_whatever_it_is_sent() -> None:
    p = trained()
    u = of(p)
    rng = np.random.default_rng(5)
    hostile = [
        PolicyUpdate(u.fingerprint, 1e6 * u.vector, (1e6, 1e6)),
        PolicyUpdate(u.fingerprint, -1e3 * u.vector, u.counts),
        PolicyUpdate(u.fingerprint, rng.normal(0, 1e3, update_mod.SIZE), (5e5, 1.0)),
    ]
    for bad in hostile:
        apply(p, bad)  # straight in, no aggregation: the bandit's own bounds still hold
        within_bounds(p)
    for bad in hostile:  # and through a merge, among honest peers
        q = trained(seed=11)
        merge(q, [of(trained(seed=s)) for s in (12, 13, 14)] + [bad])
        within_bounds(q)


def test_a_merge_keeps_the_byzantine_update_out_and_moves_a_bounded_step() -> None:
    p = trained(seed=21)
    own = of(p)
    peers = [of(trained(seed=s)) for s in (22, 23, 24)]
    bad = PolicyUpdate(own.fingerprint, -100 * own.vector, own.counts)
    cfg = SharingConfig(f=1, clip=2.0, rate=0.5, max_step=0.3)
    merged = merge(p, [*peers, bad], cfg)
    assert 3 not in merged.chosen
    assert 0 < merged.fraction <= 0.5
    assert np.linalg.norm(of(p).vector - own.vector) <= 0.3 + 1e-6
    # Too few updates for f = 1 (own and two peers): refused, and nothing changes.
    before = p.bandit.A.copy()
    with pytest.raises(TooFew):
        merge(p, peers[:2], cfg)
    assert np.array_equal(p.bandit.A, before)


def test_a_new_tenant_learns_from_its_peers() -> None:
    cold = TurnPolicy(PolicyConfig(implicit=False), np.random.default_rng(0), ManualClock())
    assert of(cold).counts == (0.0, 0.0)  # nothing of its own: it is not among the n
    theta = cold.bandit.theta()
    peers = [of(trained(seed=s, reward=-0.8)) for s in (31, 32, 33, 34, 35)]
    merged = merge(cold, peers, SharingConfig(f=1))
    assert not merged.own_kept and len(merged.chosen) == 4
    assert np.all(cold.bandit.A[:, 0, 0] > cold.config.bandit.ridge)  # evidence on both arms
    assert not np.allclose(cold.bandit.theta(), theta)
    within_bounds(cold)


def test_noise_clips_then_perturbs_every_arm_and_hides_the_counts() -> None:
    u = of(trained(turns=6))
    assert 0.0 in u.counts  # an arm with too few rewards: sent empty without noise
    rng = np.random.default_rng(4)
    n = noised(u, 0.0, 0.5, rng)  # σ 0 only clips
    for k, c in enumerate(u.counts):
        block = n.vector[k * update_mod.ARM_SIZE:(k + 1) * update_mod.ARM_SIZE]
        assert np.linalg.norm(block) <= 0.5 + 1e-12 if c else not block.any()
    assert n.counts == u.counts
    noisy = noised(u, 0.1, 0.5, rng)
    # Under noise every arm travels, with a count that says nothing of the node's own.
    assert noisy.counts == (privacy.NOISED_COUNT,) * len(u.counts)
    for k in range(len(u.counts)):
        block = noisy.vector[k * update_mod.ARM_SIZE:(k + 1) * update_mod.ARM_SIZE]
        assert block.any() and not np.array_equal(block, n.vector[k * update_mod.ARM_SIZE:
                                                                   (k + 1) * update_mod.ARM_SIZE])


def test_the_privacy_spent_grows_with_the_releases_and_falls_with_the_noise() -> None:
    assert privacy.epsilon(1.0, 0, 1e-6) == 0.0
    assert privacy.epsilon(0.0, 1, 1e-6) == float("inf")
    one, ten = privacy.epsilon(2.0, 1, 1e-6), privacy.epsilon(2.0, 10, 1e-6)
    assert 0.0 < one < ten < 10 * one  # RDP composes better than adding epsilons
    assert privacy.epsilon(8.0, 10, 1e-6) < ten


def test_the_aggregate_carries_a_typical_nodes_evidence_or_their_sum() -> None:
    updates = [of(trained(seed=s)) for s in (11, 12, 13, 14, 15)]
    typical, kept = aggregate(updates, SharingConfig(f=1))
    summed, kept_too = aggregate(updates, SharingConfig(f=1, evidence="sum"))
    assert kept == kept_too and len(kept) == 4
    np.testing.assert_array_equal(typical.vector, summed.vector)  # only the counts differ
    for k, n in enumerate(typical.counts):
        with_arm = [updates[i].counts[k] for i in kept if updates[i].counts[k] > 0]
        assert n == float(np.median(with_arm))
        # The sum over every node that sent the arm: the one Krum left out is not unlearnt.
        senders = [u.counts[k] for u in updates if u.counts[k] > 0]
        assert summed.counts[k] == n * len(senders) and len(senders) > len(with_arm)


def test_multi_krum_keeps_the_m_most_central_and_never_more_than_n_minus_f() -> None:
    updates = [of(trained(seed=s)) for s in (11, 12, 13, 14, 15)]
    assert len(aggregate(updates, SharingConfig(f=1, m=2))[1]) == 2
    assert len(aggregate(updates, SharingConfig(f=1, m=10))[1]) == 4  # a setting above n - f
    with pytest.raises(TooFew):
        aggregate(updates[:4], SharingConfig(f=1, m=2))


def test_summed_evidence_sends_only_a_nodes_own_learning_and_never_compounds() -> None:
    node = trained(seed=11)
    peers = [of(trained(seed=s)) for s in (12, 13, 14, 15)]
    own = of(node, own=True)
    np.testing.assert_array_equal(own.vector, of(node).vector)  # nothing merged yet
    cfg = SharingConfig(f=1, evidence="sum")
    merge(node, peers, cfg)
    once = of(node)
    # What the node sends is still its own learning: nothing it was sent goes back out.
    np.testing.assert_array_equal(of(node, own=True).vector, own.vector)
    assert of(node, own=True).counts == own.counts
    for k, n in enumerate(once.counts):
        senders = [u.counts[k] for u in (own, *peers) if u.counts[k] > 0]
        assert n == pytest.approx(float(np.median(senders)) * len(senders), rel=0.3)
        assert n > 2 * own.counts[k]  # the peers' evidence, not only its own
    # The same peers merged again change nothing: each merge starts from the node's own.
    merge(node, peers, cfg)
    np.testing.assert_allclose(of(node).vector, once.vector)
    assert of(node).counts == pytest.approx(once.counts)
    within_bounds(node)
    # Its own learning survives a restart apart from what merges brought.
    back = TurnPolicy.from_dict(json.loads(json.dumps(node.to_dict())))
    np.testing.assert_allclose(of(back, own=True).vector, own.vector)
    np.testing.assert_allclose(of(back).vector, once.vector)


def test_an_arm_only_one_bad_update_holds_is_left_out_of_the_aggregate() -> None:
    honest = [of(trained(seed=s)) for s in (11, 12, 13, 14)]
    skip = ARMS.index(Action.SKIP)
    blanked = [PolicyUpdate(u.fingerprint, u.vector, tuple(0.0 if k == skip else c
                                                           for k, c in enumerate(u.counts)))
               for u in honest]
    rng = np.random.default_rng(5)
    bad = PolicyUpdate(honest[0].fingerprint, rng.normal(0.0, 1.0, update_mod.SIZE),
                       tuple(500.0 for _ in ARMS))
    out, _ = aggregate([*blanked, bad], SharingConfig(f=1))
    assert out.counts[skip] == 0.0  # no honest node learnt SKIP: nothing to take from the bad one
    assert out.counts[1 - skip] > 0.0
    # Two holders are enough with f = 1: the arm is merged as before.
    two = [*blanked[:3], honest[3], bad]
    assert aggregate(two, SharingConfig(f=1))[0].counts[skip] > 0.0
