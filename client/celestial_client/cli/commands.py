"""What ``celestial``'s client commands do once parsed: each turns the arguments into calls on
the client and answers text for people and, for ``--json``, the service's response as the
contract's JSON mapping (output.Answer; the pages of a paged read joined into one response).
Export, import, eval and mcp live in transfer.py."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from celestial_client.cli.input_text import memory_text
from celestial_client.cli.output import (
    Answer,
    show_entities,
    show_entity,
    show_ledger,
    show_memories,
    show_memory,
    show_recall,
    show_related,
    show_relation,
    show_stats,
)
from celestial_client.cli.recording import RecordingClient
from celestial_client.cli.settings import UsageError
from celestial_client.client import MAX_PAGE
from celestial_client.types import Memory

NOT_FOUND = 3  # exit status: nothing to delete, unrelate (cli.py documents them all)


def _meta(pairs: Sequence[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise UsageError(f"--meta wants key=value, got {pair!r}")
        out[key] = value
    return out


def _one(m: Memory, client: RecordingClient) -> Answer:
    return Answer(show_memory(m), client.answer())


def store(args: argparse.Namespace, client: RecordingClient) -> Answer:
    content = memory_text(args.content, args.file, text_flag="TEXT", required=True)
    return _one(client.store(
        content or "", importance=args.importance, tags=args.tags,
        session_id=args.session or "", agent_id=args.agent or "", metadata=_meta(args.meta),
        pinned=args.pinned, memory_type=args.type or "", immutable=args.immutable,
    ), client)


def recall(args: argparse.Namespace, client: RecordingClient) -> Answer:
    results = client.recall(
        args.query, args.limit, zones=args.zones, tags_any=args.tags_any,
        reinforce=not args.no_reinforce, context=args.context, include_archived=args.archived,
        memory_types=args.types, session_id=args.session, agent_id=args.agent,
        metadata=_meta(args.meta),
    )
    return Answer(show_recall(results), client.answer())


def _filters(args: argparse.Namespace) -> dict[str, Any]:
    return {k: v for k, v in (("zones", args.zones), ("tags_any", args.tags_any),
                              ("session_id", args.session), ("agent_id", args.agent)) if v}


def list_memories(args: argparse.Namespace, client: RecordingClient) -> Answer:
    """One page of at most --limit memories in id order (the server may answer fewer per page:
    pages are read until the limit or the end)."""
    memories: list[Memory] = []
    token = args.page_token
    while True:
        page = client.list_page(min(args.limit - len(memories), MAX_PAGE), token,
                                archived=args.archived,
                                **_filters(args))
        memories += page.items
        token = page.next_page_token
        if not token or len(memories) >= args.limit or not page.items:
            break
    more = f"\nmore: celestial list --page-token {token}" if token and memories else ""
    return Answer(show_memories(memories, "no memories") + more, client.answer())


def recent(args: argparse.Namespace, client: RecordingClient) -> Answer:
    memories = client.recent(args.limit, archived=args.archived, **_filters(args))
    return Answer(show_memories(memories, "no memories"), client.answer())


def archived(args: argparse.Namespace, client: RecordingClient) -> Answer:
    memories = client.recent(args.limit, archived=True)
    return Answer(show_memories(memories, "the archive is empty"), client.answer())


def get(args: argparse.Namespace, client: RecordingClient) -> Answer:
    return _one(client.get(args.id), client)


def restore(args: argparse.Namespace, client: RecordingClient) -> Answer:
    return _one(client.restore(args.id), client)


def delete(args: argparse.Namespace, client: RecordingClient) -> Answer:
    done = client.delete(args.id)
    return Answer("deleted" if done else "no such memory", client.answer(),
                  0 if done else NOT_FOUND)


def update(args: argparse.Namespace, client: RecordingClient) -> Answer:
    pinned = True if args.pin else (False if args.unpin else None)
    content = memory_text(args.content, args.file, text_flag="--content", required=False)
    changes = {
        k: v
        for k, v in (("content", content), ("importance", args.importance),
                     ("tags", args.tags), ("pinned", pinned))
        if v is not None
    }
    return _one(client.update(args.id, **changes), client)  # type: ignore[arg-type]


def stats(args: argparse.Namespace, client: RecordingClient) -> Answer:
    s = client.stats()
    return Answer(show_stats(s), client.answer())


def ledger(args: argparse.Namespace, client: RecordingClient) -> Answer:
    events = client.ledger(limit=args.limit, memory_id=args.memory)
    return Answer(show_ledger(events), client.answer())


def consolidate(args: argparse.Namespace, client: RecordingClient) -> Answer:
    done = client.consolidate(dry_run=not args.apply)
    folded = sum(len(ids) for _, ids in done.merges)
    verb = "would merge" if done.dry_run else "merged"
    lines = [f"scanned {done.scanned}; {verb} {folded} repeats into {len(done.merges)} "
             f"memories" + ("; run again with --apply to write" if done.dry_run and folded
                            else "")]
    lines += [f"  {into} <- {', '.join(ids)}" for into, ids in done.merges]
    return Answer("\n".join(lines), client.answer())


def rebalance(args: argparse.Namespace, client: RecordingClient) -> Answer:
    rep = client.rebalance(dry_run=args.dry_run, full=args.full)
    if rep.skipped_by:
        text = f"skipped: another instance ({rep.skipped_by}) is rebalancing"
    else:
        moves = ", ".join(f"{a.value}→{b.value}: {n}" for (a, b), n in rep.moved.items())
        verb = "would move" if rep.dry_run else "moved"
        text = (f"scanned {rep.scanned} in {rep.duration_ms:.1f} ms; {verb} {moves or 'none'}; "
                f"evicted {rep.evicted}; archived {rep.forgotten}; purged {rep.purged}")
    return Answer(text, client.answer())


def relate(args: argparse.Namespace, client: RecordingClient) -> Answer:
    r = client.relate(args.from_id, args.to_id, args.relation, args.weight)
    return Answer(show_relation(args.from_id, r), client.answer())


def unrelate(args: argparse.Namespace, client: RecordingClient) -> Answer:
    removed = client.unrelate(args.from_id, args.to_id, args.relation)
    name = f"-{args.relation}->" if args.relation else "->"
    text = (f"removed {removed} relation{'s' if removed != 1 else ''} "
            f"{args.from_id} {name} {args.to_id}")
    return Answer(text, client.answer(), 0 if removed else NOT_FOUND)


def related(args: argparse.Namespace, client: RecordingClient) -> Answer:
    found = client.related(args.id, args.depth, args.relations)
    return Answer(show_related(args.id, found), client.answer())


def entities(args: argparse.Namespace, client: RecordingClient) -> Answer:
    if args.entity:
        profile = client.entity(args.entity)
        return Answer(show_entity(profile), client.answer())
    found = client.entities()
    return Answer(show_entities(found), client.answer())


Command = Callable[[argparse.Namespace, RecordingClient], Answer]
COMMANDS: dict[str, Command] = {
    "store": store, "recall": recall, "list": list_memories, "recent": recent,
    "archived": archived, "get": get, "restore": restore, "delete": delete, "update": update,
    "stats": stats, "ledger": ledger, "consolidate": consolidate, "rebalance": rebalance,
    "relate": relate, "unrelate": unrelate, "related": related, "entities": entities,
}


def run_command(args: argparse.Namespace, client: RecordingClient) -> Answer:
    """A command that needs only the client (all but serve, keys, config, eval and mcp)."""
    return COMMANDS[args.command](args, client)
