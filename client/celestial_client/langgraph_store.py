"""LangGraph's long-term memory store (``BaseStore``) over a Celestial Memory server. Needs the
``langgraph`` extra.

    store = CelestialStore(CelestialClient("localhost:50051", tenant="agents"))
    graph = builder.compile(store=store)

How LangGraph's model maps onto the memory:
- the client's tenant holds the store; an item is a memory stored with a request id made of
  its namespace and key, from which the server derives an id of the tenant's own, so ``put``
  of the same key replaces it and two tenants' items never meet; ``get`` finds an item by its
  namespace tag and key (one filtered List), in the zones or else in the archive;
- the value's text (its string leaves, joined) is the memory's content and the value itself,
  as compact JSON, its context, which the service indexes with it: so ``search(query=...)`` is
  the service's hybrid recall over both, every item of the namespace ranked by relevance
  (``SearchItem.score``, no gate), and it reinforces what it returns;
- the namespace is a tag (``ns:a.b``) plus one tag per prefix (``ns^:a``, ``ns^:a.b``), so a
  search or listing under a prefix is one tag filter on the server; the key and the item's
  creation time are metadata;
- ``filter`` is applied to the values here, with the operators of LangGraph's in-memory store
  ($eq, $ne, $gt, $gte, $lt, $lte); with a query, it filters the best ``FILTER_WINDOW`` matches.

``index`` and ``ttl`` of ``put`` are accepted and not used: every item is embedded whole, and the
service forgets by its own memory function, not by a fixed time to live.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)

from celestial_client.client import CelestialClient
from celestial_client.types import Memory

MARK = "langgraph"  # a tag on every item, so listings skip the tenant's other memories
FILTER_WINDOW = 100  # the most one recall returns


def request_id(namespace: tuple[str, ...], key: str) -> str:
    """The item's request id: the server derives the memory's id from it and the tenant."""
    return "langgraph:" + hashlib.sha256(json.dumps([namespace, key]).encode()).hexdigest()


def _tags(namespace: tuple[str, ...]) -> list[str]:
    return [MARK, "ns:" + ".".join(namespace)] + [
        "ns^:" + ".".join(namespace[:i]) for i in range(1, len(namespace) + 1)]


def _namespace(m: Memory) -> tuple[str, ...] | None:
    """The namespace a memory's tag names (``_tags``), or None for one of no namespace."""
    return next((tuple(t[3:].split(".")) for t in m.tags if t.startswith("ns:")), None)


def _prefix_tag(prefix: tuple[str, ...]) -> list[str]:
    return ["ns^:" + ".".join(prefix)] if prefix else [MARK]


def _text(value: Any) -> str:
    """The string leaves of a value, in key order: what a search by meaning should match."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "\n".join(filter(None, (_text(value[k]) for k in sorted(value))))
    if isinstance(value, list | tuple):
        return "\n".join(filter(None, (_text(v) for v in value)))
    return ""


def _matches(value: Any, wanted: Any) -> bool:
    """LangGraph's in-memory store's filter: nested equality, and comparison operators."""
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_operator(value, op, v) for op, v in wanted.items())
        return isinstance(value, dict) and all(_matches(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (isinstance(value, list | tuple) and len(value) == len(wanted)
                and all(_matches(a, b) for a, b in zip(value, wanted, strict=True)))
    return bool(value == wanted)


def _operator(value: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return bool(value == operand)
    if op == "$ne":
        return bool(value != operand)
    if value is None:
        return False
    compare = {"$gt": float.__gt__, "$gte": float.__ge__, "$lt": float.__lt__,
               "$lte": float.__le__}.get(op)
    if compare is None:
        raise ValueError(f"unsupported filter operator: {op}")
    return bool(compare(float(value), float(operand)))


def _namespace_matches(ns: tuple[str, ...], cond: MatchCondition) -> bool:
    path = tuple(cond.path)
    if len(ns) < len(path):
        return False
    part = ns[:len(path)] if cond.match_type == "prefix" else ns[len(ns) - len(path):]
    return all(p in ("*", n) for n, p in zip(part, path, strict=True))


class CelestialStore(BaseStore):
    """A ``BaseStore`` over ``client`` (sync and async; the async calls run the blocking client
    in a worker thread). ``reinforce``: whether a search counts as recalling what it returns."""

    supports_ttl = False

    def __init__(self, client: CelestialClient, *, reinforce: bool = True) -> None:
        self.client = client
        self.reinforce = reinforce

    # The item a memory holds, or None for a memory this store did not write.
    def _item(self, m: Memory, score: float | None = None) -> SearchItem | None:
        ns = _namespace(m)
        if ns is None or "lg_key" not in m.metadata:
            return None
        created = datetime.fromisoformat(m.metadata.get("lg_created", m.created_at.isoformat()))
        return SearchItem(ns, m.metadata["lg_key"],
                          json.loads(m.context or m.content), created, m.created_at, score)

    def _find(self, namespace: tuple[str, ...], key: str) -> Memory | None:
        where = {"tags_all": [_tags(namespace)[1]], "metadata": {"lg_key": key}}
        for archived in (False, True):
            page = self.client.list_page(1, archived=archived, **where)  # type: ignore[arg-type]
            if page.items:
                return page.items[0]
        return None

    def _get(self, op: GetOp) -> Item | None:
        m = self._find(op.namespace, op.key)
        found = None if m is None else self._item(m)
        return None if found is None else Item(value=found.value, key=found.key,
                                               namespace=found.namespace,
                                               created_at=found.created_at,
                                               updated_at=found.updated_at)

    def _put(self, op: PutOp) -> None:
        held = self._find(op.namespace, op.key)
        if op.value is None:
            if held is not None:
                self.client.delete(held.id)
            return
        now = datetime.now(UTC)
        created = held.metadata.get("lg_created", now.isoformat()) if held else now.isoformat()
        try:
            doc = json.dumps(op.value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        except (TypeError, ValueError) as err:
            raise ValueError(f"the value of {op.namespace}/{op.key} is not JSON: {err}") from None
        self.client.store(_text(op.value).strip() or doc, context=doc, upsert=True,
                          request_id=request_id(op.namespace, op.key), tags=_tags(op.namespace),
                          created_at=now, metadata={"lg_key": op.key, "lg_created": created})

    def _search(self, op: SearchOp) -> list[SearchItem]:
        tags = _prefix_tag(op.namespace_prefix)
        want = op.offset + op.limit
        scored: Iterable[tuple[Memory, float | None]]
        if op.query:
            scored = ((r.memory, r.relevance) for r in self.client.recall(
                op.query, FILTER_WINDOW if op.filter else min(want, 100), tags_all=tags,
                reinforce=self.reinforce, min_relevance=0.0, ignore_zones=True))
        else:
            scored = ((m, None) for m in self.client.iter_memories(tags_all=tags))
        found: list[SearchItem] = []
        for m, score in scored:
            item = self._item(m, score)
            if item is not None and (not op.filter or _matches(item.value, op.filter)):
                found.append(item)
                if len(found) >= want:
                    break
        return found[op.offset:want]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        seen: set[tuple[str, ...]] = set()
        for m in self.client.iter_memories(tags_all=[MARK]):
            ns = _namespace(m)
            if ns is None or not all(_namespace_matches(ns, c) for c in op.match_conditions or ()):
                continue
            seen.add(ns[:op.max_depth] if op.max_depth is not None else ns)
        return sorted(seen)[op.offset:op.offset + op.limit]

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        out: list[Result] = []
        for op in ops:
            validate_op_namespace(op)  # "a.b" must not address ("a", "b")
            if isinstance(op, GetOp):
                out.append(self._get(op))
            elif isinstance(op, PutOp):
                self._put(op)
                out.append(None)
            elif isinstance(op, SearchOp):
                out.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                out.append(self._list_namespaces(op))
            else:
                raise ValueError(f"unknown store operation: {type(op).__name__}")
        return out

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))
