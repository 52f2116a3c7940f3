"""What every agent tool is built of: a tool's spec and output, the JSON schema helpers, and the
JSON-ready forms of a memory and a recall result. Apart from ``agent_tools`` (which names them
all too), so that the tools of one concept can live in a module of their own
(``turn_tools``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from celestial_client.client import CelestialClient
from celestial_client.types import Memory, RecallResult, Zone

ZONES = [z.value for z in Zone]


class ToolArgumentError(ValueError):
    """A tool call's arguments do not match its schema (or name no tool)."""


@dataclass(frozen=True, slots=True)
class ToolOutput:
    text: str
    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]  # a JSON schema of type object
    run: Callable[[CelestialClient, dict[str, Any]], ToolOutput]
    read_only: bool = True  # MCP's hints: a host may ask before running the others
    destructive: bool = False

    def validate(self, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """The arguments checked against the schema, with the schema's defaults filled in."""
        import jsonschema  # each agent extra installs it; the plain client does not need it

        args = dict(arguments or {})
        errors = sorted(jsonschema.Draft202012Validator(self.parameters).iter_errors(args),
                        key=lambda e: list(e.absolute_path))
        if errors:
            e = errors[0]
            where = ".".join(str(p) for p in e.absolute_path) or "arguments"
            raise ToolArgumentError(f"{self.name}: {where}: {e.message}")
        for key, prop in self.parameters["properties"].items():
            if key not in args and "default" in prop:
                args[key] = prop["default"]
            elif prop.get("type") == "integer" and isinstance(args.get(key), float):
                args[key] = int(args[key])  # JSON Schema's integers include 10.0; protobuf's not
        return args


def _schema(*required: str, **props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(required),
            "additionalProperties": False}


def _str(desc: str, **more: Any) -> dict[str, Any]:
    return {"type": "string", "description": desc, **more}


def _strings(desc: str) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string"}, "description": desc}


def memory_data(m: Memory) -> dict[str, Any]:
    return {"id": m.id, "content": m.content, "zone": m.zone.value, "score": round(m.score, 4),
            "importance": round(m.importance, 4), "recall_count": m.recall_count,
            "created_at": m.created_at.isoformat(), "last_recalled_at": m.last_recalled_at.isoformat(),
            "tags": list(m.tags), "pinned": m.pinned, "archived": m.archived,
            "session_id": m.session_id, "agent_id": m.agent_id, "metadata": dict(m.metadata),
            # Where the rebalance takes it next unless recalled (zone None: the archive).
            "next_move": None if m.next_move is None else {
                "zone": m.next_move.zone.value if m.next_move.zone else None,
                "at": m.next_move.at.isoformat()},
            "memory_type": m.memory_type, "immutable": m.immutable}


def _line(m: Memory) -> str:
    flags = "".join(f" [{f}]" for f, on in (("pinned", m.pinned), ("archived", m.archived),
                                            ("immutable", m.immutable)) if on)
    kind = "" if m.memory_type == "episode" else f"{m.memory_type}, "
    return f"{m.id} ({kind}{m.zone.value}, {m.created_at:%Y-%m-%d}){flags}: {m.content}"


def result_data(r: RecallResult) -> dict[str, Any]:
    b = r.breakdown
    return {**memory_data(r.memory), "relevance": round(r.relevance, 4), "found_in": r.found_in.value,
            "archived": r.archived, "breakdown": {"recall": b.recall, "freshness": b.freshness,
                                                  "importance": b.importance, "context": b.context,
                                                  "total": b.total}}
