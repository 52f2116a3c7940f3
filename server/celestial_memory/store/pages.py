"""Pages of a tenant's memories (Recent, List, export) and of the ledger's records, in time or
id order (docs/design.md, "The contract: retries and pages"): a mixin of the repository over
its engine."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Iterator, Sequence

from celestial_memory.domain.models import Memory, MemoryFilter
from celestial_memory.domain.paging import Cursor
from celestial_memory.domain.validation import MAX_TIME, MIN_TIME
from celestial_memory.store.engine import MEMORIES, Engine, Order, Part, Record
from celestial_memory.store.payload import (
    CONTEXT_DENSE,
    DENSE,
    Between,
    Condition,
    conditions,
    exported_memory,
    from_payload,
)

log = logging.getLogger(__name__)


def readable(records: Iterable[Record], vectors: bool = False) -> Iterator[Memory]:
    """The records as memories, skipping (and logging, by id) any that cannot be read back or
    sent: one bad record, written by an older version or by hand, must not fail its tenant."""
    for r in records:
        try:
            m = (exported_memory(r.id, r.payload, r.vectors) if vectors
                 else from_payload(r.id, r.payload))
            times = (m.created_at, m.last_recalled_at)
            if not all(math.isfinite(t) and MIN_TIME <= t <= MAX_TIME for t in times) or not (
                    math.isfinite(m.score) and math.isfinite(m.importance)):
                raise ValueError("a time or number out of range")
        except (KeyError, ValueError, TypeError, OverflowError) as exc:
            log.warning("skipping unreadable memory %s: %s", r.id, exc)
            continue
        yield m


class PageReads:
    engine: Engine

    def scan(self, tenant: str, flt: MemoryFilter, page_size: int = 1024) -> Iterator[list[Memory]]:
        """Every matching memory of ``tenant`` (without vectors), page by page."""
        offset: str | None = None
        where = conditions(tenant, flt, archive=False)
        while True:
            records, offset = self.engine.scroll(MEMORIES, where, page_size, offset)
            if page := list(readable(records)):
                yield page
            if offset is None:
                return

    def recent_page(
        self, tenant: str, flt: MemoryFilter, size: int, cursor: Cursor | None,
        archived: bool = False,
    ) -> tuple[list[Memory], bool]:
        """Memories matching ``flt`` (live ones, or the archive's), newest first (equal times in
        id order), after ``cursor``, and whether more may follow."""
        records, more = self._time_page(MEMORIES, conditions(tenant, flt, archive=archived),
                                        "created_at", True, size, cursor)
        return list(readable(records)), more

    def list_page(
        self, tenant: str, flt: MemoryFilter, size: int, after_id: str | None,
        archived: bool = False,
    ) -> tuple[list[Memory], bool]:
        """Memories matching ``flt`` (live ones, or the archive's) in id order, after
        ``after_id``, and whether more may follow."""
        records, more = self._id_page(MEMORIES, conditions(tenant, flt, archive=archived), size,
                                      after_id)
        return list(readable(records)), more

    def _id_page(
        self, part: Part, where: Sequence[Condition], size: int, after: str | None
    ) -> tuple[list[Record], bool]:
        # The scroll offset is inclusive: one more, for the id already sent.
        records, offset = self.engine.scroll(part, where, size + 1 if after else size, after)
        page = [r for r in records if r.id != after][:size]
        return page, offset is not None or len(records) > len(page) + (after is not None)

    def _time_page(
        self, part: Part, where: Sequence[Condition], field: str, descending: bool, size: int,
        cursor: Cursor | None,
    ) -> tuple[list[Record], bool]:
        """Records in ``field`` order, equal times in id order, after ``cursor`` (the time and
        id of the last record sent). The engine orders by the field alone, so the last time of
        a page is read again in id order: a page may then end inside a group of equal times
        and the next one goes on from its last id."""
        out: list[Record] = []
        if cursor is not None:
            at, after = cursor
            assert at is not None
            out = self._tied(part, where, field, at, after, size)
            if len(out) == size:
                return out, True
            beyond = (Between(field, lt=at) if descending
                      else Between(field, gte=math.nextafter(at, math.inf)))
            where = [*where, beyond]
        want = size - len(out)
        records, _ = self.engine.scroll(part, where, want, order=Order(field, descending))
        for r in records:  # times as the index holds them: cursors and windows must match it
            if r.order_value is not None:
                r.payload[field] = r.order_value
        sign = -1.0 if descending else 1.0

        def key(r: Record) -> tuple[float, str]:
            return sign * float(r.payload[field]), r.id

        if len(records) < want:  # the rest, whole groups of equal times
            return out + sorted(records, key=key), False
        last = float(records[-1].payload[field])
        whole = sorted((r for r in records if float(r.payload[field]) != last), key=key)
        tied = self._tied(part, where, field, last, None, want - len(whole))
        return out + whole + tied, True

    def _tied(
        self, part: Part, where: Sequence[Condition], field: str, at: float, after: str | None,
        size: int,
    ) -> list[Record]:
        """Up to ``size`` records whose ``field`` is exactly ``at``, in id order after ``after``."""
        exact = Between(field, gte=at, lt=math.nextafter(at, math.inf))
        records = self._id_page(part, [*where, exact], size, after)[0]
        for r in records:
            r.payload[field] = at  # the indexed time, which the window matched exactly
        return records

    def export_pages(
        self, tenant: str, after_id: str = "", page_size: int = 512, live_only: bool = False
    ) -> Iterator[list[Memory]]:
        """Every memory of a tenant (archived ones too, unless ``live_only``) in id order, after
        ``after_id``, with ``vector`` and ``index.context_dense`` set (keyword vectors are
        rebuilt from the text on import)."""
        offset: str | None = after_id or None
        where = conditions(tenant, archive=False if live_only else None)
        while True:
            # The scroll offset is inclusive: one more when it is the id already sent.
            limit = page_size + 1 if offset == after_id else page_size
            records, offset = self.engine.scroll(MEMORIES, where, limit, offset,
                                                 vectors=[DENSE, CONTEXT_DENSE])
            page = list(readable((r for r in records if r.id != after_id), vectors=True))
            if page:
                yield page
            if offset is None:
                return
