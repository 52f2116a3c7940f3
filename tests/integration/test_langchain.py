"""The LangChain retriever and tools against a live server."""

from __future__ import annotations

import asyncio

import pytest
from celestial_client import CelestialClient
from celestial_client.langchain_tools import CelestialRetriever, memory_tools
from langchain_core.messages import ToolMessage


def _retriever(client: CelestialClient) -> None:
    client.store("Dana's dog is called Biscuit", tags=["pets"])
    client.store("The office wifi password rotates every Monday")
    docs = CelestialRetriever(client=client, k=1).invoke("what is the name of Dana's dog?")
    assert [d.page_content for d in docs] == ["Dana's dog is called Biscuit"]
    meta = docs[0].metadata
    assert meta["zone"] in {"core", "inner", "outer", "belt", "cloud"}
    assert 0 < meta["relevance"] <= 1 and set(meta["breakdown"]) == {
        "recall", "freshness", "importance", "context", "total"}
    assert meta["tags"] == ["pets"] and docs[0].id == meta["id"]
    assert client.get(meta["id"]).recall_count == 1
    quiet = CelestialRetriever(client=client, k=5, options={"reinforce": False, "tags_any": ["pets"]})
    assert [d.page_content for d in quiet.invoke("wifi")] in ([], ["Dana's dog is called Biscuit"])
    assert client.get(meta["id"]).recall_count == 1


def _tools(client: CelestialClient) -> None:
    tools = {t.name: t for t in memory_tools(client)}
    assert "memory_search" in tools and tools["memory_save"].args["content"]["type"] == "string"
    saved = tools["memory_save"].invoke({"type": "tool_call", "id": "t1", "name": "memory_save",
                                         "args": {"content": "Eve's standup is at 9:30"}})
    assert isinstance(saved, ToolMessage) and saved.content.startswith("saved: ")
    mid = saved.artifact["memory"]["id"]
    found = tools["memory_search"].invoke({"type": "tool_call", "id": "t2", "name": "memory_search",
                                           "args": {"query": "when is Eve's standup?"}})
    assert found.artifact["results"][0]["id"] == mid
    bad = tools["memory_pin"].invoke({"type": "tool_call", "id": "t3", "name": "memory_pin",
                                      "args": {"id": mid, "pinned": "yes"}})
    assert "pinned" in bad.content and not client.get(mid).pinned
    missing = tools["memory_delete"].invoke({"type": "tool_call", "id": "t4",
                                             "name": "memory_delete", "args": {"id": "x"}})
    assert missing.content.startswith("INVALID_ARGUMENT")
    before = client.get(mid).importance
    voted = tools["memory_feedback"].invoke({"type": "tool_call", "id": "t5",
                                             "name": "memory_feedback",
                                             "args": {"id": mid, "helpful": False}})
    assert voted.content.startswith("noted as not helpful")
    # The server's default step: a fifth of the way to 0.
    assert voted.artifact["memory"]["importance"] == pytest.approx(before * 0.8, abs=1e-4)
    assert [e.reason for e in client.ledger(memory_id=mid)][-1] == "not_helpful"


async def test_retriever(client: CelestialClient) -> None:
    await asyncio.to_thread(_retriever, client.with_options(tenant="lc-retriever"))
    docs = await CelestialRetriever(client=client.with_options(tenant="lc-retriever"), k=1).ainvoke(
        "Biscuit")
    assert docs[0].page_content == "Dana's dog is called Biscuit"


async def test_tools(client: CelestialClient) -> None:
    await asyncio.to_thread(_tools, client.with_options(tenant="lc-tools"))
