"""A dry run that the rules decide is answered without encoding the turn (its novelty would
change nothing), and says so in its trace; one the bandit decides encodes it, as a turn that
acts does, and decides as that turn would."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from celestial_memory.domain.requests import NewMemory
from celestial_memory.memory.observing import ObservedTurn
from celestial_memory.memory.service import MemoryService
from celestial_memory.policy.decision import Action, Phase

T = "dry"


def test_a_dry_run_the_rules_decide_encodes_nothing(service: MemoryService) -> None:
    service.store_memory(T, NewMemory(content="My sister lives in Porto"))
    embedder = service.observing._embedder
    encoded: list[str] = []
    embed = embedder.embed

    def counted(texts: Sequence[str], *args: Any, **kwargs: Any) -> Any:
        encoded.extend(texts)
        return embed(texts, *args, **kwargs)

    embedder.embed = counted  # type: ignore[method-assign]
    try:
        for text, action in [("ok thanks", Action.SKIP),
                             ("Please remember that my locker code is 4512", Action.SAVE)]:
            d = service.observing.observe(T, ObservedTurn(text, session="s", dry_run=True)).decision
            assert (d.action, d.trace.phase, d.dry_run) == (action, Phase.CLEAR_RULES, True)
            assert d.trace.features["novelty_known"] == 0.0  # the trace says it was not measured
        assert encoded == []
        # The bandit decides a plain statement, and whether to keep a question it RETRIEVEs:
        # their novelty is measured.
        plain, question = "The printer on the third floor jammed again", "Where does my sister live?"
        d = service.observing.observe(T, ObservedTurn(plain, session="s", dry_run=True)).decision
        assert d.trace.phase is Phase.BANDIT and encoded == [plain]
        d = service.observing.observe(T, ObservedTurn(question, session="s", dry_run=True)).decision
        assert (d.action, d.trace.keep_by) == (Action.RETRIEVE, "bandit")
        assert encoded == [plain, question]
        # Acting, the rules' SKIP still encodes the turn: the archive keeps it for deep recall.
        got = service.observing.observe(T, ObservedTurn("ok thanks", session="s"))
        assert got.decision.action is Action.SKIP and got.memory is not None
        assert encoded == [plain, question, "ok thanks"]
    finally:
        embedder.embed = embed  # type: ignore[method-assign]
