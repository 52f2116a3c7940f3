"""The turn policy of one tenant: SAVE, SKIP or RETRIEVE for each conversation turn, with the
reason, and learning from what follows (docs/design.md, the turn policy).

    policy = TurnPolicy(rng=np.random.default_rng(7), clock=ManualClock())
    d = policy.decide(Turn("I moved to Lisbon in May", session="s1"), memory_count=120,
                      novelty=0.4)
    d.action, d.keep, d.trace.rule, d.trace.probability
    policy.learn(d.id, rewards.skip_found("restored"))   # or a float in [-1, 1]
    saved = policy.to_dict(); TurnPolicy.from_dict(saved, rng=..., clock=...)

Phase 0 and 1 are rules (policy/rules.py); phase 2 is the bandit (policy/bandit.py), which
weighs SAVE against SKIP; a RETRIEVE turn is also kept when phase 1 or 2 would save it. Only
phase 2's decisions teach the bandit; a rule's rewards are counted against the rule, which no
reward changes. With ``implicit`` on, each turn of a session rewards that session's decision
before it (policy/rewards.py).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from celestial_memory.clock import Clock, SystemClock
from celestial_memory.policy import cues, rewards, rules
from celestial_memory.policy.bandit import BanditConfig, LinUCB
from celestial_memory.policy.decision import Action, Decision, Phase, Trace
from celestial_memory.policy.rewards import Reward
from celestial_memory.policy.state import FEATURES, RECENT, features, named

VERSION = 1
ARMS: tuple[Action, ...] = (Action.SAVE, Action.SKIP)
# Decisions a reward can still name; older ones are past learning (and past the log).
MAX_PENDING = 256
# Sessions whose last decision and turn count are kept (for implicit rewards and positions).
MAX_SESSIONS = 256
ASSISTANT_ROLES = frozenset({"assistant", "system", "tool", "model"})


def fingerprint() -> str:
    """SHA-256 of the rule set, the reward rules and the feature schema: a state saved under
    another one is not read as this one (its bandit starts again)."""
    text = "\n".join([rules.rule_text(), rewards.rule_text(), "said: role label", ",".join(FEATURES),
                      ",".join(a.value for a in ARMS)])
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Turn:
    """One conversation turn. ``previous``: the session's earlier turns, when the caller has
    them (their number is the turn's position); ``role``: an assistant's own question asks the
    memory nothing, so phase 0 reads only other roles."""

    text: str
    role: str = "user"
    session: str = ""
    previous: Sequence[str] = ()


def said(turn: Turn) -> str:
    """What the turn says, past a transcript's label naming its speaker: a turn whose role is
    "Ann" and whose text is "Ann: Hi Bo!" is a greeting. Only the role's own name is read past
    ("Remember: ..." stays an ask to remember)."""
    role = turn.role.strip()
    head = turn.text.lstrip()
    if role and head[:len(role) + 1].lower() == f"{role.lower()}:":
        return head[len(role) + 1:].lstrip()
    return turn.text


@dataclass(frozen=True)
class PolicyConfig:
    bandit: BanditConfig = field(default_factory=BanditConfig)
    implicit: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"bandit": self.bandit.to_dict(), "implicit": self.implicit}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PolicyConfig:
        return cls(BanditConfig.from_dict(d["bandit"]), bool(d["implicit"]))


@dataclass
class _Pending:
    decision: Decision
    keywords: tuple[str, ...]
    credited: float = 0.0


@dataclass
class Counters:
    decisions: dict[str, int] = field(default_factory=lambda: {a.value: 0 for a in Action})
    phases: dict[str, int] = field(default_factory=lambda: {str(int(p)): 0 for p in Phase})
    kept: int = 0
    explored: int = 0
    updates: int = 0
    rewards: int = 0
    reward_sum: float = 0.0
    by_rule: dict[str, float] = field(default_factory=dict)


class PolicyStateError(ValueError):
    """A saved policy this version cannot read."""


class TurnPolicy:
    def __init__(self, config: PolicyConfig | None = None,
                 rng: np.random.Generator | None = None, clock: Clock | None = None) -> None:
        self.config = config or PolicyConfig()
        self._rng = rng if rng is not None else np.random.default_rng()
        self._clock = clock or SystemClock()
        self.bandit = LinUCB([a.value for a in ARMS], len(FEATURES), self.config.bandit,
                             self._rng)
        # What this policy learnt from its own rewards alone: a merge of peers' updates
        # (sharing/merge.py) writes into ``bandit``, never here, so a node that shares its own
        # learning sends nothing it was sent.
        self.own = LinUCB([a.value for a in ARMS], len(FEATURES), self.config.bandit,
                          self._rng)
        self.counters = Counters()
        self._pending: OrderedDict[int, _Pending] = OrderedDict()
        self._last_in_session: OrderedDict[str, int] = OrderedDict()
        self._positions: dict[str, int] = {}
        self._recent_keeps: deque[bool] = deque(maxlen=RECENT)
        self._recent_retrieves: deque[bool] = deque(maxlen=RECENT)
        self._next_id = 1
        # A service calls from worker threads; a decision reads and writes the whole state.
        self._lock = threading.RLock()

    def decide(self, turn: Turn, memory_count: int, novelty: float | None = None,
               dry_run: bool = False) -> Decision:
        """The decision for ``turn``. ``memory_count``: what the tenant holds; ``novelty``:
        1 - the best cosine of the turn to those memories, None when not measured. A dry run
        answers without recording, learning or drawing. Thread-safe."""
        with self._lock:
            return self._decide(turn, memory_count, novelty, dry_run)

    def _decide(self, turn: Turn, memory_count: int, novelty: float | None,
                dry_run: bool) -> Decision:
        if not dry_run and self.config.implicit and turn.session in self._last_in_session:
            self._follow_up(self._last_in_session[turn.session], turn.text)
        r = cues.read(said(turn))
        score, parts = rules.importance(r)
        position = len(turn.previous) if turn.previous else self._positions.get(turn.session, 0)
        x = features(r, position, memory_count, novelty, list(self._recent_keeps),
                     list(self._recent_retrieves))
        names = named(x)
        asks = turn.role.lower() not in ASSISTANT_ROLES
        v0 = rules.phase0(r, memory_count) if asks else None
        v1 = rules.phase1(r, score, parts)
        imp = round(score, 4)
        if v1 is not None:
            keep = v1.action is Action.SAVE
            keep_trace = Trace(Phase.CLEAR_RULES, v1.rule, imp, parts, features=names)
        else:
            c = self.bandit.choose(x, greedy=dry_run)
            keep = ARMS[c.index] is Action.SAVE
            keep_trace = Trace(Phase.BANDIT, "", imp, parts, scores={
                a.value: round(float(s), 4) for a, s in zip(ARMS, c.scores, strict=True)},
                probability=round(c.probability, 6), explored=c.explored, features=names)
        if v0 is not None:
            action = Action.RETRIEVE
            trace = Trace(Phase.RETRIEVE_RULES, v0.rule, keep_trace.importance, parts,
                          keep_trace.scores, keep_trace.probability, keep_trace.explored, names,
                          keep_by=keep_trace.rule or "bandit")
        else:
            action, trace = (Action.SAVE if keep else Action.SKIP), keep_trace
        now = self._clock.now()
        if dry_run:
            return Decision(0, action, keep, trace, now, dry_run=True)
        d = Decision(self._next_id, action, keep, trace, now)
        self._next_id += 1
        self._record(d, turn, r.content_words)
        return d

    def _record(self, d: Decision, turn: Turn, keywords: tuple[str, ...]) -> None:
        c = self.counters
        c.decisions[d.action.value] += 1
        c.phases[str(int(d.trace.phase))] += 1
        c.kept += int(d.keep)
        c.explored += int(d.trace.explored)
        self._pending[d.id] = _Pending(d, keywords[:32])
        while len(self._pending) > MAX_PENDING:
            self._pending.popitem(last=False)
        self._last_in_session[turn.session] = d.id
        self._last_in_session.move_to_end(turn.session)
        while len(self._last_in_session) > MAX_SESSIONS:
            gone, _ = self._last_in_session.popitem(last=False)
            self._positions.pop(gone, None)
        self._positions[turn.session] = self._positions.get(turn.session, 0) + 1
        self._recent_keeps.append(d.keep)
        self._recent_retrieves.append(d.action is Action.RETRIEVE)

    def _follow_up(self, decision_id: int, text: str) -> None:
        p = self._pending.get(decision_id)
        if p is not None:
            self.learn(decision_id, rewards.from_next_turn(text, p.keywords, p.decision.keep))

    def learn(self, decision_id: int, reward: float | Reward, keep: bool = False) -> float:
        """Credit ``reward`` to a decision: what is learnt, after bounding (each reward to
        [-1, 1], and all a decision is credited to [-1, 1]). 0 for a decision past the log or
        a dry run. A phase 2 decision teaches the bandit; a rule's decision is counted against
        its rule only. ``keep``: the reward is about keeping or skipping the turn (a later
        question needed it, deep recall found it), not about the action: it also teaches the
        bandit when the bandit chose whether a RETRIEVE's turn was kept."""
        with self._lock:
            return self._learn(decision_id, reward, keep)

    def _learn(self, decision_id: int, reward: float | Reward, keep: bool) -> float:
        value = reward.value if isinstance(reward, Reward) else float(reward)
        p = self._pending.get(decision_id)
        if p is None:
            return 0.0
        total = rewards.clip(p.credited + rewards.clip(value))
        delta = total - p.credited
        if delta == 0.0:
            return 0.0
        p.credited = total
        c = self.counters
        c.rewards += 1
        c.reward_sum += delta
        t = p.decision.trace
        if t.scores and (t.phase is Phase.BANDIT or keep):
            x = np.array([t.features[n] for n in FEATURES], dtype=np.float64)
            arm = ARMS.index(Action.SAVE if p.decision.keep else Action.SKIP)
            self.bandit.update(arm, x, delta)
            self.own.update(arm, x, delta)
            c.updates += 1
        else:
            # A reward about keeping a RETRIEVE's turn is the keeping rule's, not the question's.
            kept_by = keep and t.phase is Phase.RETRIEVE_RULES and t.keep_by not in ("", "bandit")
            key = (f"{int(Phase.CLEAR_RULES)}:{t.keep_by}" if kept_by
                   else f"{int(t.phase)}:{t.rule}")
            c.by_rule[key] = c.by_rule.get(key, 0.0) + delta
        return delta

    def skip_found(self, decision_id: int, how: str = "deep recall") -> float:
        """A SKIPped turn was restored or returned by deep recall: its SKIP is penalised."""
        p = self._pending.get(decision_id)
        if p is None or p.decision.keep:
            return 0.0
        return self.learn(decision_id, rewards.skip_found(how), keep=True)

    @property
    def lock(self) -> threading.RLock:
        """The lock every decision and reward takes: hold it to read or write the bandit's
        statistics as one (policy sharing)."""
        return self._lock

    def logged(self, decision_id: int) -> Decision | None:
        """The decision of that id in the log (None: past learning)."""
        with self._lock:
            p = self._pending.get(decision_id)
            return None if p is None else p.decision

    def continuing(self, before: TurnPolicy) -> TurnPolicy:
        """This (new) policy, numbering its decisions on from ``before``'s."""
        self._next_id = max(self._next_id, before._next_id)
        return self

    def last(self, n: int = 20) -> list[Decision]:
        """The last ``n`` decisions, newest first."""
        with self._lock:
            return [p.decision for p in reversed(self._pending.values())][:max(0, n)]

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"version": VERSION, "fingerprint": fingerprint(),
                    "epsilon": self.config.bandit.epsilon, **asdict(self.counters)}

    def to_dict(self) -> dict[str, Any]:
        """Everything a restart needs, as JSON-ready values."""
        with self._lock:
            return self._to_dict()

    def _to_dict(self) -> dict[str, Any]:
        return {
            "version": VERSION, "fingerprint": fingerprint(), "config": self.config.to_dict(),
            "bandit": self.bandit.to_dict(), "own": self.own.to_dict(),
            "counters": asdict(self.counters),
            "pending": [{"decision": p.decision.to_dict(), "keywords": list(p.keywords),
                         "credited": p.credited} for p in self._pending.values()],
            "sessions": [[s, i, self._positions.get(s, 0)]
                         for s, i in self._last_in_session.items()],
            "recent_keeps": list(self._recent_keeps),
            "recent_retrieves": list(self._recent_retrieves), "next_id": self._next_id,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], rng: np.random.Generator | None = None,
                  clock: Clock | None = None, config: PolicyConfig | None = None) -> TurnPolicy:
        """A policy from ``to_dict``. Another version is refused; another fingerprint (rules
        or features changed) keeps the counters and the log but starts the bandit again.
        ``config``, when given, replaces the saved one (the server's settings win)."""
        if d.get("version") != VERSION:
            raise PolicyStateError(f"turn policy state version {d.get('version')!r}; this "
                                   f"server reads version {VERSION}")
        out = cls(config or PolicyConfig.from_dict(d["config"]), rng, clock)
        same = d.get("fingerprint") == fingerprint()
        if same:
            out.bandit = LinUCB.from_dict(d["bandit"], out._rng, out.config.bandit)
            # A policy saved before it kept its own learning apart: all of it counts as its own.
            out.own = LinUCB.from_dict(d.get("own", d["bandit"]), out._rng, out.config.bandit)
        c = d["counters"]
        out.counters = Counters(
            {str(k): int(v) for k, v in c["decisions"].items()},
            {str(k): int(v) for k, v in c["phases"].items()}, int(c["kept"]),
            int(c["explored"]), int(c["updates"]), int(c["rewards"]), float(c["reward_sum"]),
            {str(k): float(v) for k, v in c["by_rule"].items()})
        for p in d["pending"][-MAX_PENDING:]:
            dec = Decision.from_dict(p["decision"])
            if not same and dec.trace.scores:
                continue  # its features were read under another schema
            out._pending[dec.id] = _Pending(dec, tuple(p["keywords"]), float(p["credited"]))
        for s, i, pos in d["sessions"][-MAX_SESSIONS:]:
            out._last_in_session[str(s)] = int(i)
            out._positions[str(s)] = int(pos)
        out._recent_keeps.extend(bool(v) for v in d["recent_keeps"])
        out._recent_retrieves.extend(bool(v) for v in d["recent_retrieves"])
        out._next_id = int(d["next_id"])
        return out
