"""Observe: the turn policy deciding what to do with a conversation turn, and doing it
(docs/design.md, "The turn policy").

A turn is encoded once: that vector measures its novelty (1 - its best cosine to the tenant's
live memories) and is the vector it is stored with. SAVE stores it as Store does, the
session's last turns as its context; SKIP writes it straight into the archive (never in the
zones, never sent to the model: memory/storing.py); RETRIEVE answers the context block and the
memories in it, without reinforcing them, and keeps the turn too when the policy would. A
saved or skipped turn carries its decision in its metadata (``policy``, ``policy_why``,
``policy_decision`` and its time ``policy_at``), which is how a later Feedback, Restore or
deep recall of it finds the decision to reward.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from celestial_memory.config import Settings
from celestial_memory.domain import validation as check
from celestial_memory.domain.importance import RuleBasedEvaluator
from celestial_memory.domain.models import Memory, RecallResult
from celestial_memory.domain.requests import NewMemory, RecallQuery, Stored
from celestial_memory.domain.selection import Selection
from celestial_memory.encoding.embedding import Embedder
from celestial_memory.errors import InvalidArgument
from celestial_memory.memory.cancellation import NEVER, Cancellation
from celestial_memory.memory.prompt_context import ContextBlock
from celestial_memory.memory.repeats import NEAREST
from celestial_memory.policy.decision import AT, DECISION, POLICY, WHY, Action, Decision, Phase
from celestial_memory.policy.keeping import PolicyKeeper
from celestial_memory.policy.turn_policy import Turn, TurnPolicy
from celestial_memory.store.repository import MemoryRepository

MAX_PREVIOUS = 64  # earlier turns a call may carry
MAX_ROLE_CHARS = 64
# The last earlier turns a saved turn keeps as its context: as many as the LoCoMo protocol
# stores (three cost a LoCoMo conversation 0.04 of R@5 against storing every turn with two).
CONTEXT_TURNS = 2
RETRIEVE_LIMIT, RETRIEVE_TOKENS = 10, 1000
COUNT_TTL_S = 5.0  # a tenant's memory count is read again after this long
MAX_COUNTED = 4096  # tenants whose count is held (least recently read out)
# What one Feedback vote on a memory the policy saved, or on one a RETRIEVE answered, credits.
VOTE = 0.5
MAX_ANSWERED = 4096  # memories a RETRIEVE answered, remembered for the votes on them


@dataclass(frozen=True)
class ObservedTurn:
    text: str
    session: str = ""
    role: str = ""
    previous: Sequence[str] = ()
    dry_run: bool = False
    agent: str = ""
    limit: int = 0
    max_tokens: int = 0


@dataclass
class Observed:
    decision: Decision
    memory: Memory | None = None
    created: bool = False
    merged_into: str = ""
    results: list[RecallResult] = field(default_factory=list)
    context: ContextBlock | None = None


StoreFn = Callable[[str, Sequence[NewMemory], bool, Cancellation], Stored]
ContextFn = Callable[[str, RecallQuery, int, Cancellation],
                     tuple[ContextBlock, list[RecallResult]]]


class Observing:
    def __init__(self, settings: Settings, store: MemoryRepository, embedder: Embedder,
                 keeper: PolicyKeeper, store_fn: StoreFn, context_fn: ContextFn) -> None:
        self._settings, self._store, self._embedder = settings, store, embedder
        self.policies = keeper
        self._store_fn, self._context_fn = store_fn, context_fn
        self._counts: OrderedDict[str, tuple[float, int]] = OrderedDict()
        # Memory id -> (tenant, decision) for the memories RETRIEVEs answered.
        self._answered: OrderedDict[str, tuple[str, int]] = OrderedDict()
        self._lock = threading.Lock()
        # A turn not kept is never sent to the model: where the model rates importance, the
        # rules rate such a turn (what that evaluator falls back to).
        self._rules = RuleBasedEvaluator() if settings.importance_evaluator == "llm" else None

    def observe(self, tenant: str, t: ObservedTurn, cancel: Cancellation = NEVER) -> Observed:
        s = self._settings
        text = check.content(t.text, s, "text")
        role = (t.role or "user").strip()
        if len(role) > MAX_ROLE_CHARS or "\x00" in role:
            raise InvalidArgument("role", f"at most {MAX_ROLE_CHARS} characters, without NUL")
        session = check.label(t.session, s, "session_id")
        agent = check.label(t.agent, s, "agent_id")
        if len(t.previous) > MAX_PREVIOUS:
            raise InvalidArgument("previous", f"more than {MAX_PREVIOUS} turns")
        previous = [check.content(p, s, f"previous[{i}]") for i, p in enumerate(t.previous)]
        if t.max_tokens < 0:
            raise InvalidArgument("max_tokens", "must not be negative")
        limit = check.limit(t.limit, s) if t.limit else min(RETRIEVE_LIMIT, s.max_recall_limit)
        if t.max_tokens > s.max_prompt_tokens:  # refused before any decision, whichever it is
            raise InvalidArgument("max_tokens", f"must be 0 to {s.max_prompt_tokens}, got "
                                                f"{t.max_tokens}")
        count = self._count(tenant)
        policy = self.policies.of(tenant)
        turn = Turn(text, role, session, previous)
        if t.dry_run and _by_rules(d := policy.decide(turn, memory_count=count, dry_run=True)):
            # The rules decided without the bandit, so novelty would change nothing: a dry run
            # answers without encoding the turn (its trace says novelty was not measured).
            return Observed(d)
        vec = self._embedder.embed([text])[0]
        novelty, nearest = None, None
        if count:
            # As many as the repeat check reads: the write below searches no more.
            nearest = self._store.nearest_live(tenant, [vec], NEAREST)[0]
            novelty = 1.0 - nearest[0][1] if nearest else 1.0
        d = policy.decide(turn, memory_count=count, novelty=novelty, dry_run=t.dry_run)
        if t.dry_run:
            return Observed(d)
        self.policies.changed(tenant)
        out = Observed(d)
        if d.action is Action.RETRIEVE:
            out.context, out.results = self._context_fn(
                # Shown, not reinforced: a chat asks many questions that need nothing the memory
                # holds ("how are you?"), and reinforcing each answer would teach the zones
                # small talk; a Feedback vote on what helped rewards it instead.
                tenant, RecallQuery(query=text, query_vector=vec, reinforce=False,
                                    limit=limit),
                t.max_tokens or RETRIEVE_TOKENS, cancel)
            with self._lock:
                for r in out.results:
                    self._answered[r.memory.id] = (tenant, d.id)
                    self._answered.move_to_end(r.memory.id)
                while len(self._answered) > MAX_ANSWERED:
                    self._answered.popitem(last=False)
        why = d.trace.rule or d.trace.keep_by or f"bandit p={d.trace.probability:.2f}"
        item = NewMemory(
            content=text, session_id=session, agent_id=agent, embedded=vec, nearest=nearest,
            context="\n".join(previous[-CONTEXT_TURNS:])[-s.max_context_chars:],
            metadata={POLICY: d.action.value, WHY: why[:s.max_label_chars],
                      DECISION: str(d.id), AT: repr(d.at)},
            archived=not d.keep, understand=d.keep,
            importance=None if d.keep or self._rules is None else self._rules.evaluate(text))
        stored = self._store_fn(tenant, [item], False, cancel)
        out.memory, out.created = stored.memories[0], stored.created[0]
        out.merged_into = stored.merged_into[0]
        if out.created and d.keep:
            with self._lock:
                at, n = self._counts.get(tenant, (0.0, 0))
                self._counts[tenant] = (at, n + 1)
        return out

    def _count(self, tenant: str) -> int:
        """The tenant's live memories, read again every COUNT_TTL_S (the policy's state needs
        its order of magnitude, not each memory)."""
        now = time.monotonic()
        with self._lock:
            kept = self._counts.get(tenant)
        if kept is not None and now - kept[0] < COUNT_TTL_S:
            return kept[1]
        n = self._store.count(tenant, Selection())
        with self._lock:
            self._counts[tenant] = (now, n)
            self._counts.move_to_end(tenant)
            while len(self._counts) > MAX_COUNTED:
                self._counts.popitem(last=False)
        return n

    # -- rewards from what follows --------------------------------------------------------------

    def voted(self, tenant: str, m: Memory, helpful: bool) -> None:
        """A Feedback vote: to the decision that kept or skipped ``m`` and to the RETRIEVE that
        answered it. On a turn the policy did not keep, a helpful vote says the skip was wrong
        and a vote not helpful that it was right: the one reward a correct SKIP can get."""
        value = VOTE if helpful else -VOTE
        policy = self.policies.of(tenant)
        decided = _decision_of(m, policy)
        if decided is not None:
            policy.learn(decided, value if _kept(policy, decided, m) else -value, keep=True)
            self.policies.changed(tenant)
        with self._lock:
            answered = self._answered.get(m.id)
        if answered is not None and answered[0] == tenant:
            self.policies.of(tenant).learn(answered[1], value)
            self.policies.changed(tenant)

    def found(self, tenant: str, memories: Sequence[Memory], how: str) -> None:
        """Turns not kept that were needed after all (restored, or returned by deep recall):
        each SKIP is penalised, and so is a RETRIEVE's choice not to keep its turn where the
        bandit made it (policy/rewards.py; a rule's choice, no reward is about)."""
        policy = self.policies.of(tenant)
        named = [(d, m.metadata.get(POLICY)) for m in memories
                 if (d := _decision_of(m, policy)) is not None]
        learnt = False
        for d, action in named:
            if action == Action.RETRIEVE.value:
                logged = policy.logged(d)
                if logged is None or logged.trace.keep_by != "bandit":
                    continue
            elif action != Action.SKIP.value:
                continue
            learnt = policy.skip_found(d, how) != 0.0 or learnt
        if learnt:
            self.policies.changed(tenant)

    def recalled(self, tenant: str, results: Sequence[RecallResult]) -> None:
        """A recall's answer: a skipped turn deep recall returned penalises its SKIP."""
        archived = [r.memory for r in results if r.archived and POLICY in r.memory.metadata]
        if archived:
            self.found(tenant, archived, "deep recall")


def _decision_of(m: Memory, policy: TurnPolicy) -> int | None:
    """The decision in the policy's log that wrote ``m``: its id and its time must both match,
    so a decision numbered again (a kill before the policy was saved) is never credited with
    another turn's reward."""
    raw, at = m.metadata.get(DECISION, ""), m.metadata.get(AT, "")
    if not raw.isdigit() or POLICY not in m.metadata:
        return None
    logged = policy.logged(int(raw))
    return logged.id if logged is not None and repr(logged.at) == at else None


def _kept(policy: TurnPolicy, decision: int, m: Memory) -> bool:
    """Whether the decision that wrote ``m`` kept it in the zones."""
    action = m.metadata.get(POLICY)
    if action == Action.RETRIEVE.value:
        logged = policy.logged(decision)
        return logged is None or logged.keep
    return action != Action.SKIP.value


def _by_rules(d: Decision) -> bool:
    """Whether the rules alone took ``d``: what to do with the turn and whether to keep it."""
    return d.trace.phase is not Phase.BANDIT and d.trace.keep_by != "bandit"
