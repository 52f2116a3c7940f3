"""The domain service: store (memory/storing.py), recall (memory/recalling.py), get,
update, delete and restore (memory/archive.py), stats and rebalance. Front ends (the gRPC servicer,
tests) call it with domain types only.

Every method validates its whole input before it writes anything. Methods are synchronous and
thread-safe; the gRPC layer calls them from worker threads. Concurrency has one owner, the
placement (zones/placement.py): read-modify-write sequences (reinforcement, update, capacity, rebalance)
run under the tenant's lock there, and reads run beside them.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence

from celestial_memory.clock import Clock, ManualClock
from celestial_memory.config import Settings
from celestial_memory.domain import validation as check
from celestial_memory.domain.importance import ImportanceEvaluator
from celestial_memory.domain.models import (
    AdminEvent,
    Memory,
    MemoryFilter,
    RebalanceReport,
    RecallResult,
    Stats,
    ZoneCount,
    ZoneEvent,
)
from celestial_memory.domain.next_move import NextMove, next_move
from celestial_memory.domain.requests import MemoryChanges, NewMemory, RecallQuery, Stored
from celestial_memory.domain.scoring import MemoryFunction, ScoreBreakdown
from celestial_memory.domain.zones import Zone, ZoneTable
from celestial_memory.encoding.embedding import Embedder
from celestial_memory.errors import FailedPrecondition
from celestial_memory.graph.entity_index import EntityIndex, EntityProfile
from celestial_memory.graph.relations import Relations
from celestial_memory.graph.walks import MAX_REACHED, Reached, Walks
from celestial_memory.memory.archive import Archive
from celestial_memory.memory.cancellation import NEVER, Cancellation
from celestial_memory.memory.editing import Editing
from celestial_memory.memory.listing import Listing
from celestial_memory.memory.observing import Observing
from celestial_memory.memory.prompt_context import ContextBlock, token_counter
from celestial_memory.memory.recalling import Recalling
from celestial_memory.memory.storing import Storing
from celestial_memory.memory.transfer import Transfer
from celestial_memory.policy.keeping import PolicyKeeper
from celestial_memory.ranking import learned, tuning
from celestial_memory.recall.candidates import RecallCandidates
from celestial_memory.recall.retrieval import Retrieval
from celestial_memory.reflection.assembly import reflections
from celestial_memory.store.repository import MemoryRepository
from celestial_memory.understanding.chat import ChatModel
from celestial_memory.understanding.extraction_queue import ExtractionQueue
from celestial_memory.understanding.feedback import Feedback
from celestial_memory.zones.activity import Activity
from celestial_memory.zones.placement import Placement
from celestial_memory.zones.rebalancer import DAY, Rebalancer


class MemoryService:
    def __init__(
        self,
        settings: Settings,
        store: MemoryRepository,
        embedder: Embedder,
        clock: Clock,
        evaluator: ImportanceEvaluator,
        understanding: ExtractionQueue | None = None,
        model: ChatModel | None = None,
    ) -> None:
        if store.dimension != embedder.dimension:
            raise ValueError(
                f"store dimension {store.dimension} != model dimension {embedder.dimension}"
            )
        self.settings, self.store, self.embedder = settings, store, embedder
        self.retrieval = Retrieval(settings, embedder,
                                   keeps_passages=getattr(store.engine, "passages", True))
        self.tuning = tuning.Tuning(settings, store)  # the votes' layer over the learned ranker
        self._candidates = RecallCandidates(settings, store, self.retrieval,
                                            learned.load(settings.ranker, settings.ranker_model,
                                                         feedback=settings.ranker_feedback),
                                            self.tuning)
        self.clock = clock
        self.fn = MemoryFunction.from_settings(settings)
        self.zones = ZoneTable.from_settings(settings)
        self._evaluator = evaluator
        self.rebalancer = Rebalancer(store, self.fn, self.zones, clock, settings)
        self.activity = Activity()  # the calls being answered (the gRPC layer counts them)
        self.placement = Placement(store, self.rebalancer, settings, self.activity)
        self.relations = Relations(settings, store, self.placement, clock)
        self.transfer = Transfer(settings, store, self.retrieval, self.placement, self.relations,
                                 clock)
        self.listing = Listing(settings, store, self.placement)
        self.entities = EntityIndex(store)
        self.walks = Walks(store.graph)
        self.storing = Storing(settings, store, embedder, self.retrieval, self.fn, self.zones,
                               clock, evaluator, self.placement, self.relations)
        self.tokens = token_counter(embedder)
        self.archive = Archive(settings, store, self.fn, self.zones, clock, self.placement)
        # The model's queue (understanding/), when a model is configured: the server runs it.
        self.understanding = understanding
        if understanding is not None:
            understanding.keep_facts_with(self.storing, self.relations)
        # Reflections (reflection/), long-running operations: refused without a model.
        budgets = understanding.budgets if understanding is not None else None  # one per tenant
        self.reflection = reflections(settings, store, self.storing, self.relations, clock, model,
                                      budgets, self._flush)
        self._model = model
        self.editing = Editing(settings, store, embedder, self.retrieval, self.fn, self.zones,
                               clock, self.placement)
        self.feedback = Feedback(settings, store, self.fn, self.zones, clock, self.placement, self.tuning)
        self.recalling = Recalling(settings, store, embedder, self._candidates, self.fn,
                                   self.zones, clock, self.placement, self.tokens,
                                   lambda tenant, results: self.observing.recalled(tenant, results))
        self.observing = Observing(settings, store, embedder,
                                   PolicyKeeper.from_settings(store, clock, settings),
                                   self.store_batch, self.context_results)

    def close(self) -> None:
        """Write pending reinforcements, then flush and close the store (and an evaluator that
        holds connections)."""
        self.reflection.close()  # its workers write: they end first
        self.observing.policies.close()
        self.placement.close()
        self.store.close()
        if callable(close := getattr(self._evaluator, "close", None)):
            close()
        if self.understanding is not None:
            self.understanding.close()
        if self._model is not None:
            self._model.close()

    def tenants(self) -> list[str]:
        """Every tenant that has at least one memory (the periodic rebalance visits each)."""
        return self.store.tenants()

    def build_indexes(self) -> bool:
        """Build the vector indexes if enough was written since the last build (minutes at
        100,000 memories: the server runs this off the request path); True if it built."""
        return self.store.optimize()

    def store_available(self) -> bool:
        """Whether the store answers now (health)."""
        return self.store.available()

    # -- store (memory/storing.py) --------------------------------------------------------------------

    def store_memory(self, tenant: str, item: NewMemory, cancel: Cancellation = NEVER) -> Memory:
        return self.store_batch(tenant, [item], cancel=cancel).memories[0]

    def store_many(
        self, tenant: str, items: Sequence[NewMemory], prechecked: bool = False,
        cancel: Cancellation = NEVER,
    ) -> list[Memory]:
        return self.store_batch(tenant, items, prechecked, cancel).memories

    def store_batch(
        self, tenant: str, items: Sequence[NewMemory], prechecked: bool = False,
        cancel: Cancellation = NEVER,
    ) -> Stored:
        stored = self.storing.store_batch(tenant, items, prechecked, cancel)
        self.reflection.noted(tenant, sum(stored.created))
        return stored

    def check_new(self, item: NewMemory, index: int, batch: bool) -> NewMemory:
        return self.storing.check_new(item, index, batch)

    def consolidate(self, tenant: str, dry_run: bool = False,
                    ) -> tuple[list[tuple[str, list[str]]], int]:
        return self.storing.consolidate(tenant, dry_run)

    # -- recall --------------------------------------------------------------------------

    def recall(
        self, tenant: str, q: RecallQuery, cancel: Cancellation = NEVER
    ) -> list[RecallResult]:
        return self.recalling.recall(tenant, q, cancel)

    def context(self, tenant: str, q: RecallQuery, max_tokens: int, neighbours: bool = False,
                cancel: Cancellation = NEVER) -> ContextBlock:
        return self.recalling.context_results(tenant, q, max_tokens, cancel, neighbours)[0]

    def context_results(self, tenant: str, q: RecallQuery, max_tokens: int,
                        cancel: Cancellation = NEVER, neighbours: bool = False,
                        ) -> tuple[ContextBlock, list[RecallResult]]:
        return self.recalling.context_results(tenant, q, max_tokens, cancel, neighbours)

    # -- get / update / delete -------------------------------------------------------------

    def _flush(self, tenant: str) -> None:
        """Pending reinforcements and the tenant's deferred capacity, before a read or write
        that must see them."""
        self.placement.flush(tenant)

    def get(self, tenant: str, memory_id: str) -> Memory:
        mid = check.memory_id(memory_id)
        self._flush(tenant)
        return self._find(tenant, mid)

    def _find(self, tenant: str, mid: str) -> Memory:
        # No flush here: update calls this under the tenant's lock (zones/placement.py).
        return self.store.get_one(tenant, mid)

    def update(self, tenant: str, memory_id: str, ch: MemoryChanges) -> Memory:
        return self.editing.update(tenant, memory_id, ch)

    # -- erasure and the archive (memory/archive.py) ----------------------------------------------------

    def delete(self, tenant: str, memory_id: str, admin: bool = True) -> bool:
        """``admin``: the caller may erase an immutable memory (memory/archive.py)."""
        return self.archive.delete(tenant, memory_id, admin)

    def delete_by_filter(self, tenant: str, flt: MemoryFilter) -> int:
        return self.archive.delete_by_filter(tenant, flt)

    def restore(self, tenant: str, memory_id: str) -> Memory:
        m, restored = self.archive.restore(tenant, memory_id)
        if restored:  # a skipped turn needed after all (a retry is not a second penalty)
            self.observing.found(tenant, [m], "restored")
        return m

    # -- relations (graph/) ---------------------------------------------------------------------

    def related(self, tenant: str, memory_id: str, depth: int, relations: Sequence[str] = (),
                offset: int = 0, size: int = MAX_REACHED,
                ) -> tuple[list[tuple[int, Memory, Reached]], int]:
        """One page of the memories a walk from ``memory_id`` reaches, nearest first: each with
        its place in the walk and its path, and how many the walk reached. Reads only the page's
        memories; a later page reuses the first page's walk (graph/walks.py)."""
        self._flush(tenant)
        reached = self.walks.reached(tenant, memory_id, depth or 1, relations,
                                     first_page=offset == 0)
        page = [(i, reached[i]) for i in range(offset, min(offset + size, len(reached)))]
        found = self.store.get(tenant, [r.id for _, r in page])
        return [(i, found[r.id], r) for i, r in page if r.id in found], len(reached)

    def entity_profile(self, tenant: str, entity: str) -> EntityProfile:
        self._flush(tenant)  # its most recalled, counted as recalls have left them
        return self.entities.profile(tenant, entity)

    # -- stats / rebalance ------------------------------------------------------------------

    def zone_counts(self, tenant: str) -> tuple[dict[str, int], int]:
        """Live memories per zone and archived ones, as stored: no flush, no lock (the metrics
        read them, and a scrape must neither write nor wait behind a rebalance)."""
        counts = self.store.count_by_zone(tenant)
        return {z.name.lower(): counts[z] for z in Zone}, self.store.count_archived(tenant)

    def stats(self, tenant: str) -> Stats:
        self._flush(tenant)
        counts = self.store.count_by_zone(tenant)
        zones = [
            ZoneCount(z, counts[z], self.zones.capacity_of(z), self.zones.min_score(z))
            for z in Zone
        ]
        return Stats(
            zones=zones, total=sum(counts.values()), embedding_model=self.embedder.name,
            dimension=self.embedder.dimension, backend=self.store.backend_name,
            archived=self.store.count_archived(tenant),
        )

    def rebalance(self, tenant: str, dry_run: bool = False, full: bool = False,
                  forget: bool = True) -> RebalanceReport:
        return self.placement.rebalance(tenant, dry_run, full, forget)

    def set_clock(self, now: float) -> float:
        """Admin, for replays (settings.admin_clock): the clock reads ``now`` from here on."""
        if not self.settings.admin_clock or not isinstance(self.clock, ManualClock):
            raise FailedPrecondition("the admin clock is off (CELESTIAL_ADMIN_CLOCK=true)")
        t = check.timestamp(now, "now")
        assert t is not None
        self.placement.flush()  # pending reinforcements belong to the old time
        self.clock.set(t)
        return t

    def ledger(self, tenant: str, since: float | None = None, limit: int = 100,
               memory_id: str = "") -> list[ZoneEvent]:
        """The first ``limit`` zone events of a tenant, oldest first (memory/listing.py pages)."""
        return self.listing.ledger(tenant, since, limit, memory_id)[0]

    def record_admin(self, tenant: str, method: str, key_id: str) -> None:
        """An admin call into the ledger as it starts, at the wall clock's time (an audit trail,
        whatever the admin clock says)."""
        self.store.append_admin(AdminEvent(str(uuid.uuid4()), tenant, method, key_id, time.time()))

    def next_move(self, m: Memory) -> NextMove | None:
        """Where the rebalance takes ``m`` next unless it is recalled first (domain/next_move.py)."""
        return next_move(m, self.settings.auto_forget_days * DAY, self.clock.now())

    def breakdown(self, m: Memory, at: float | None = None) -> ScoreBreakdown:
        """The memory function's terms for ``m`` at ``at`` (default: now), with C from its last
        recall."""
        return self.fn.breakdown(m.recall_count, m.last_recalled_at, m.importance, m.context_score,
                                 self.clock.now() if at is None else at)

