"""The zone dynamics over time: placement (per-tenant locks, deferred capacity), reinforcement
written behind a recall and its journal, and the rebalancer that moves and forgets."""
