"""What the sync and async clients share: the tenant, the credentials and metadata sent with
every call, per-call options, the keyword options of recall, list and update, paging, and the
requests built from the client's own state. One place, so that the two clients cannot drift."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Self, TypedDict, TypeVar

from celestial_client._core import convert as cv
from celestial_client.connection import key_metadata
from celestial_client.types import ExportedMemory, StoreItem, Zone
from celestial_client.v1 import memory_pb2 as pb

# An API key, or a function that returns the current one (called for every call: tokens that
# rotate).
Credential = str | Callable[[], str]
MAX_PAGE = 1000  # the server's largest page
T = TypeVar("T")


class Filters(TypedDict, total=False):
    zones: Iterable[Zone | str]
    tags_any: Sequence[str]
    tags_all: Sequence[str]
    session_id: str
    agent_id: str
    created_after: datetime | float
    created_before: datetime | float
    recalled_after: datetime | float
    recalled_before: datetime | float
    min_importance: float
    metadata: Mapping[str, str]
    entities_any: Sequence[str]  # entity ids "<kind>:<key>" (see ``entities``)
    memory_types: Sequence[str]  # any of these types (MEMORY_TYPES); "episode" matches untyped


class RecallOptions(Filters, total=False):
    reinforce: bool
    context: str
    query_vector: Sequence[float]
    min_relevance: float
    ignore_zones: bool
    include_archived: bool  # search the archive (forgotten memories) too
    deep: bool  # the archive only when the zones fall short; unset: the server's default
    # Graph expansion: memories this many steps (1 or 2) along relations from the best matches
    # join the candidates (``RecallResult.via``); 0 turns it off; unset: the server's default.
    expand: int


class UpdateOptions(TypedDict, total=False):
    content: str
    importance: float
    tags: Sequence[str]
    metadata: Mapping[str, str]
    pinned: bool
    vector: Sequence[float]


class _Unset:
    """The default of ``with_options(timeout=...)``, where None means "no deadline"."""


UNSET = _Unset()


def _first(limit: int, page: Callable[[int, str], tuple[list[T], str]]) -> list[T]:
    """The first ``limit`` items of a paged list: ``page(size, token)`` answers one page's
    items and the next token ("" at the end)."""
    out: list[T] = []
    token = ""
    while len(out) < limit:
        items, token = page(min(limit - len(out), MAX_PAGE), token)
        out += items
        if not token:
            break
    return out[:limit]


def _all(page: Callable[[str], tuple[list[T], str]]) -> list[T]:
    """Every item of a paged list: ``page(token)`` answers one page's items and the next token
    ("" at the end)."""
    out: list[T] = []
    token = ""
    while True:
        items, token = page(token)
        out += items
        if not token:
            return out


def _item(content: str | StoreItem, fields: Mapping[str, Any]) -> StoreItem:
    return content if isinstance(content, StoreItem) else StoreItem(content=content, **fields)


class _Base:
    """What both clients share: the tenant, the credentials and metadata sent with every call,
    per-call options and the requests."""

    def __init__(
        self, tenant: str, timeout: float | None, api_key: Credential | None,
        metadata: Sequence[tuple[str, str]], wait_for_ready: bool,
    ) -> None:
        self.tenant = tenant
        self.timeout = timeout
        self.wait_for_ready = wait_for_ready
        self._api_key = api_key
        self._extra = tuple(metadata)
        # Whether the channel uses TLS (None: the caller's own channel), for errors' hints.
        self._tls: bool | None = None

    def _metadata(self) -> tuple[tuple[str, str], ...]:
        key = self._api_key() if callable(self._api_key) else self._api_key
        return key_metadata(key) + self._extra

    def _options(self, timeout: float | _Unset | None = UNSET) -> dict[str, Any]:
        return {"timeout": self.timeout if isinstance(timeout, _Unset) else timeout,
                "metadata": self._metadata(), "wait_for_ready": self.wait_for_ready}

    def with_options(
        self, *, timeout: float | _Unset | None = UNSET, wait_for_ready: bool | None = None,
        metadata: Sequence[tuple[str, str]] | None = None, tenant: str | None = None,
    ) -> Self:
        """This client on the same connection with other per-call options: ``timeout``
        (seconds; None: no deadline), ``wait_for_ready`` (wait while the server is unreachable
        instead of failing at once), more ``metadata``, another ``tenant``."""
        other = copy.copy(self)
        if not isinstance(timeout, _Unset):
            other.timeout = timeout
        if wait_for_ready is not None:
            other.wait_for_ready = wait_for_ready
        if metadata is not None:
            other._extra = self._extra + tuple(metadata)
        if tenant is not None:
            other.tenant = tenant
        return other

    def _context(self, query: str, max_tokens: int, limit: int, neighbours: bool,
                 opts: RecallOptions) -> pb.ContextRequest:
        return pb.ContextRequest(recall=cv.recall_request(self.tenant, query, limit, **opts),
                                 max_tokens=max_tokens, neighbours=neighbours)

    def _relate(self, from_id: str, to_id: str, relation: str,
                weight: float | None) -> pb.RelateRequest:
        req = pb.RelateRequest(tenant=self.tenant, from_id=from_id, to_id=to_id,
                               relation=relation)
        if weight is not None:  # left out, the server weighs it 1
            req.weight = weight
        return req

    def _unrelate(self, from_id: str, to_id: str, relation: str) -> pb.UnrelateRequest:
        return pb.UnrelateRequest(tenant=self.tenant, from_id=from_id, to_id=to_id,
                                  relation=relation)

    def _related(self, memory_id: str, depth: int, relations: Sequence[str], page_size: int,
                 token: str) -> pb.RelatedRequest:
        return pb.RelatedRequest(tenant=self.tenant, id=memory_id, depth=depth,
                                 relations=list(relations), page_size=page_size,
                                 page_token=token)

    def _entities(self, page_size: int, token: str) -> pb.EntitiesRequest:
        return pb.EntitiesRequest(tenant=self.tenant, page_size=page_size, page_token=token)

    def _entity(self, entity_id: str) -> pb.EntitiesRequest:
        return pb.EntitiesRequest(tenant=self.tenant, entity=entity_id)

    def _feedback(self, memory_id: str, helpful: bool) -> pb.FeedbackRequest:
        if not isinstance(helpful, bool):  # a vote cannot be taken back: "no" is not False
            raise TypeError(f"helpful must be True or False, got {helpful!r}")
        return pb.FeedbackRequest(tenant=self.tenant, id=memory_id, verdict=(
            pb.VERDICT_HELPFUL if helpful else pb.VERDICT_NOT_HELPFUL))

    def _reflect(self, dry_run: bool, window: int, entities: Sequence[str]) -> pb.ReflectRequest:
        return pb.ReflectRequest(tenant=self.tenant, dry_run=dry_run, window=window,
                                 entities=list(entities))

    def _filter(self, filters: Filters) -> pb.RecallFilter:
        return cv.recall_request(self.tenant, "", 1, **filters).filter

    def _store(self, content: str | StoreItem, fields: Mapping[str, Any]) -> pb.StoreRequest:
        return cv.store_request(self.tenant, _item(content, fields))

    def _rebalance(self, dry_run: bool, full: bool, forget: bool) -> pb.RebalanceRequest:
        return pb.RebalanceRequest(tenant=self.tenant, dry_run=dry_run, full=full,
                                   no_forget=not forget)

    def _record(
        self, r: ExportedMemory | pb.ExportedMemory, first: bool, replace: bool
    ) -> pb.ExportedMemory:
        """One record of an import stream: the first names the tenant and whether to replace."""
        rec = cv.exported_record(r)
        rec.tenant, rec.replace = (self.tenant, replace) if first else ("", False)
        return rec

