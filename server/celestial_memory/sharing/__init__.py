"""Sharing what the turn policies learnt between nodes that opt in (docs/design.md, "Sharing what
the policies learnt"): parameters only, never a memory, a turn's text, a tenant or a key.

``update.py`` is what travels (each arm's normalised statistics and the evidence behind them) and
its bytes; ``robust.py`` aggregates updates some of which may be bad (clipping, Krum,
Multi-Krum, a bounded step); ``privacy.py`` adds optional noise and accounts the privacy it
spends; ``merge.py`` takes an aggregate into a policy within its bandit's bounds; ``node.py`` is a
node's side of the exchange (what it sends each round, what it takes from its peers, the merge).
The wire (the PolicySharing service, the gossip rounds) is api/grpc/gossip.py's.
"""

from celestial_memory.sharing.merge import Merged, SharingConfig, aggregate, apply, merge, move
from celestial_memory.sharing.privacy import noised
from celestial_memory.sharing.robust import TooFew, clip, krum, multi_krum, select, step
from celestial_memory.sharing.update import PolicyUpdate, UpdateRefused, of

__all__ = ["Merged", "PolicyUpdate", "SharingConfig", "TooFew", "UpdateRefused", "aggregate",
           "apply", "clip", "krum", "merge", "move", "multi_krum", "noised", "of", "select", "step"]
