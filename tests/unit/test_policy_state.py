"""The turn policy's state vector follows its schema, every feature in [0, 1]."""

from __future__ import annotations

import numpy as np
from celestial_memory.policy import FEATURES, cues, fingerprint
from celestial_memory.policy.state import features, named


def test_the_vector_follows_the_schema() -> None:
    r = cues.read("My sister Emma moved to Toronto in 2021, and she loves the gRPC docs?")
    x = features(r, position=3, memory_count=250, novelty=0.3,
                 recent_keeps=[True, False, True, True], recent_retrieves=[False, True])
    assert x.shape == (len(FEATURES),) and len(set(FEATURES)) == len(FEATURES)
    assert np.all((x >= 0.0) & (x <= 1.0))
    got = named(x)
    assert list(got) == list(FEATURES)
    assert got["bias"] == 1.0 and got["is_question"] == 1.0
    assert got["personal"] == got["preference"] == got["technical"] == 1.0
    assert got["novelty"] == 0.3 and got["novelty_known"] == 1.0
    assert got["recent_saves"] == 0.75 and got["recent_retrieves"] == 0.5
    assert got["position"] == 0.15 and got["first_person"] == 1.0


def test_novelty_without_memories_or_a_measure() -> None:
    r = cues.read("I went hiking")
    assert named(features(r, 0, 0, None, [], []))["novelty"] == 1.0  # nothing held yet
    unmeasured = named(features(r, 0, 10, None, [], []))
    assert (unmeasured["novelty"], unmeasured["novelty_known"]) == (0.5, 0.0)
    assert named(features(r, 0, 10, float("nan"), [], []))["novelty_known"] == 0.0


def test_extremes_stay_in_range() -> None:
    r = cues.read("word " * 10_000)
    x = features(r, 10**9, 10**12, -5.0, [True] * 50, [True] * 50)
    assert np.all((x >= 0.0) & (x <= 1.0))
    assert named(x)["novelty"] == 0.0


def test_the_fingerprint_is_a_sha256_of_rules_and_schema() -> None:
    f = fingerprint()
    assert len(f) == 64 and int(f, 16) >= 0
    assert f == fingerprint()
