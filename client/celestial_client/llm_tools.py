"""The memory's tools (``agent_tools.TOOLS``) in the OpenAI and Anthropic tool formats, and one
dispatcher that runs a model's tool call against the client and answers the tool result message
each API expects. Plain dicts in and out (the SDKs' request types are TypedDicts), so neither SDK
is imported here; their response objects are read by attribute.

    tools = openai_tools()                       # chat.completions.create(tools=tools, ...)
    for call in reply.choices[0].message.tool_calls or []:
        messages.append(dispatcher.openai(call))  # {"role": "tool", ...}

    tools = anthropic_tools()                    # messages.create(tools=tools, ...)
    messages.append(dispatcher.anthropic(reply))  # {"role": "user", "content": [tool_result, ...]}
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from celestial_client.agent_tools import TOOLS, ToolArgumentError, ToolOutput, call_tool
from celestial_client.client import CelestialClient
from celestial_client.errors import CelestialClientError


def openai_tools() -> list[dict[str, Any]]:
    """Chat Completions' ``tools`` (``ChatCompletionFunctionToolParam``)."""
    return [{"type": "function", "function": {"name": t.name, "description": t.description,
                                              "parameters": t.parameters}} for t in TOOLS]


def openai_response_tools() -> list[dict[str, Any]]:
    """The Responses API's ``tools`` (``FunctionToolParam``)."""
    return [{"type": "function", "name": t.name, "description": t.description,
             "parameters": t.parameters, "strict": False} for t in TOOLS]


def anthropic_tools() -> list[dict[str, Any]]:
    """The Messages API's ``tools`` (``ToolParam``)."""
    return [{"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in TOOLS]


def _get(obj: Any, name: str) -> Any:
    return obj[name] if isinstance(obj, Mapping) else getattr(obj, name)


class ToolDispatcher:
    """Runs tool calls against ``client``. A call that fails (bad arguments, the service's
    error) still answers a result, carrying the message, so the model can correct itself."""

    def __init__(self, client: CelestialClient) -> None:
        self.client = client

    def run(self, name: str, arguments: Mapping[str, Any] | str | None) -> tuple[ToolOutput, bool]:
        """The tool's output and whether it failed. ``arguments`` may be the JSON text a model
        wrote."""
        try:
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments or "{}")
                except json.JSONDecodeError as err:
                    raise ToolArgumentError(f"{name}: the arguments are not JSON: {err}") from None
                if not isinstance(arguments, Mapping):
                    raise ToolArgumentError(f"{name}: the arguments must be a JSON object")
            return call_tool(self.client, name, arguments), False
        except ToolArgumentError as err:
            return ToolOutput(f"error: {err}", {"error": str(err)}), True
        except CelestialClientError as err:
            message = f"{err.code.name}: {err.details}"
            return ToolOutput(f"error: {message}", {"error": message}), True

    @staticmethod
    def _content(out: ToolOutput) -> str:
        return f"{out.text}\n{json.dumps(out.data, ensure_ascii=False)}"

    def openai(self, tool_call: Any) -> dict[str, Any]:
        """A Chat Completions tool call (``ChatCompletionMessageFunctionToolCall`` or its dict)
        -> the ``{"role": "tool"}`` message answering it."""
        fn = _get(tool_call, "function")
        out, _ = self.run(_get(fn, "name"), _get(fn, "arguments"))
        return {"role": "tool", "tool_call_id": _get(tool_call, "id"), "content": self._content(out)}

    def openai_response(self, item: Any) -> dict[str, Any]:
        """A Responses API ``function_call`` item -> its ``function_call_output`` item."""
        out, _ = self.run(_get(item, "name"), _get(item, "arguments"))
        return {"type": "function_call_output", "call_id": _get(item, "call_id"),
                "output": self._content(out)}

    def anthropic_block(self, block: Any) -> dict[str, Any]:
        """A ``tool_use`` content block -> its ``tool_result`` block."""
        out, failed = self.run(_get(block, "name"), _get(block, "input"))
        return {"type": "tool_result", "tool_use_id": _get(block, "id"),
                "content": self._content(out), "is_error": failed}

    def anthropic(self, message: Any) -> dict[str, Any]:
        """An assistant ``Message`` (or its content list) -> the user message carrying a
        ``tool_result`` for each of its ``tool_use`` blocks, in order."""
        content = message if isinstance(message, list) else _get(message, "content")
        return {"role": "user", "content": [self.anthropic_block(b) for b in content
                                            if _get(b, "type") == "tool_use"]}
