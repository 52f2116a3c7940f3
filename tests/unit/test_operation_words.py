"""What a reflection's end looks like to a person and a script: a model answer's miscount in
words that agree with their numbers, and ``celestial operation watch`` naming a cancelled
operation as such and exiting non-zero for one that ended without a result."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from celestial_client.cli.parser import build
from celestial_client.cli.reflect import run_reflect
from celestial_client.types import Operation, OperationError, Reflection
from celestial_memory.understanding.chat import ModelError, counted, numbered_entries

NAME = "operations/00000000-0000-4000-8000-000000000000"
NOW = datetime(2026, 11, 29, tzinfo=UTC)
RUNNING = Operation(name=NAME, kind="reflection", done=False, stage="asking_model",
                    dry_run=True, memories_read=3, model_calls=0, planned_model_calls=1,
                    model_tokens=0, created_at=NOW, updated_at=NOW, ended_at=None,
                    cancel_requested=False, automatic=False)


def test_a_miscount_agrees_with_its_nouns() -> None:
    assert [counted(n, "entity") for n in (0, 1, 2)] == ["0 entities", "1 entity", "2 entities"]
    assert counted(2, "memory") == "2 memories" and counted(3, "key") == "3 keys"
    with pytest.raises(ModelError, match=r"^0 entries for 2 entities$"):
        numbered_entries('{"entities": []}', "entities", 2, "entity")
    with pytest.raises(ModelError, match=r"^1 entry for 2 memories$"):
        numbered_entries('{"memories": [{"n": 1}]}', "memories", 2, "memory")


class Watched:
    """A client whose watch yields the operation running, then as it ended."""

    def __init__(self, end: Operation) -> None:
        self.end = end

    def watch_operation(self, name: str) -> Iterator[Operation]:
        yield RUNNING
        yield self.end


def watch(end: Operation) -> tuple[int, str, str]:
    progress = io.StringIO()
    answer = run_reflect(build().parse_args(["operation", "watch", NAME]),
                         Watched(end), progress)  # type: ignore[arg-type]
    return answer.status, answer.text, progress.getvalue()


def ended(error: OperationError | None) -> Operation:
    result = None if error else Reflection(dry_run=True, memories_read=3, model_calls=1,
                                           model_tokens=100, insights=[], summaries=[])
    return replace(RUNNING, done=True, stage="done", model_calls=1, ended_at=NOW,
                   result=result, error=error)


def test_watch_exits_non_zero_for_a_failed_or_cancelled_operation() -> None:
    status, text, progress = watch(ended(None))
    assert status == 0 and f"{NAME}  reflection  done:" in text
    assert progress.splitlines() == [f"{NAME}: asking model, 3 memories read, 0/1 model calls, "
                                     "0 tokens", f"{NAME}: done, 3 memories read, 1/1 model "
                                     "calls, 0 tokens"]

    status, text, progress = watch(ended(OperationError("CANCELLED", "CANCELLED", "cancelled")))
    assert status == 1 and f"{NAME}  reflection  cancelled:" in text
    assert progress.splitlines()[-1].startswith(f"{NAME}: cancelled,")
    assert "failed" not in text + progress

    budget = OperationError("RESOURCE_EXHAUSTED", "MODEL_BUDGET", "the tenant's model budget")
    status, text, _ = watch(ended(budget))
    assert status == 1 and f"{NAME}  reflection  failed:" in text
    assert "error (RESOURCE_EXHAUSTED, MODEL_BUDGET): the tenant's model budget" in text
    status, _, _ = watch(ended(OperationError("UNAVAILABLE", "MODEL_UNAVAILABLE", "down")))
    assert status == 1  # the server answered: its model did not (as reflect exits)
    assert watch(ended(OperationError("PERMISSION_DENIED", "", "no")))[0] == 5
