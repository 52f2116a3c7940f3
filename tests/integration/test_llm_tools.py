"""The tools in the OpenAI and Anthropic formats, checked against the SDKs' own types (no
network), and the dispatcher running model tool calls against a live server."""

from __future__ import annotations

import asyncio
import json
from typing import Any, get_type_hints

import anthropic.types as anthropic_types
import pytest
from celestial_client import CelestialClient
from celestial_client.llm_tools import (
    ToolDispatcher,
    anthropic_tools,
    openai_response_tools,
    openai_tools,
)
from openai.types.chat import ChatCompletion, ChatCompletionFunctionToolParam
from openai.types.chat import ChatCompletionToolMessageParam as ToolMessage
from openai.types.responses import FunctionToolParam, ResponseFunctionToolCall
from openai.types.responses.response_input_param import FunctionCallOutput
from openai.types.shared_params import FunctionDefinition
from pydantic import TypeAdapter


def fits(typed_dict: Any, value: dict[str, Any]) -> None:
    """``value`` validates as the SDK's TypedDict and has no key the TypedDict lacks."""
    TypeAdapter(typed_dict).validate_python(value)
    assert set(value) <= set(get_type_hints(typed_dict)), set(value) - set(get_type_hints(typed_dict))


def test_the_tools_fit_each_sdks_tool_type() -> None:
    for tool in openai_tools():
        fits(ChatCompletionFunctionToolParam, tool)
        fits(FunctionDefinition, tool["function"])
    for tool in openai_response_tools():
        fits(FunctionToolParam, tool)
    for tool in anthropic_tools():
        fits(anthropic_types.ToolParam, tool)
    names = [t["name"] for t in anthropic_tools()]
    assert names == [t["function"]["name"] for t in openai_tools()]
    assert {"memory_save", "memory_search", "memory_pin", "memory_stats"} <= set(names)


def chat_reply(*calls: tuple[str, str, str]) -> ChatCompletion:
    return ChatCompletion.model_validate({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": None,
            "tool_calls": [{"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                           for i, n, a in calls]}}]})


def claude_reply(*calls: tuple[str, str, dict[str, Any]]) -> Any:
    return anthropic_types.Message.model_validate({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
        "content": [{"type": "text", "text": "Let me remember that."}] + [
            {"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]})


def _openai_flow(client: CelestialClient) -> None:
    d = ToolDispatcher(client)
    reply = chat_reply(("call_1", "memory_save", json.dumps({"content": "Bob's flight lands at "
                                                                        "Gate 12", "tags": ["travel"]})),
                       ("call_2", "memory_search", '{"query": "where does Bob land?", "limit": 2}'))
    answers = [d.openai(c) for c in reply.choices[0].message.tool_calls or []]
    for a in answers:
        fits(ToolMessage, a)
    assert [a["tool_call_id"] for a in answers] == ["call_1", "call_2"]
    assert answers[0]["content"].startswith("saved: ")
    found = json.loads(answers[1]["content"].split("\n", 1)[1])["results"]
    assert found[0]["content"] == "Bob's flight lands at Gate 12"
    assert found[0]["recall_count"] == 1

    bad = d.openai(chat_reply(("call_3", "memory_search", "{not json"))
                   .choices[0].message.tool_calls[0])  # type: ignore[index]
    assert bad["content"].startswith("error: memory_search: the arguments are not JSON")
    unknown = d.openai({"id": "c4", "type": "function",
                        "function": {"name": "memory_teleport", "arguments": "{}"}})
    assert "no tool named 'memory_teleport'" in unknown["content"]

    # JSON Schema counts 10.0 as an integer; the call still goes through.
    whole = d.openai({"id": "c5", "type": "function", "function": {
        "name": "memory_search", "arguments": '{"query": "Bob", "limit": 2.0}'}})
    assert "Gate 12" in whole["content"]

    item = ResponseFunctionToolCall.model_validate({
        "type": "function_call", "call_id": "fc_1", "name": "memory_stats", "arguments": "{}"})
    out = d.openai_response(item)
    fits(FunctionCallOutput, out)
    assert out["output"].startswith("1 memories")


def _anthropic_flow(client: CelestialClient) -> None:
    d = ToolDispatcher(client)
    saved = d.anthropic(claude_reply(("toolu_1", "memory_save", {"content": "Carol's badge is 4471",
                                                                 "importance": 0.9})))
    TypeAdapter(anthropic_types.MessageParam).validate_python(saved)  # a union of TypedDicts
    assert saved["role"] == "user" and set(saved) == {"role", "content"}
    (block,) = saved["content"]
    fits(anthropic_types.ToolResultBlockParam, block)
    assert block["tool_use_id"] == "toolu_1" and block["is_error"] is False
    mid = json.loads(block["content"].split("\n", 1)[1])["memory"]["id"]

    pinned, missing, bad = d.anthropic(claude_reply(
        ("toolu_2", "memory_pin", {"id": mid}),
        ("toolu_3", "memory_get", {"id": "nope"}),
        ("toolu_4", "memory_update", {"id": mid, "importance": 3})))["content"]
    assert pinned["is_error"] is False and "pinned: " in pinned["content"]
    assert missing["is_error"] is True and missing["content"].startswith("error: ")
    assert bad["is_error"] is True and "importance" in bad["content"]
    assert client.get(mid).pinned and client.get(mid).importance == pytest.approx(0.9)


async def test_openai_tool_calls_run_against_the_server(client: CelestialClient) -> None:
    await asyncio.to_thread(_openai_flow, client)


async def test_anthropic_tool_use_runs_against_the_server(client: CelestialClient) -> None:
    await asyncio.to_thread(_anthropic_flow, client.with_options(tenant="claude"))
