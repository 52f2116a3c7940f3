"""``celestial mcp``: the memory's tools (``agent_tools.TOOLS``) as a Model Context Protocol
server, over stdio (what Claude Desktop and most MCP hosts start) or streamable HTTP, calling a
Celestial Memory server through the Python client. Needs the ``mcp`` extra.

A tool's result is its short text plus the same facts as structured content; bad arguments and
the service's errors come back as tool errors (``isError``) carrying the message, so the model
can read and correct them, and as structured content ``{"error": {"code", "message"}}``, so a
program reading the structured content meets the error, not a missing document. An MCP host
starts this command without the user's environment: an unreachable server's error names the
target this command used and how to set it (``--target`` in the host's args).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import anyio
import grpc
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.transport_security import TransportSecuritySettings

from celestial_client.agent_tools import TOOLS, ToolArgumentError, call_tool
from celestial_client.client import CelestialClient
from celestial_client.errors import CelestialClientError

INSTRUCTIONS = (
    "Long-term memory. Pass every conversation turn to memory_auto: it decides whether to keep "
    "the turn, archive it, or retrieve what the turn needs, and answers the context block to "
    "read before replying. Or save facts worth keeping with memory_save; before answering from past "
    "conversations, look them up with memory_search, and follow a memory's links (what came "
    "before or after it in its session, what it was related to) with memory_related. Memories "
    "are placed in zones (core to cloud) by how often they are recalled, how fresh and how "
    "important they are."
)


def tool_list() -> list[types.Tool]:
    return [types.Tool(name=t.name, description=t.description, input_schema=t.parameters,
                       annotations=types.ToolAnnotations(read_only_hint=t.read_only,
                                                         destructive_hint=t.destructive))
            for t in TOOLS]


def build(client: CelestialClient, target: str = "") -> Server[Any]:
    """An MCP server whose tools call ``client`` (connected to ``target``, named in errors)."""

    async def list_tools(ctx: ServerRequestContext[Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tool_list())

    async def call(ctx: ServerRequestContext[Any],
                   params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            # The client blocks; a thread keeps the server answering other requests meanwhile.
            out = await anyio.to_thread.run_sync(call_tool, client, params.name, params.arguments)
        except ToolArgumentError as err:
            return _error("INVALID_ARGUMENT", str(err))
        except CelestialClientError as err:
            details = err.details
            if err.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                details += (f" (cannot reach the Celestial Memory server at {target}: put "
                            "--target HOST:PORT in the MCP host's args for celestial; hosts do "
                            "not pass the environment through)")
            return _error(err.code.name, details)
        return types.CallToolResult(content=[types.TextContent(type="text", text=out.text)],
                                    structured_content=out.data)

    return Server("celestial-memory", instructions=INSTRUCTIONS, on_list_tools=list_tools,
                  on_call_tool=call)


def _error(code: str, message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"{code}: {message}")],
                                structured_content={"error": {"code": code, "message": message}},
                                is_error=True)


def _say_where(client: CelestialClient, target: str) -> None:
    """One line on stderr (the MCP host's log) naming the server, and a warning when it cannot
    be reached now: the usual mistake is a target left in an environment the host never
    passed on."""
    try:
        total = client.with_options(timeout=5.0).stats().total
        print(f"celestial mcp: {total} memories at {target} (tenant {client.tenant or '-'})",
              file=sys.stderr, flush=True)
    except CelestialClientError as err:
        print(f"celestial mcp: warning: {target}: {err.code.name}: {err.details}; tools will "
              "fail until it answers (put --target in the MCP host's args)", file=sys.stderr,
              flush=True)


def loopback_only(host: str, port: int) -> TransportSecuritySettings:
    """The SDK's DNS rebinding protection for a server bound to ``host`` (a loopback address):
    Host must name a loopback address or localhost with ``port``, and an Origin, when sent, a
    page on one of them."""
    names = {"127.0.0.1", "localhost", "[::1]", f"[{host}]" if ":" in host else host}
    hosts = [f"{n}:{port or '*'}" for n in sorted(names)]
    if port == 80:  # a client leaves the default port out of Host
        hosts += sorted(names)
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                     allowed_origins=[f"http://{n}:*" for n in sorted(names)])


def serve(args: argparse.Namespace, client: CelestialClient, target: str = "") -> int:
    if args.print_tools:
        print(json.dumps([t.model_dump(by_alias=True, exclude_none=True) for t in tool_list()],
                         indent=2), flush=True)
        return 0
    _say_where(client, target)
    server = build(client, target)
    if args.transport == "stdio":
        from mcp.server.stdio import stdio_server

        async def run_stdio() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(run_stdio)
    else:
        import ipaddress

        import uvicorn

        try:
            loopback = ipaddress.ip_address(args.host).is_loopback
        except ValueError:
            loopback = args.host == "localhost"
        if not loopback and not args.allow_remote:
            print(f"refusing to serve MCP on {args.host}: whoever reaches it uses this command's "
                  "key and tenant, with no authentication of their own; bind a loopback address, "
                  "or pass --allow-remote behind a proxy that authenticates", file=sys.stderr)
            return 2

        # On loopback, only requests naming this machine: a page whose name an attacker points
        # at a loopback address (DNS rebinding) sends its own name as Host, and its Origin.
        security = None if args.allow_remote else loopback_only(args.host, args.port)
        app = server.streamable_http_app(host=args.host, transport_security=security)
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
