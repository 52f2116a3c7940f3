"""The memory's tools for agents, defined once: each a name, a description a model can act on, a
JSON schema of its arguments and the call it makes on a ``CelestialClient``. The MCP server
(``mcp_server``), the LangChain tools (``langchain_tools``) and the OpenAI and Anthropic tool
formats (``llm_tools``) are all renderings of ``TOOLS``; ``call_tool`` runs one against any
server.

Every tool answers a ``ToolOutput``: a short text for the model and the same facts as a
JSON-ready dict. Bad arguments raise ``ToolArgumentError``; the service's own errors are the
client's ``CelestialClientError`` (its message is the server's).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# The tools' building blocks, named here too, where they were first.
from celestial_client._core.tool_spec import (
    ZONES,
    ToolArgumentError,
    ToolOutput,
    ToolSpec,
    _line,
    _schema,
    _str,
    _strings,
    memory_data,
    result_data,
)
from celestial_client._core.turn_tools import TURN_TOOLS
from celestial_client.client import CelestialClient
from celestial_client.types import MEMORY_TYPES, RelatedMemory

__all__ = ["TOOLS", "ToolArgumentError", "ToolOutput", "ToolSpec", "call_tool", "memory_data",
           "related_data", "result_data"]

ID = _str("The memory's id, as save or search returned it.", minLength=1)
LIMIT = {"type": "integer", "minimum": 1, "maximum": 100, "default": 10,
         "description": "How many results at most."}
TAGS = _strings("Tags to file the memory under.")


def _save(c: CelestialClient, a: dict[str, Any]) -> ToolOutput:
    m = c.store(a["content"], importance=a.get("importance"), tags=a["tags"],
                session_id=a.get("session_id", ""), pinned=a["pinned"], context=a.get("context", ""),
                memory_type=a.get("memory_type", ""), immutable=a["immutable"])
    verb = "merged into the memory it repeats" if m.merged else "saved"
    return ToolOutput(f"{verb}: {_line(m)}", {"memory": memory_data(m)})


def _filters(a: dict[str, Any]) -> dict[str, Any]:
    f: dict[str, Any] = {}
    if a.get("zones"):
        f["zones"] = a["zones"]
    if a.get("tags"):
        f["tags_any"] = a["tags"]
    if a.get("session_id"):
        f["session_id"] = a["session_id"]
    if a.get("memory_types"):
        f["memory_types"] = a["memory_types"]
    return f


def _search(c: CelestialClient, a: dict[str, Any]) -> ToolOutput:
    results = c.recall(a["query"], a["limit"], include_archived=a["include_archived"],
                       reinforce=a["reinforce"], **_filters(a))
    lines = [f"{r.relevance:.2f} {_line(r.memory)}" for r in results]
    text = "\n".join(lines) if lines else f"no memory matches {a['query']!r}"
    return ToolOutput(text, {"results": [result_data(r) for r in results]})


def _context(c: CelestialClient, a: dict[str, Any]) -> ToolOutput:
    ctx = c.context(a["query"], a["max_tokens"], a.get("limit", 0), reinforce=a["reinforce"],
                    **_filters(a))
    empty = (f"none of the {len(ctx.omitted_ids)} matching memories fits in {a['max_tokens']} "
             "tokens" if ctx.omitted_ids else f"no memory matches {a['query']!r}")
    return ToolOutput(ctx.text or empty,
                      {"tokens": ctx.tokens, "tokenizer": ctx.tokenizer,
                       "included_ids": ctx.included_ids, "folded_ids": ctx.folded_ids,
                       "omitted_ids": ctx.omitted_ids})


def _get(c: CelestialClient, a: dict[str, Any]) -> ToolOutput:
    m = c.get(a["id"])
    return ToolOutput(_line(m), {"memory": memory_data(m)})


def _update(c: CelestialClient, a: dict[str, Any]) -> ToolOutput:
    changes = {k: a[k] for k in ("content", "importance", "tags", "pinned") if k in a}
    if not changes:
        raise ToolArgumentError("memory_update: give at least one of content, importance, tags, pinned")
    m = c.update(a["id"], **changes)
    return ToolOutput(f"updated: {_line(m)}", {"memory": memory_data(m)})


def _pin(c: CelestialClient, a: dict[str, Any]) -> ToolOutput:
    m = c.update(a["id"], pinned=a["pinned"])
    return ToolOutput(f"{'pinned' if m.pinned else 'unpinned'}: {_line(m)}",
                      {"memory": memory_data(m)})


def _delete(c: CelestialClient, a: dict[str, Any]) -> ToolOutput:
    gone = c.delete(a["id"])
    return ToolOutput(f"deleted {a['id']}" if gone else f"no memory {a['id']}",
                      {"id": a["id"], "deleted": gone})


def _feedback(c: CelestialClient, a: dict[str, Any]) -> ToolOutput:
    m = c.feedback(a["id"], a["helpful"])
    verdict = "helpful" if a["helpful"] else "not helpful"
    return ToolOutput(f"noted as {verdict} (importance now {m.importance:.2f}): {_line(m)}",
                      {"helpful": a["helpful"], "memory": memory_data(m)})


def _stats(c: CelestialClient, a: dict[str, Any]) -> ToolOutput:
    s = c.stats()
    zones = {z.zone.value: z.count for z in s.zones}
    text = ", ".join(f"{k} {v}" for k, v in zones.items())
    return ToolOutput(f"{s.total} memories: {text}; {s.archived} archived",
                      {"total": s.total, "zones": zones, "archived": s.archived,
                       "embedding_model": s.embedding_model, "backend": s.backend})


def _recent(c: CelestialClient, a: dict[str, Any]) -> ToolOutput:
    ms = c.recent(a["limit"], **_filters(a))
    return ToolOutput("\n".join(_line(m) for m in ms) or "no memories yet",
                      {"memories": [memory_data(m) for m in ms]})


def _ledger(c: CelestialClient, a: dict[str, Any]) -> ToolOutput:
    events = c.ledger(limit=a["limit"], memory_id=a.get("memory_id", ""))
    rows = [{"memory_id": e.memory_id, "reason": e.reason, "from_zone": e.from_zone.value,
             "to_zone": e.to_zone.value if e.to_zone else None, "at": e.at.isoformat()}
            for e in events]
    lines = [f"{r['at']} {r['reason']}: {r['memory_id']} {r['from_zone']} -> {r['to_zone']}"
             for r in rows]
    return ToolOutput("\n".join(lines) or "the ledger is empty", {"events": rows})


def related_data(r: RelatedMemory) -> dict[str, Any]:
    return {**memory_data(r.memory),
            "path": [{"from_id": h.from_id, "to_id": h.to_id, "relation": h.relation,
                      "weight": round(h.weight, 4)} for h in r.path]}


def _related(c: CelestialClient, a: dict[str, Any]) -> ToolOutput:
    found = c.related(a["id"], a["depth"], a.get("relations", []))
    # Each step names the relation, and "(back)" when the walk went against its direction, so
    # the model can tell "X follows Y" from "Y follows X".
    lines = []
    for r in found:
        here, steps = a["id"], []
        for h in r.path:
            back = h.from_id != here
            steps.append(h.relation + (" (back)" if back else ""))
            here = h.from_id if back else h.to_id
        lines.append(f"{' > '.join(steps)}: {_line(r.memory)}")
    return ToolOutput("\n".join(lines) or f"no memory is related to {a['id']}",
                      {"id": a["id"], "memories": [related_data(r) for r in found]})


def _relate(c: CelestialClient, a: dict[str, Any]) -> ToolOutput:
    r = c.relate(a["from_id"], a["to_id"], a["relation"], a.get("weight"))
    return ToolOutput(f"related {a['from_id']} -{r.relation}-> {r.id} (weight {r.weight:.2f})",
                      {"from_id": a["from_id"], "to_id": r.id, "relation": r.relation,
                       "weight": round(r.weight, 4), "made_by": r.made_by})


def _restore(c: CelestialClient, a: dict[str, Any]) -> ToolOutput:
    m = c.restore(a["id"])
    return ToolOutput(f"restored: {_line(m)}", {"memory": memory_data(m)})


def _reflect(c: CelestialClient, a: dict[str, Any]) -> ToolOutput:
    r = c.reflect(dry_run=a["dry_run"], entities=a.get("entities", []))
    what = "would write" if r.dry_run else "wrote"
    lines = [f"{what} {len(r.insights)} insights and {len(r.summaries)} entity summaries from "
             f"{r.memories_read} memories ({r.model_calls} model calls)"
             + (" (dry run)" if r.dry_run else "")]
    lines += [f"- {i.entity}: {i.content}" for i in r.insights]
    lines += [f"- summary of {s.entity}: {s.summary}" for s in r.summaries]
    return ToolOutput("\n".join(lines), {
        "dry_run": r.dry_run, "memories_read": r.memories_read, "model_calls": r.model_calls,
        "insights": [{"id": i.id, "entity": i.entity, "content": i.content,
                      "source_ids": list(i.source_ids), "created": i.created}
                     for i in r.insights],
        "summaries": [{"id": s.id, "entity": s.entity, "summary": s.summary}
                      for s in r.summaries]})


def _rebalance(c: CelestialClient, a: dict[str, Any]) -> ToolOutput:
    r = c.rebalance(dry_run=a["dry_run"])
    moved = {f"{src.value}->{dst.value}": n for (src, dst), n in r.moved.items()}
    what = "would move" if r.dry_run else "moved"
    return ToolOutput(
        f"{what} {sum(moved.values())} of {r.scanned} memories, {r.evicted} evicted, "
        f"{r.forgotten} forgotten{' (dry run)' if r.dry_run else ''}",
        {"scanned": r.scanned, "moved": moved, "evicted": r.evicted, "forgotten": r.forgotten,
         "dry_run": r.dry_run})


REINFORCE = {"type": "boolean", "default": True,
             "description": "Count this as recalling what it returns (false: a read-only look, "
                            "which a read-only key needs)."}
FILTER_PROPS: dict[str, dict[str, Any]] = {
    "zones": {"type": "array", "items": {"enum": ZONES}, "uniqueItems": True,
              "description": "Only these zones (core is the most recalled and important)."},
    "tags": _strings("Only memories with any of these tags."),
    "session_id": _str("Only memories of this conversation or session."),
    "memory_types": {"type": "array", "items": {"enum": list(MEMORY_TYPES)}, "uniqueItems": True,
                     "description": "Only memories of these types (a plain save is an episode)."},
}

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("memory_save", "Save a fact, preference or event to long-term memory. A repeat of something "
             "already remembered reinforces that memory instead of adding a copy.",
             _schema("content",
                     content=_str("What to remember, as a self-contained sentence.", minLength=1),
                     importance={"type": "number", "minimum": 0, "maximum": 1,
                                 "description": "0 to 1; left out, the server estimates it."},
                     tags=TAGS | {"default": []},
                     session_id=_str("The conversation or session it came from."),
                     context=_str("Surrounding text that helps find it later (not stored as "
                                  "its content)."),
                     pinned={"type": "boolean", "default": False,
                             "description": "Never let it decay out of its zone or be forgotten."},
                     memory_type={"enum": list(MEMORY_TYPES),
                                  "description": "What it is: fact, preference, triple (subject | "
                                                 "relation | object), insight, or episode (what "
                                                 "was said or happened; the default)."},
                     immutable={"type": "boolean", "default": False,
                                "description": "Protect it: never updated, merged into or "
                                               "forgotten; only an admin deletes it."}),
             _save, read_only=False),
    ToolSpec("memory_search", "Recall memories by meaning (and keywords), most relevant first. Recalling a "
             "memory reinforces it.",
             _schema("query", query=_str("What to look for, in natural language.", minLength=1),
                     limit=LIMIT, **FILTER_PROPS,
                     include_archived={"type": "boolean", "default": False,
                                       "description": "Search forgotten (archived) memories too."},
                     reinforce=REINFORCE),
             _search, read_only=False),  # it reinforces what it finds
    ToolSpec("memory_context", "The memories relevant to a question as one block to read, within a "
             "token budget: grouped by zone, dated, repeats folded, saying what was left out. Use "
             "it to bring what you know into the conversation.",
             _schema("query", query=_str("What the block should be about.", minLength=1),
                     max_tokens={"type": "integer", "minimum": 1, "maximum": 32768,
                                 "default": 1000, "description": "The block's budget in tokens."},
                     limit={"type": "integer", "minimum": 1, "maximum": 100,
                            "description": "How many memories to consider (default 30)."},
                     reinforce=REINFORCE, **FILTER_PROPS),
             _context, read_only=False),
    *TURN_TOOLS,  # memory_auto, policy_decide, policy_status
    ToolSpec("memory_get", "Read one memory by id, with its zone, score and history.",
             _schema("id", id=ID), _get),
    ToolSpec("memory_update", "Change a memory: its content, importance, tags or pin.",
             _schema("id", id=ID, content=_str("The new content.", minLength=1),
                     importance={"type": "number", "minimum": 0, "maximum": 1,
                                 "description": "The new importance, 0 to 1."},
                     tags=_strings("The new tags (replace the old)."),
                     pinned={"type": "boolean", "description": "Pin (true) or unpin (false)."}),
             _update, read_only=False, destructive=True),
    ToolSpec("memory_pin", "Pin a memory so it never decays out of its zone and is never forgotten, or unpin "
             "it.",
             _schema("id", id=ID, pinned={"type": "boolean", "default": True,
                                             "description": "true pins, false unpins."}),
             _pin, read_only=False),
    ToolSpec("memory_delete", "Delete a memory for good (its archived copy too).", _schema("id", id=ID),
             _delete, read_only=False, destructive=True),
    ToolSpec("memory_feedback", "Say whether a memory that search or context returned helped: a "
             "helpful one gains importance (recalled ahead of others and kept longer), an "
             "unhelpful one loses it. Each call counts as one vote.",
             _schema("id", "helpful", id=ID,
                     helpful={"type": "boolean",
                              "description": "true: it helped; false: it did not."}),
             _feedback, read_only=False),
    ToolSpec("memory_stats", "How many memories each zone holds, and how many are archived.", _schema(),
             _stats),
    ToolSpec("memory_recent", "The newest memories, newest first.",
             _schema(limit=LIMIT, **FILTER_PROPS), _recent),
    ToolSpec("memory_related", "The memories linked to a memory through relations (either direction): "
             "what follows or precedes it in its session, or what it was related to. Nearest first, "
             "each with the relations that lead to it. Reinforces nothing.",
             _schema("id", id=ID,
                     depth={"type": "integer", "minimum": 1, "maximum": 3, "default": 1,
                            "description": "How many steps along relations to walk, 1 to 3."},
                     relations=_strings("Follow only these relations (e.g. \"follows\", "
                                        "\"about\"); left out, every relation.")),
             _related),
    ToolSpec("memory_relate", "Relate two memories: a named, weighted link from one to the other "
             "(e.g. \"about\", \"contradicts\"), which memory_related and search's graph "
             "expansion follow. Relating them again under the same name sets the weight.",
             _schema("from_id", "to_id", "relation",
                     from_id=_str("The memory the relation starts at.", minLength=1),
                     to_id=_str("The memory it points to.", minLength=1),
                     relation=_str("Its name: lower-case letters, digits, '_' or '-'.",
                                   pattern="^[a-z0-9_-]+$", maxLength=64),
                     weight={"type": "number", "minimum": 0, "maximum": 1,
                             "description": "How strong, 0 to 1; left out, 1."}),
             _relate, read_only=False),
    ToolSpec("memory_restore", "Bring a forgotten (archived) memory back into the zones, e.g. "
             "one that search found with include_archived.",
             _schema("id", id=ID), _restore, read_only=False),
    ToolSpec("memory_ledger", "The memory's history: evictions, forgotten, restored and deleted memories, "
             "oldest first.",
             _schema(limit=LIMIT, memory_id=_str("Only this memory's events.")), _ledger),
    ToolSpec("memory_reflect", "Ask the server's model for insights about the entities the recent "
             "memories mention (stored as insight memories linked to their sources) and a "
             "summary of each entity. A dry run unless dry_run is false. Fails when the server "
             "has no model.",
             _schema(dry_run={"type": "boolean", "default": True,
                              "description": "Only report what would be written."},
                     entities=_strings("Only these entities (ids like \"name:alice\"); left "
                                       "out, the most mentioned.")),
             _reflect, read_only=False),
    ToolSpec("memory_rebalance", "Re-place memories in their zones now and forget the neglected. A dry run "
             "unless dry_run is false.",
             _schema(dry_run={"type": "boolean", "default": True,
                              "description": "Only report what would change."}),
             _rebalance, read_only=False, destructive=True),
)

BY_NAME = {t.name: t for t in TOOLS}


def call_tool(client: CelestialClient, name: str, arguments: Mapping[str, Any] | None) -> ToolOutput:
    """Run the tool ``name`` with ``arguments`` (checked against its schema) on ``client``."""
    spec = BY_NAME.get(name)
    if spec is None:
        raise ToolArgumentError(f"no tool named {name!r}; the tools are {', '.join(BY_NAME)}")
    return spec.run(client, spec.validate(arguments))
