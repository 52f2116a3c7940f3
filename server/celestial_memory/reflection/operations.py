"""Reflections as long-running operations (AIP-151): a caller starts one and gets its name at
once, then polls, watches or cancels it; the work runs on two worker threads, never inside the
call that started it, so no client deadline bounds two slow model calls.

Every step is written to the operation's record (store/operations_store.py) before the next
begins. A record this process holds carries its holder and a lease it renews (``tend``). On
restart, an operation another holder left unfinished is ended with Interrupted ("start it
again"), never left running or lost: at once where the store is this process's alone, once its
holder's lease ran out where replicas share it. It is not resumed: its model calls would be
paid twice, which the caller, not the server, should decide.

Each model call is charged to the tenant's model budget, the extraction queue's
(understanding/budget.py). A reflection that would go over it ends at once with
ModelBudgetSpent (RESOURCE_EXHAUSTED, with when to try again) rather than waiting, which would
hold one of the few workers while other tenants' wait. The whole plan must fit before the first
call, and each call is checked again (the queue spends the same budget meanwhile).

A cancel ends an operation at once, before its writes: the model call in flight is let finish
(a blocking HTTP call cannot be interrupted) and its answer dropped. Once writing, it is too
late: the cancel is recorded and the reflection completes.

An ended operation can be read for KEEP_S; a tenant keeps its MAX_ENDED last ended at most (each
end removes those that ended first beyond), so starts and cancels in a loop cannot fill the
store. A running operation is never removed.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from celestial_memory.clock import Clock
from celestial_memory.config import Settings
from celestial_memory.domain.operations import (
    Failure,
    Operation,
    Reflection,
    ReflectionAsked,
    Stage,
    canonical_name,
    operation_id,
    operation_name,
)
from celestial_memory.domain.paging import Cursor
from celestial_memory.errors import (
    CelestialError,
    Interrupted,
    InvalidArgument,
    ModelBudgetSpent,
    NotFound,
    RetryLater,
    TooManyCalls,
)
from celestial_memory.reflection.reflector import Reflector
from celestial_memory.reflection.trigger import ReflectionTrigger
from celestial_memory.store.operations_store import OperationsStore
from celestial_memory.understanding.budget import ModelBudgets

log = logging.getLogger(__name__)

MAX_RUNNING = 2  # reflections running at once, server-wide (each holds a thread through its calls)
MAX_ACTIVE = 4  # a tenant's queued and running reflections
MAX_QUEUED = 64  # every tenant's queued and running reflections
MAX_REQUEST_ID = 256  # characters of a start's request_id
LEASE_S = 30.0  # a holder's lease on its running operations, renewed every third of it
KEEP_S = 7 * 86400.0  # how long an ended operation can still be read
MAX_ENDED = 100  # a tenant's ended operations kept at most (starts and cancels cost nothing)
RESTARTED = "the server restarted while this operation ran; start it again"
STOPPED = "the server stopped while this operation ran; start it again"


class _Ended(Exception):
    """The operation ended while its worker was still at it (a cancel, a stop)."""


@dataclass(slots=True)
class _Live:
    """An operation this process runs: its state (under ``lock``) and a counter watchers wait on."""

    op: Operation
    version: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    ended: threading.Event = field(default_factory=threading.Event)
    busy: bool = False  # its worker is at the store (not waiting on the model): close waits


class ReflectionOperations:
    def __init__(self, settings: Settings, records: OperationsStore, reflector: Reflector,
                 budgets: ModelBudgets, clock: Clock, flush: Callable[[str], None],
                 exclusive: bool, has_model: bool) -> None:
        """``exclusive``: no other process uses the store (what it finds unfinished, a stopped
        server left); ``flush``: a tenant's pending reinforcements, written before a reflection."""
        self._s, self._records, self._reflector = settings, records, reflector
        self._budgets, self._clock, self._flush = budgets, clock, flush
        self._exclusive = exclusive
        self.trigger = ReflectionTrigger(settings, records, has_model)
        self.holder = str(uuid.uuid4())  # this process, as the store knows it
        self._live: dict[str, _Live] = {}
        self._lock = threading.Lock()
        # Daemon workers, started on the first reflection: a stop need not wait for a model
        # call in flight (close).
        self._queue: queue.SimpleQueue[_Live | None] = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._closed = False
        self._renewed = self._recovered = self._forgotten = float("-inf")

    # -- starting, reading, cancelling ------------------------------------------------------

    def start(self, tenant: str, dry_run: bool = True, window: int = 0,
              entities: tuple[str, ...] | list[str] = (), request_id: str = "",
              automatic: bool = False, trigger_count: int = 0) -> Operation:
        """A new reflection, queued; with a ``request_id`` already used by the tenant, the
        operation that start made. Refused at once (nothing started) when the request is
        invalid, there is no model, or the tenant has MAX_ACTIVE running."""
        asked = self._reflector.check(dry_run, window, list(entities))
        if len(request_id) > MAX_REQUEST_ID:
            raise InvalidArgument("request_id", f"longer than {MAX_REQUEST_ID} characters")
        name = operation_name(tenant, request_id)
        with self._lock:
            if self._closed:
                raise Interrupted(STOPPED)
            held = self._copy(live) if (live := self._live.get(name)) is not None else (
                self._records.read(tenant, operation_id(name) or "") if request_id else None)
            if held is not None:
                if held.asked != asked:  # a retry asks the same; another request is a mistake
                    raise InvalidArgument("request_id", "was used by a start that asked for "
                                          "another reflection")
                return held
            # Cancelled ones free their place at once (their worker may still wait on a call).
            active = [v for v in self._live.values() if not v.op.done]
            if sum(v.op.tenant == tenant for v in active) >= MAX_ACTIVE:
                raise TooManyCalls(f"a tenant runs at most {MAX_ACTIVE} reflections at once; "
                                   "wait for one to end or cancel one", 5.0)
            if len(active) >= MAX_QUEUED:
                raise TooManyCalls(f"the server runs at most {MAX_QUEUED} reflections at once; "
                                   "try again later", 5.0)
            now = self._clock.now()
            op = Operation(name, tenant, asked, now, now, automatic=automatic,
                           trigger_count=trigger_count)
            self._records.create(op, self.holder, now + LEASE_S)
            live = self._live[name] = _Live(op)
            if not self._workers:
                self._workers = [threading.Thread(target=self._serve, name=f"reflection-{i}",
                                                  daemon=True) for i in range(MAX_RUNNING)]
                for t in self._workers:
                    t.start()
            self._queue.put(live)
            return self._copy(live)

    def get(self, tenant: str, name: str) -> tuple[Operation, int | None]:
        """The operation and, while this process runs it, its change counter; or NotFound. An
        ended one is read from the store, which may have dropped it (MAX_ENDED) already."""
        if (seen := self.peek(tenant, name)) is not None and not seen[0].done:
            return seen
        op_id = operation_id(name)
        op = self._records.read(tenant, op_id) if op_id and name == canonical_name(name) else None
        if op is None:
            raise NotFound(f"no operation {name[:100]!r} (names are as StartReflection gave "
                           "them: operations/ and a lower-case UUID)")
        return op, None

    def peek(self, tenant: str, name: str) -> tuple[Operation, int] | None:
        """The operation as this process runs it, without a store read; None if it does not."""
        live = self._live.get(canonical_name(name))
        if live is None or live.op.tenant != tenant:
            return None
        with live.lock:
            return replace(live.op), live.version

    def page(self, tenant: str, size: int,
             cursor: Cursor | None) -> tuple[list[Operation], bool]:
        """The tenant's operations, newest first (as started), and whether more follow."""
        return self._records.page(tenant, size, cursor)

    def cancel(self, tenant: str, name: str) -> Operation:
        """End it with Cancelled unless it is writing or done; the operation after the attempt."""
        live = self._live.get(canonical_name(name))
        if live is None or live.op.tenant != tenant:
            return self.get(tenant, name)[0]  # done (as it was), or NotFound
        with live.lock:
            if not live.op.done:
                live.op.cancel_requested = True
                if live.op.stage < Stage.WRITING:
                    self._end(live, failure=Failure("Cancelled", "cancelled by the caller"))
                else:
                    self._save(live)
                return replace(live.op)
        return self.get(tenant, name)[0]  # done before: as get answers it

    def wait(self, tenant: str, name: str, timeout_s: float | None = None) -> Operation:
        """The operation once it has ended (or as it is after ``timeout_s``)."""
        live = self._live.get(canonical_name(name))
        if live is not None and live.op.tenant == tenant:
            live.ended.wait(timeout_s)
        return self.get(tenant, name)[0]

    # -- the work ---------------------------------------------------------------------------

    def _serve(self) -> None:
        while (live := self._queue.get()) is not None:
            self._work(live)

    def _work(self, live: _Live) -> None:
        live.busy = True
        op = live.op
        tenant, asked = op.tenant, op.asked
        try:
            self._update(live, stage=Stage.READING)
            self._flush(tenant)
            plan = self._reflector.plan(tenant, asked)
            self._update(live, stage=Stage.ASKING_MODEL, read=plan.read,
                         planned_calls=len(plan.chunks))
            out = Reflection(asked.dry_run, read=plan.read)
            budget = self._budgets[tenant]
            calls_left = budget.calls_left(self._clock.now(), self._s.understand_calls_per_minute)
            if calls_left < len(plan.chunks):
                raise self._spent(tenant, f"this reflection makes {len(plan.chunks)} model "
                                          "calls; the tenant has fewer left this minute")
            for chunk in plan.chunks:
                self._update(live)  # a cancel stops it here, before the next call
                now = self._clock.now()
                if not budget.allows(now, self._s.understand_calls_per_minute,
                                     self._s.understand_tokens_per_minute):
                    raise self._spent(tenant, "the tenant spent its model calls or tokens of "
                                              "the minute")
                try:
                    live.busy = False
                    found, tokens = self._reflector.ask(chunk)
                except CelestialError:
                    budget.spend(now, 0)  # a failed call is a call
                    raise
                finally:
                    live.busy = True
                budget.spend(now, tokens)
                out.calls, out.tokens = out.calls + 1, out.tokens + tokens
                self._update(live, calls=out.calls, tokens=out.tokens)
                for g, r in zip(chunk, found, strict=True):
                    self._reflector.keep(tenant, g, r, out)
            self._update(live, stage=Stage.WRITING)  # from here a cancel no longer stops it
            if not asked.dry_run:
                self._reflector.write(tenant, out)
            with live.lock:
                self._end(live, result=out)
        except _Ended:
            pass
        except CelestialError as e:
            retry = e.retry_after_s if isinstance(e, RetryLater) else 0.0
            self._end_unless_ended(live, Failure(type(e).__name__, str(e), retry))
        except Exception:  # a fault of this code: the operation says so, the log says what
            log.exception("reflection %s of %r failed", op.name, tenant[:256])
            self._end_unless_ended(live, Failure("CelestialError", "internal error"))
        finally:
            self._settled(live)
            live.busy = False

    def _spent(self, tenant: str, why: str) -> ModelBudgetSpent:
        wait = self._budgets[tenant].free_in(self._clock.now())
        return ModelBudgetSpent(f"model budget: {why} (CELESTIAL_UNDERSTAND_CALLS_PER_MINUTE, "
                                "CELESTIAL_UNDERSTAND_TOKENS_PER_MINUTE)", max(wait, 1.0))

    def _update(self, live: _Live, stage: Stage | None = None, **counts: int) -> None:
        """Record a step; _Ended when the operation ended meanwhile."""
        with live.lock:
            if live.op.done:
                raise _Ended
            if stage is not None:
                live.op.stage = stage
            for k, v in counts.items():
                setattr(live.op, k, v)
            if stage is not None or counts:
                self._save(live)

    def _end_unless_ended(self, live: _Live, failure: Failure) -> None:
        with live.lock:
            if not live.op.done:
                self._end(live, failure=failure)

    def _end(self, live: _Live, result: Reflection | None = None,
             failure: Failure | None = None) -> None:
        """Under ``live.lock``: the operation is done, with its result or why not."""
        op = live.op
        op.stage, op.result, op.failure = Stage.DONE, result, failure
        op.ended_at = self._clock.now()
        self._save(live)
        live.ended.set()
        self._records.trim_ended(op.tenant, MAX_ENDED)

    def _save(self, live: _Live) -> None:
        """Under ``live.lock``: the record as the operation now is."""
        op = live.op
        op.updated_at = self._clock.now()
        live.version += 1
        # An ended one expires KEEP_S after its end: trim_ended removes the first ended by it.
        self._records.write(op, self.holder, (op.ended_at or op.updated_at) + KEEP_S if op.done
                            else op.updated_at + LEASE_S)

    def _settled(self, live: _Live) -> None:
        """The worker is through with ``live``: an automatic one that a stop did not
        interrupt settles the trigger's count (before it leaves the live set, so the trigger
        cannot start another on the old count), and it leaves the live set."""
        failure = live.op.failure
        if live.op.automatic and not (failure and failure.error == Interrupted.__name__):
            try:
                self.trigger.settle(live.op.tenant, live.op.trigger_count)
            except CelestialError:
                log.exception("settling the reflection trigger of %r failed",
                              live.op.tenant[:256])
        with self._lock:
            self._live.pop(live.op.name, None)

    @staticmethod
    def _copy(live: _Live) -> Operation:
        with live.lock:
            return replace(live.op)

    # -- upkeep: the trigger, leases, what a stopped server left --------------------------------

    def noted(self, tenant: str, created: int) -> None:
        self.trigger.noted(tenant, created)

    def tend(self) -> list[Operation]:
        """One turn of the server's loop: renew this process's leases, end what other holders
        left unfinished, forget old records, and start the automatic reflections due (those
        started are returned)."""
        now = self._clock.now()
        if now - self._renewed >= LEASE_S / 3:
            self._renewed = now
            with self._lock:
                mine = list(self._live.values())
            for live in mine:  # each under its lock: an end written meanwhile keeps its expiry
                with live.lock:
                    if not live.op.done:
                        self._records.renew([live.op.id], self.holder, now + LEASE_S)
        if now - self._recovered >= LEASE_S / 3:
            self._recovered = now
            self.recover()
        if now - self._forgotten >= 3600.0:
            self._forgotten = now
            self._records.forget_ended(now)
        started = []
        with self._lock:
            busy = {v.op.tenant for v in self._live.values() if v.op.automatic}
        for tenant, count in self.trigger.due().items():
            if tenant in busy:
                continue
            try:
                started.append(self.start(tenant, dry_run=False, automatic=True,
                                          trigger_count=count))
            except CelestialError as e:
                log.warning("automatic reflection of %r not started: %s", tenant[:256], e)
        return started

    def recover(self) -> int:
        """End, with Interrupted, the operations other holders left unfinished (a stopped
        server's, or with a shared store, a holder whose lease ran out); how many."""
        now = self._clock.now()
        ended = 0
        tenants: set[str] = set()
        for op, holder, expires_at in self._records.unfinished():
            if holder == self.holder or not (self._exclusive or expires_at < now):
                continue
            op.stage, op.failure, op.ended_at = Stage.DONE, Failure(Interrupted.__name__,
                                                                    RESTARTED, 1.0), now
            op.updated_at = now
            self._records.write(op, self.holder, now + KEEP_S)
            ended += 1
            tenants.add(op.tenant)
            log.warning("reflection %s of %r ended: %s", op.name, op.tenant[:256], RESTARTED)
        for tenant in tenants:
            self._records.trim_ended(tenant, MAX_ENDED)
        return ended

    def close(self) -> None:
        """End what has not begun writing with Interrupted (an automatic one is due again after
        the restart), let the workers at the store finish (reads and writes are short), and
        return without waiting for a model call in flight (up to llm_timeout_s): its worker
        finds the operation ended and drops the answer without touching the store."""
        with self._lock:
            self._closed = True
            running = list(self._live.values())
        for live in running:
            with live.lock:
                if not live.op.done and live.op.stage < Stage.WRITING:
                    self._end(live, failure=Failure(Interrupted.__name__, STOPPED, 1.0))
        for _ in self._workers:
            self._queue.put(None)
        deadline = time.monotonic() + 30.0  # a worker at the store is never left behind it
        while any(v.busy for v in running) and time.monotonic() < deadline:
            time.sleep(0.01)

    def reflect(self, tenant: str, asked: ReflectionAsked) -> Operation:
        """Start a reflection and wait for it to end (for callers in this process)."""
        op = self.start(tenant, asked.dry_run, asked.window, asked.entities)
        return self.wait(tenant, op.name)

