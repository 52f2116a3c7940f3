"""The turn policy: for each conversation turn, SAVE, SKIP or RETRIEVE, with the reason, learnt
per tenant from what follows (docs/design.md, the turn policy).

Phase 0 and 1 are rules (``rules.py``, reading ``cues.py``); phase 2 is a contextual bandit
(``bandit.py``) over the state of ``state.py``; ``rewards.py`` turns what follows into bounded
rewards; ``turn_policy.py`` is the facade a service calls.
"""

from celestial_memory.policy.bandit import BanditConfig, LinUCB
from celestial_memory.policy.decision import Action, Decision, Phase, Trace
from celestial_memory.policy.rewards import Reward
from celestial_memory.policy.state import FEATURES
from celestial_memory.policy.turn_policy import (
    VERSION,
    PolicyConfig,
    PolicyStateError,
    Turn,
    TurnPolicy,
    fingerprint,
)

__all__ = ["FEATURES", "VERSION", "Action", "BanditConfig", "Decision", "LinUCB", "Phase",
           "PolicyConfig", "PolicyStateError", "Reward", "Trace", "Turn", "TurnPolicy",
           "fingerprint"]
