"""``celestial reflect``: insights about the tenant's recent memories by the server's model (a
dry run unless --apply), started as an operation and followed to its end, its progress on
stderr (``--no-wait``: only started); ``celestial operation get|watch|cancel|list``: the
tenant's operations. The parser registers both with ``add_reflect_command``, cli.py runs
them."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterable
from typing import TextIO

from celestial_client._core.operations import error_of, result
from celestial_client.cli.exits import exit_status
from celestial_client.cli.output import Answer, printable, table
from celestial_client.cli.recording import RecordingClient
from celestial_client.cli.settings import UsageError
from celestial_client.types import Operation, Reflection
from celestial_client.v1 import memory_pb2 as pb

COMMANDS = {"reflect", "operation"}


def add_reflect_command(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    p = command("reflect", "insights about recent memories by the server's model (dry run "
                           "unless --apply); shows its progress until it ends")
    p.add_argument("--apply", action="store_true", help="write the insights and summaries")
    p.add_argument("--window", type=int, default=0,
                   help="newest memories to read (0: the server's default)")
    p.add_argument("--entity", action="append", default=[],
                   help="only this entity (<kind>:<key>); may be repeated")
    p.add_argument("--no-wait", action="store_true",
                   help="start it and print the operation's name (follow it with "
                        "`celestial operation watch NAME`)")
    o = command("operation", "a reflection started before: get, watch (progress until it "
                             "ends), cancel, or list the tenant's")
    o.add_argument("action", choices=["get", "watch", "cancel", "list"],
                   help="get: as it is now; watch: its progress until it ends; cancel: stop it; "
                        "list: the tenant's, newest first")
    o.add_argument("name", nargs="?", default="", help="the operation (operations/<uuid>)")


def run_reflect(args: argparse.Namespace, client: RecordingClient,
                progress: TextIO | None = None) -> Answer:
    progress = progress or sys.stderr  # looked up now: a test may have replaced it
    if args.command == "operation":
        return _operation(args, client, progress)
    op = client.start_reflection(dry_run=not args.apply, window=args.window,
                                 entities=args.entity)
    if args.no_wait:
        return Answer(op.name, client.answer())  # StartReflectionResponse
    try:
        op = _followed(client.watch_operation(op.name), progress)
    except KeyboardInterrupt:  # Ctrl-C stops the reflection too, not only the watching
        with contextlib.suppress(Exception):
            client.cancel_operation(op.name)
        raise
    r = result(op)  # a failed reflection raises its error, as a call doing its work would
    # --json: Reflect's own answer (ReflectResponse), as the finished operation holds it.
    return Answer(show_reflection(r), _finished(client, op).operation.response if args.json
                  else {})


def _operation(args: argparse.Namespace, client: RecordingClient, progress: TextIO) -> Answer:
    if args.action == "list":
        ops = client.list_operations(page_size=100).items
        return Answer(table(["operation", "stage", "progress", "started"], [
            (o.name, _state(o), _counts(o), o.created_at.isoformat(timespec="seconds"))
            for o in ops]) if ops else "no operations", client.answer())
    if not args.name:
        raise UsageError(f"operation {args.action} needs the operation's name (operations/...)")
    if args.action == "get":
        op = client.get_operation(args.name)
    elif args.action == "cancel":
        op = client.cancel_operation(args.name)
    else:
        op = _followed(client.watch_operation(args.name), progress)
        # Followed to its end, a failed or cancelled one exits as reflect would have: a script
        # waiting on it learns it produced nothing.
        return Answer(show_operation(op), _finished(client, op) if args.json else {},
                      0 if op.error is None else exit_status(error_of(op.error)))
    return Answer(show_operation(op), client.answer())


def _finished(client: RecordingClient, op: Operation) -> pb.GetOperationResponse:
    """The finished operation as the service answers it, for --json: a GetOperationResponse
    (what the watch's last message holds; the stream itself is not kept)."""
    client.get_operation(op.name)
    done = client.answer()
    assert isinstance(done, pb.GetOperationResponse)
    return done


def _followed(changes: Iterable[Operation], progress: TextIO) -> Operation:
    """The last of ``changes``, each shown on ``progress`` as a line."""
    last: Operation | None = None
    for op in changes:
        last = op
        progress.write(printable(f"{op.name}: {_state(op)}, {_counts(op)}") + "\n")
        progress.flush()
    assert last is not None, "a watch yields the operation at least once"
    return last


def _state(op: Operation) -> str:
    if not op.done:
        return op.stage.replace("_", " ") + (" (cancel asked)" if op.cancel_requested else "")
    if op.error is None:
        return "done"
    return "cancelled" if op.error.code == "CANCELLED" else "failed"


def _counts(op: Operation) -> str:
    planned = f"/{op.planned_model_calls}" if op.planned_model_calls else ""
    return (f"{op.memories_read} memories read, {op.model_calls}{planned} model calls, "
            f"{op.model_tokens} tokens")


def show_operation(op: Operation) -> str:
    lines = [f"{op.name}  {op.kind}  {_state(op)}: {_counts(op)}"
             + ("  (automatic)" if op.automatic else "")]
    if op.error is not None:
        lines.append(f"error ({op.error.code}, {op.error.reason}): {op.error.message}")
    if op.result is not None:
        lines.append(show_reflection(op.result))
    return "\n".join(lines)


def show_reflection(r: Reflection) -> str:
    verb = "would write" if r.dry_run else "wrote"
    lines = [f"read {r.memories_read} memories; {r.model_calls} model calls, "
             f"{r.model_tokens} tokens; {verb} {len(r.insights)} insights and "
             f"{len(r.summaries)} entity summaries" + (" (dry run: --apply writes)"
                                                      if r.dry_run else "")]
    if r.insights:
        lines.append(table(["entity", "new", "insight", "from"], [
            (i.entity, "yes" if i.created else "no", i.content, len(i.source_ids))
            for i in r.insights]))
    if r.summaries:
        lines.append(table(["entity", "summary"], [(s.entity, s.summary) for s in r.summaries]))
    return "\n".join(lines)
