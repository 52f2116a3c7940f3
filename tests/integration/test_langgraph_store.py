"""``CelestialStore`` against a live server: a port of LangGraph's own store tests (those of its
in-memory store that do not depend on its embedding configuration), one fresh tenant each."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import pytest
from celestial_client import CelestialClient
from celestial_client.langgraph_store import CelestialStore
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp, SearchOp


def run(client: CelestialClient, body: Callable[[CelestialStore], None]) -> asyncio.Future[None]:
    """``body`` on a store over a fresh tenant, in a worker thread (the server is on the loop)."""
    store = CelestialStore(client.with_options(tenant=f"lg-{uuid.uuid4().hex[:8]}"))
    return asyncio.to_thread(body, store)


def put_all(store: CelestialStore, namespaces: list[tuple[str, ...]]) -> None:
    store.batch([PutOp(ns, f"id_{i}", {"data": f"value_{i:02d}"}) for i, ns in enumerate(namespaces)])


def list_namespaces_basic(store: CelestialStore) -> None:
    put_all(store, [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f"),
                    ("a", "c", "f"), ("b", "a", "f"), ("users", "123"), ("users", "456", "settings"),
                    ("admin", "users", "789")])
    assert sorted(store.list_namespaces(prefix=("a", "b"))) == [
        ("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f")]
    assert sorted(store.list_namespaces(suffix=("f",))) == [
        ("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    assert sorted(store.list_namespaces(prefix=("a",), suffix=("f",))) == [
        ("a", "b", "f"), ("a", "c", "f")]
    assert sorted(store.list_namespaces(prefix=("a", "b"), max_depth=3)) == [
        ("a", "b", "c"), ("a", "b", "d"), ("a", "b", "f")]
    assert store.list_namespaces(prefix=("a", "b"), limit=2) == [
        ("a", "b", "c"), ("a", "b", "d", "e")]
    assert store.list_namespaces(prefix=("a", "b"), offset=2) == [
        ("a", "b", "d", "i"), ("a", "b", "f")]
    assert sorted(store.list_namespaces(prefix=("a", "*", "f"))) == [
        ("a", "b", "f"), ("a", "c", "f")]
    assert sorted(store.list_namespaces(suffix=("*", "f"))) == [
        ("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    assert store.list_namespaces(prefix=("nonexistent",)) == []
    assert store.list_namespaces(prefix=("users", "123")) == [("users", "123")]


def list_namespaces_with_wildcards(store: CelestialStore) -> None:
    put_all(store, [("users", "123"), ("users", "456"), ("users", "789", "settings"),
                    ("admin", "users", "789"), ("guests", "123"), ("guests", "456", "preferences")])
    assert sorted(store.list_namespaces(prefix=("users", "*"))) == [
        ("users", "123"), ("users", "456"), ("users", "789", "settings")]
    assert store.list_namespaces(suffix=("*", "preferences")) == [("guests", "456", "preferences")]
    assert store.list_namespaces(prefix=("*", "users"), suffix=("*", "settings")) == []


def list_namespaces_pagination(store: CelestialStore) -> None:
    put_all(store, [("namespace", f"sub_{i:02d}") for i in range(20)])
    for offset in (0, 5, 15):
        assert store.list_namespaces(prefix=("namespace",), limit=5, offset=offset) == [
            ("namespace", f"sub_{i:02d}") for i in range(offset, offset + 5)]


def list_namespaces_max_depth_and_no_conditions(store: CelestialStore) -> None:
    assert store.list_namespaces() == []
    put_all(store, [("a", "b", "c", "d"), ("a", "b", "c", "e"), ("a", "b", "f"), ("a", "g"),
                    ("h", "i", "j", "k")])
    assert sorted(store.list_namespaces(max_depth=2)) == [("a", "b"), ("a", "g"), ("h", "i")]
    assert len(store.list_namespaces()) == 5


def cannot_put_bad_namespaces(store: CelestialStore) -> None:
    doc = {"foo": "bar"}
    for bad in ((), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")):
        with pytest.raises(InvalidNamespaceError):
            store.put(bad, "foo", doc)
    ns = ("foo", "langgraph", "foo")
    store.put(ns, "bar", doc)
    assert store.get(ns, "bar").value == doc  # type: ignore[union-attr]
    assert store.search(ns, query="bar")[0].value == doc
    store.delete(ns, "bar")
    assert store.get(ns, "bar") is None
    # Past the public put (which checks namespaces): the batch takes it as it is.
    store.batch([PutOp(("langgraph", "foo"), "bar", doc)])
    assert store.get(("langgraph", "foo"), "bar").value == doc  # type: ignore[union-attr]
    assert store.search(("langgraph", "foo"))[0].value == doc
    store.delete(("langgraph", "foo"), "bar")
    assert store.get(("langgraph", "foo"), "bar") is None


def put_get_update_and_batch_order(store: CelestialStore) -> None:
    ns = ("users", "alice", "prefs")
    store.put(ns, "coffee", {"text": "espresso, no sugar", "strength": 3})
    first = store.get(ns, "coffee")
    assert first is not None and first.value == {"text": "espresso, no sugar", "strength": 3}
    assert (first.namespace, first.key) == (ns, "coffee")
    store.put(ns, "coffee", {"text": "flat white", "strength": 2})
    second = store.get(ns, "coffee")
    assert second is not None and second.value["text"] == "flat white"
    assert second.created_at == first.created_at and second.updated_at >= first.updated_at
    assert store.get(ns, "tea") is None and store.get(("users", "bob", "prefs"), "coffee") is None
    results = store.batch([GetOp(ns, "coffee"), PutOp(ns, "tea", {"text": "green tea"}),
                           GetOp(ns, "tea"), SearchOp(ns, None, 10, 0, None)])
    assert results[1] is None and results[2].value == {"text": "green tea"}  # type: ignore[union-attr]
    assert sorted(i.key for i in results[3]) == ["coffee", "tea"]  # type: ignore[union-attr]


def search_by_meaning_filter_and_paging(store: CelestialStore) -> None:
    docs = {"doc1": {"text": "zany zebra Xerxes", "n": 1}, "doc2": {"text": "something about dogs", "n": 2},
            "doc3": {"text": "text about birds", "n": 3}}
    for key, value in docs.items():
        store.put(("test",), key, value)
    store.put(("other",), "doc9", {"text": "zany zebra Xerxes", "n": 9})
    found = store.search(("test",), query="Zany Xerxes")
    assert found[0].key == "doc1" and found[0].score is not None
    assert all(r.namespace == ("test",) for r in found)
    assert [r.key for r in store.search(("test",), filter={"n": {"$gte": 2}})] and all(
        r.value["n"] >= 2 for r in store.search(("test",), filter={"n": {"$gte": 2}}))
    assert [r.key for r in store.search(("test",), query="dogs", filter={"n": 2})] == ["doc2"]
    assert store.search(("test",), query="dogs", filter={"n": {"$ne": 2}, "text": "nope"}) == []
    # No gate: every item of the namespace is ranked, however weak the match.
    assert len(store.search(("test",), query="quarterly tax filing deadlines")) == 3
    everything = [r.key for r in store.search(("test",), limit=10)]
    assert sorted(everything) == ["doc1", "doc2", "doc3"]
    assert [r.key for r in store.search(("test",), limit=2, offset=1)] == everything[1:3]
    store.put(("test",), "doc1", {"text": "new text about dogs", "n": 1})
    after = store.search(("test",), query="Zany Xerxes")
    assert not any(r.key == "doc1" and r.value["text"] == "zany zebra Xerxes" for r in after)


@pytest.mark.parametrize("body", [
    list_namespaces_basic, list_namespaces_with_wildcards, list_namespaces_pagination,
    list_namespaces_max_depth_and_no_conditions, cannot_put_bad_namespaces,
    put_get_update_and_batch_order, search_by_meaning_filter_and_paging,
], ids=lambda f: f.__name__)
async def test_store(client: CelestialClient, body: Callable[[CelestialStore], None]) -> None:
    await run(client, body)


async def test_async_api(client: CelestialClient) -> None:
    store = CelestialStore(client.with_options(tenant="lg-async"))
    doc = {"foo": "bar"}
    await store.aput(("valid", "namespace"), "key", doc)
    got = await store.aget(("valid", "namespace"), "key")
    assert got is not None and got.value == doc
    assert (await store.asearch(("valid", "namespace")))[0].value == doc
    assert (await store.asearch(("valid",), query="foo bar"))[0].key == "key"
    assert await store.alist_namespaces() == [("valid", "namespace")]
    with pytest.raises(InvalidNamespaceError):
        await store.aput(("langgraph", "foo"), "bar", doc)
    await store.adelete(("valid", "namespace"), "key")
    assert await store.aget(("valid", "namespace"), "key") is None


def _two_tenants(client: CelestialClient) -> None:
    a = CelestialStore(client.with_options(tenant="lg-a"))
    b = CelestialStore(client.with_options(tenant="lg-b"))
    a.put(("memories",), "profile", {"name": "Ada"})
    b.put(("memories",), "profile", {"name": "Bob"})  # the same namespace and key: no clash
    assert a.get(("memories",), "profile").value == {"name": "Ada"}  # type: ignore[union-attr]
    assert b.get(("memories",), "profile").value == {"name": "Bob"}  # type: ignore[union-attr]
    b.delete(("memories",), "profile")
    assert b.get(("memories",), "profile") is None and a.get(("memories",), "profile") is not None
    with pytest.raises(InvalidNamespaceError):  # a dotted label never addresses two labels
        a.batch([PutOp(("memories.x",), "k", {"v": 1})])
    with pytest.raises(ValueError, match="not JSON"):
        a.put(("memories",), "bad", {"when": object()})


async def test_tenants_keep_their_items_apart(client: CelestialClient) -> None:
    await asyncio.to_thread(_two_tenants, client)
