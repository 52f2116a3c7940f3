"""A node's side of sharing (docs/sharing.md): what it sends each round, what it takes from its
peers, and the round's merge into its tenants' policies. The transport (the ExchangePolicy
call, dialling peers) is the API layer's; everything here is synchronous and thread-safe.

    node = SharingNode.from_settings(settings, policies, store, clock)
    sent = node.release()                  # once a round: the update every peer gets
    node.take(address, key_id, update)     # a peer's update, from its call or its answer
    node.merge_round()                     # the aggregate into every shared tenant's policy

**Peers are addresses.** A peer is one of ``policy_peers``, and its update is kept under that
address whichever way it came (its call to this node, or its answer to this node's call), so a
node is counted once among the updates Krum weighs. A call names the caller's address as this
node lists it; with keys, the first address a peer key names is the only one that key may name
after (one key cannot stand for several peers), and an address no peer lists is refused. So
the updates held are bounded by the peers listed, and each peer is held to twice a round.

**What a node sends** is one update a round, the same to every peer: the statistics of every
shared tenant's policy pooled (sums, as the data of one tenant would be), with noise when
``policy_share_noise`` is set. Its releases are counted in the store, so a restart does not
reset the privacy spent; once the budget is spent it sends nothing more, and says so.

**The merge**: the node's own pooled update and the last update of each peer (none older than
``STALE_ROUNDS`` rounds) are aggregated (merge.aggregate: clipping around the median, then
Multi-Krum), and each shared tenant's policy moves a bounded step toward the aggregate
(merge.move). Too few updates for Krum: nothing moves, and the status says why.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from celestial_memory.clock import Clock
from celestial_memory.config import Settings
from celestial_memory.errors import FailedPrecondition, PermissionDenied, ResourceExhausted
from celestial_memory.observability import metrics
from celestial_memory.policy.keeping import PolicyKeeper
from celestial_memory.policy.turn_policy import ARMS, fingerprint
from celestial_memory.sharing import privacy, robust, update
from celestial_memory.sharing.merge import SharingConfig, aggregate, move
from celestial_memory.sharing.update import PolicyUpdate, UpdateRefused

log = logging.getLogger(__name__)
# A peer's update older than this many rounds is not merged (a node gone for good).
STALE_ROUNDS = 10
# Under noise, each arm's block is clipped to this (the units of update.py: an honest arm's
# block has norm 3.3-4.5 on LoCoMo, so 5 keeps an honest block whole).
NOISE_BOUND = 5.0
# Calls one peer may make a round (its own round's, and one more for a round that comes early).
CALLS_A_ROUND = 2.0
RELEASED, SIGMA = "policy-sharing:released", "policy-sharing:sigma"


class Markers(Protocol):
    def read_marker(self, name: str) -> float | None: ...
    def write_marker(self, name: str, value: float) -> None: ...


class OtherRules(FailedPrecondition):
    """An update learnt under another rule set or feature schema (another fingerprint)."""


@dataclass
class Peer:
    """What this node knows of one peer."""

    exchanged: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    last_at: float | None = None
    last_error: str = ""
    update: PolicyUpdate | None = None
    taken_in_round: int = 0
    last_call: float = -math.inf  # monotonic: when it last called in
    calls: float = 0.0  # the calls it may make now (refilled since last_call)
    key_id: str | None = None


@dataclass(frozen=True)
class PeerStatus:
    peer: str
    exchanged: int
    refused: dict[str, int]
    last_at: float | None
    last_error: str


@dataclass(frozen=True)
class SharingStatus:
    rounds: int
    merges: int
    waiting: str
    peers: tuple[PeerStatus, ...]
    noise: float
    released: int
    epsilon: float
    delta: float
    epsilon_budget: float
    budget_spent: bool


class SharingNode:
    def __init__(self, policies: PolicyKeeper, markers: Markers, clock: Clock, *,
                 address: str, peers: Sequence[str], interval_s: float,
                 config: SharingConfig, tenants: Sequence[str] = (), noise: float = 0.0,
                 epsilon_budget: float = 0.0, delta: float = 1e-6,
                 rng: np.random.Generator | None = None) -> None:
        if noise > 0:
            privacy.require_accountant()
        self.address = address
        self._policies, self._markers, self._clock = policies, markers, clock
        self._peers = {p: Peer() for p in dict.fromkeys(peers) if p != address}
        self._interval_s, self._config, self._tenants = interval_s, config, tuple(tenants)
        self._noise, self._budget, self._delta = noise, epsilon_budget, delta
        self._rng = rng or np.random.default_rng()
        self._lock = threading.Lock()
        self._unlisted: Counter[str] = Counter()
        self._rounds = self._merges = 0
        self._waiting = "no round yet"
        self._sent: PolicyUpdate | None = None
        self._plain: PolicyUpdate | None = None  # what _sent was made from, before noise
        self._released = int(markers.read_marker(RELEASED) or 0)
        # Every release is accounted at the smallest noise any of them had: an upper bound.
        kept_sigma = markers.read_marker(SIGMA)
        self._sigma = min(kept_sigma, noise) if kept_sigma is not None and noise else noise
        self._spent = False
        self._warn_at_start()

    def _warn_at_start(self) -> None:
        n, f = len(self._peers) + 1, self._config.f
        if self._config.robust and n <= 2 * f + 2:
            log.warning("policy sharing: %d nodes (this one and its peers) can never merge: "
                        "Krum tolerating %d bad peer(s) needs more than %d updates; list more "
                        "peers or lower CELESTIAL_POLICY_SHARE_BYZANTINE", n, f, 2 * f + 2)
        if self._noise > 0 and not self._budget:
            log.warning("policy sharing: noise without a budget (CELESTIAL_POLICY_SHARE_EPSILON): "
                        "epsilon grows with every update sent, without bound")
        host = self.address.rpartition(":")[0].strip("[]")
        if host in ("", "0.0.0.0", "::"):
            log.warning("policy sharing: this node names itself %r to its peers, which no peer "
                        "can list; set CELESTIAL_POLICY_SHARE_ADDRESS to its address as they "
                        "list it", self.address)

    @classmethod
    def from_settings(cls, settings: Settings, policies: PolicyKeeper, markers: Markers,
                      clock: Clock) -> SharingNode:
        config = SharingConfig(f=settings.policy_share_byzantine,
                               robust=settings.policy_share_aggregation == "multi-krum",
                               evidence=settings.policy_share_evidence,
                               m=settings.policy_share_krum_keep or None)
        return cls(policies, markers, clock,
                   address=settings.policy_share_address or settings.address,
                   peers=settings.policy_peers, interval_s=settings.policy_share_interval_s,
                   config=config, tenants=settings.policy_share_tenants,
                   noise=settings.policy_share_noise,
                   epsilon_budget=settings.policy_share_epsilon,
                   delta=settings.policy_share_delta)

    @property
    def peers(self) -> tuple[str, ...]:
        return tuple(self._peers)

    # -- what it sends ------------------------------------------------------------------------

    def release(self) -> PolicyUpdate | None:
        """Start a round: the update this node gives every peer until the next one, or None
        once its privacy budget is spent."""
        with self._lock:
            self._rounds += 1
            if self._spent:
                return None
        own = self._pooled()
        if self._noise > 0 and self._plain is not None and self._sent is not None and \
                np.array_equal(own.vector, self._plain.vector) and own.counts == self._plain.counts:
            return self._sent  # nothing learnt since: the same release again spends nothing
        plain = own
        if self._noise > 0:
            sigma = min(self._sigma, self._noise) if self._released else self._noise
            spent = privacy.epsilon(sigma, self._released + 1, self._delta)
            if self._budget and spent > self._budget:
                with self._lock:
                    self._spent, self._sent = True, None
                log.warning("policy sharing: the privacy budget (epsilon %g at delta %g) is "
                            "spent after %d updates; this node sends no more",
                            self._budget, self._delta, self._released)
                return None
            own = privacy.noised(own, self._noise, NOISE_BOUND, self._rng)
            # Counted before it leaves: a crash after the write spends, never the reverse.
            self._markers.write_marker(SIGMA, sigma)
            self._markers.write_marker(RELEASED, self._released + 1)
            self._sigma = sigma
        with self._lock:
            self._released += 1
            self._sent, self._plain = own, plain
        metrics.POLICY_SHARING_EPSILON.set(self._epsilon())
        return own

    def current(self) -> PolicyUpdate | None:
        """The update of the round under way (None before the first, or once spent)."""
        with self._lock:
            return self._sent

    def _shared_tenants(self) -> list[str]:
        """The configured tenants, or every held tenant whose policy has decided something (a
        tenant only read, by GetPolicy say, neither takes part nor takes the aggregate)."""
        if self._tenants:
            return list(self._tenants)
        return [t for t in self._policies.held()
                if any(self._policies.of(t).counters.decisions.values())]

    def _pooled(self) -> PolicyUpdate:
        """The shared tenants' statistics as one update: each arm's M and m the mean of theirs
        weighted by their evidence (as their rewards pooled would give), its count a typical
        tenant's (their mean). Not their sum: each tenant takes the aggregate back, and a sum
        would make every one of them as sure as all of them. With summed evidence, what each
        learnt from its own rewards only (merge.py)."""
        vectors, counts = [], []
        for tenant in self._shared_tenants():
            u = update.of(self._policies.of(tenant), own=self._config.own_only)
            vectors.append(u.vector)
            counts.append(u.counts)
        out = np.zeros(update.SIZE)
        typical = []
        for k in range(len(ARMS)):
            n = np.array([c[k] for c in counts])
            block = slice(k * update.ARM_SIZE, (k + 1) * update.ARM_SIZE)
            if not (n > 0).any():
                typical.append(0.0)
                continue
            out[block] = np.average(np.stack([v[block] for v in vectors]), axis=0, weights=n)
            typical.append(float(n[n > 0].mean()))
        return PolicyUpdate(fingerprint(), out, tuple(typical))

    # -- what it takes ------------------------------------------------------------------------

    def called(self, address: str, key_id: str | None,
               key_addresses: frozenset[str] | None = None) -> Peer:
        """A peer's call came in: the peer it is, or a refusal (an unlisted address, a key
        that stands for another peer, more than twice a round). ``key_addresses``: the
        addresses the caller's key was made for (its tenants; None: any, and then the first
        address the key names is the only one it may name after)."""
        now = time.monotonic()
        with self._lock:
            peer = self._peers.get(address)
            if peer is None:
                self._count(self._unlisted, "unlisted")
                raise PermissionDenied(f"{address[:128]!r} is not one of this node's peers "
                                       "(its policy_peers)")
            if (refusal := self._key_refusal(peer, address, key_id, key_addresses)) is not None:
                self._count(peer.refused, "another_key")
                raise PermissionDenied(refusal)
            # A bucket of two calls, refilled at two a round: a peer's round that comes early
            # (a restart, a slow round) passes; a flood does not.
            rate = CALLS_A_ROUND / self._interval_s
            peer.calls = min(CALLS_A_ROUND, peer.calls + (now - peer.last_call) * rate)
            peer.last_call = now
            if peer.calls < 1.0:
                self._count(peer.refused, "too_often")
                raise ResourceExhausted("a peer exchanges twice a round at most",
                                        retry_after_s=(1.0 - peer.calls) / rate)
            peer.calls -= 1.0
            if key_id and key_addresses is None:
                peer.key_id = key_id
            return peer

    def _key_refusal(self, peer: Peer, address: str, key_id: str | None,
                     key_addresses: frozenset[str] | None) -> str | None:
        """Why the caller's key may not speak for ``address`` (None: it may)."""
        if not key_id:
            return None
        if key_addresses is not None:
            return (None if address in key_addresses
                    else "this key was made for another peer's address")
        bound = [a for a, p in self._peers.items() if p.key_id == key_id]
        if bound and bound != [address]:
            return "this key already stands for another peer"
        if peer.key_id not in (None, key_id):
            return f"peer {address!r} calls with another key"
        return None

    @staticmethod
    def _count(refused: Counter[str], reason: str) -> None:
        """One refusal, in the status and the metric (under the node's lock)."""
        refused[reason] += 1
        metrics.POLICY_EXCHANGES.labels(reason).inc()

    def take(self, address: str, fingerprint_: str, parameters: Sequence[float],
             counts: Sequence[float]) -> None:
        """A listed peer's update (from its call, once ``called`` admitted it, or from its
        answer to this node's): kept as its last, or refused (``OtherRules``,
        ``UpdateRefused``) and counted."""
        peer = self._peers.get(address)
        if peer is None:  # an answer from a listed peer only; a call was checked already
            raise PermissionDenied(f"{address[:128]!r} is not one of this node's peers")
        try:
            if fingerprint_ != fingerprint():
                raise OtherRules(f"the update was learnt under other rules or features "
                                 f"(fingerprint {fingerprint_[:12]!r}..., this node's "
                                 f"{fingerprint()[:12]}...)")
            if len(parameters) > update.SIZE or len(counts) > len(ARMS):
                raise UpdateRefused(f"{len(parameters)} parameters and {len(counts)} counts; "
                                    f"an update has {update.SIZE} and {len(ARMS)}")
            got = PolicyUpdate(fingerprint_, np.asarray(parameters, dtype=np.float64),
                               tuple(counts))
        except (OtherRules, UpdateRefused) as e:
            self.failed(address, "fingerprint" if isinstance(e, OtherRules) else "damaged",
                        str(e))
            log.warning("policy sharing: update of %r refused: %s", address, e)
            raise
        with self._lock:
            peer.update, peer.taken_in_round = got, self._rounds
            peer.exchanged += 1
            peer.last_at, peer.last_error = self._clock.now(), ""
        metrics.POLICY_EXCHANGES.labels("taken").inc()

    def failed(self, address: str, reason: str, error: str) -> None:
        """A listed peer's update refused, or this node's call to it failed (down, slow, or it
        refused this node's update): counted under ``reason``, ``error`` its last error."""
        peer = self._peers.get(address)
        if peer is None:
            return
        with self._lock:
            self._count(peer.refused, reason)
            peer.last_error = error[:300]

    # -- the merge ----------------------------------------------------------------------------

    def merge_round(self) -> bool:
        """Aggregate this node's update with its peers' and move every shared tenant's policy
        toward it; whether anything moved."""
        with self._lock:
            fresh = [p.update for p in self._peers.values() if p.update is not None
                     and self._rounds - p.taken_in_round <= STALE_ROUNDS]
        try:
            target, _ = aggregate([self._pooled(), *fresh], self._config)
        except robust.TooFew as e:
            with self._lock:
                self._waiting = (f"{e}: waiting for more peers' updates, or evidence of this "
                                 "node's own")
            return False
        except UpdateRefused as e:  # a plain mean of huge updates leaves the floats
            with self._lock:
                self._waiting = f"the aggregate is out of bounds ({e.problem}); nothing merged"
            return False
        for tenant in self._shared_tenants():
            move(self._policies.of(tenant), target, self._config)
            self._policies.changed(tenant)
        with self._lock:
            self._merges += 1
            self._waiting = ""
        metrics.POLICY_SHARING_MERGES.inc()
        return True

    def round_failed(self, error: str) -> None:
        with self._lock:
            self._waiting = f"the last round failed: {error[:300]}"

    # -- status -------------------------------------------------------------------------------

    def _epsilon(self) -> float:
        return privacy.epsilon(self._sigma, self._released, self._delta) if self._noise else 0.0

    def status(self) -> SharingStatus:
        with self._lock:
            peers = [PeerStatus(a, p.exchanged, dict(p.refused), p.last_at, p.last_error)
                     for a, p in self._peers.items()]
            if self._unlisted:
                peers.append(PeerStatus("(not a listed peer)", 0, dict(self._unlisted), None,
                                        ""))
            return SharingStatus(self._rounds, self._merges, self._waiting, tuple(peers),
                                 self._noise, self._released, self._epsilon(), self._delta,
                                 self._budget, self._spent)
