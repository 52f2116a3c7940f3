"""The tests' own process helper leaves nothing running: a command past its bound, or whose
wait ends another way (its test cancelled or failed), is killed, and what a test left running is
killed after it (tests/processes.py)."""

from __future__ import annotations

import asyncio
import sys

import pytest

from tests.processes import finished, reap, running

ASLEEP = [sys.executable, "-c", "import time; time.sleep(600)"]


async def test_a_command_past_its_bound_is_killed() -> None:
    proc = await asyncio.create_subprocess_exec(*ASLEEP)
    with pytest.raises(TimeoutError):
        await finished(proc, 0.5)
    assert proc.returncode is not None


async def test_a_command_whose_wait_is_cancelled_is_killed() -> None:
    proc = await asyncio.create_subprocess_exec(*ASLEEP)
    waiting = asyncio.create_task(finished(proc, 600))
    await asyncio.sleep(0)  # the task, scheduled first, runs into its wait
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert proc.returncode is not None


async def test_a_command_still_waited_on_after_its_test_is_reaped() -> None:
    proc = await asyncio.create_subprocess_exec(*ASLEEP)
    waiting = asyncio.create_task(finished(proc, 600))
    await asyncio.sleep(0)
    assert reap() == [proc.pid]  # as after a test whose loop no longer runs the wait
    assert await proc.wait() == -9
    await waiting  # its output, once killed


async def test_a_command_running_beside_a_block_stops_with_it_and_a_pipeline_with_its_line(
) -> None:
    proc = await asyncio.create_subprocess_exec(*ASLEEP)
    with pytest.raises(RuntimeError):
        async with running(proc, stop_s=5):
            raise RuntimeError("the block failed")
    assert proc.returncode is not None
    # A shell line in a session of its own: its pipeline goes with it, and the wait returns.
    line = await asyncio.create_subprocess_exec(
        "bash", "-c", "sleep 600 | cat", stdout=asyncio.subprocess.PIPE,
        start_new_session=True)
    with pytest.raises(TimeoutError):
        await finished(line, 0.5)
    assert line.returncode is not None
