"""Processes the tests start: ``celestial serve`` as a server of its own (``start``, ``stop``),
commands run from a test's event loop (``finished``), and ones that run beside a test's block
until it ends (``running``). None outlives its test: each is registered when started and killed
by ``reap``, which the root conftest calls after every test whatever its outcome (a failed
assertion, an exception, pytest-timeout's signal), besides the helpers' own kill on a failure.
A server's output goes to a file, never to a pipe nobody reads, which its log lines would fill
until it blocked."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

# Bounds, not expectations: a start takes about 12 s on an idle 2-core machine (imports and the
# encoder), many times that under heavy load; a crashed server fails its start at once.
START_S = 300.0
STOP_S = 180.0

_servers: dict[subprocess.Popen[bytes], IO[bytes]] = {}  # started, with their output
_commands: set[asyncio.subprocess.Process] = set()  # in ``finished`` or ``running``, not ended


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A port nothing listens on, never one handed out before in this run: tests take several
    in a row before binding any, and the system may offer the same free port twice."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def start(data_dir: Path, port: int, **env_vars: str) -> subprocess.Popen[bytes]:
    """``celestial serve`` on ``data_dir`` and ``port``, once its health is SERVING; killed if
    it is not (it exited, START_S passed, or the wait was interrupted)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CELESTIAL_REBALANCE_INTERVAL_S": "0",
           **env_vars}
    cmd = [sys.executable, "-m", "celestial_client.cli", "serve",
           "--address", f"127.0.0.1:{port}", "--data-dir", str(data_dir)]
    out = tempfile.TemporaryFile()  # noqa: SIM115 - read until the test ends; reap closes it
    proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    _servers[proc] = out
    try:
        _until_serving(proc, port)
    except BaseException:
        kill(proc)
        raise
    return proc


def _until_serving(proc: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + START_S
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        stub = health_pb2_grpc.HealthStub(ch)
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"the server exited ({proc.returncode}):\n{output(proc)}"
            try:
                resp = stub.Check(health_pb2.HealthCheckRequest(), timeout=5)
                if resp.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                time.sleep(0.3)
    raise AssertionError(f"the server was not serving after {START_S:.0f} s:\n{output(proc)}")


def output(proc: subprocess.Popen[bytes]) -> str:
    """What a server started by ``start`` has written so far (stdout and stderr)."""
    out = _servers.get(proc)
    if out is None:
        return ""
    out.seek(0)
    return out.read().decode(errors="replace")


def kill(proc: subprocess.Popen[bytes]) -> None:
    """kill -9 and wait: what a crash test does, and what every failure path does."""
    proc.kill()  # nothing if it was waited for already
    proc.wait()


def stop(proc: subprocess.Popen[bytes]) -> str:
    """SIGTERM, and its output once it exited with 0; killed if it has not exited within
    STOP_S."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(STOP_S)
    except subprocess.TimeoutExpired:
        kill(proc)
        raise AssertionError(f"the server did not stop within {STOP_S:.0f} s of SIGTERM:\n"
                             f"{output(proc)}") from None
    log = output(proc)
    assert proc.returncode == 0, log
    return log


async def finished(proc: asyncio.subprocess.Process, timeout_s: float,
                   stdin: bytes | None = None) -> tuple[bytes, bytes]:
    """``proc``'s stdout and stderr once it exits, fed ``stdin``; killed if it has not within
    ``timeout_s`` or the wait ends any other way (the test failed or was cancelled)."""
    _commands.add(proc)
    try:
        return await asyncio.wait_for(proc.communicate(stdin), timeout_s)
    except BaseException:
        await _killed(proc)
        raise
    finally:
        _commands.discard(proc)


@contextlib.asynccontextmanager
async def running(proc: asyncio.subprocess.Process,
                  stop_s: float = STOP_S) -> AsyncIterator[asyncio.subprocess.Process]:
    """``proc``, started from a test's event loop, until the block ends any way: then SIGTERM,
    and killed if it has not exited within ``stop_s`` or that wait ends any other way. Its exit
    status is the caller's to read."""
    _commands.add(proc)
    try:
        yield proc
    finally:
        try:
            if proc.returncode is None:
                _signal(proc.pid, signal.SIGTERM)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(proc.wait(), stop_s)
        finally:
            try:
                await _killed(proc)
            finally:
                _commands.discard(proc)


async def _killed(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        _signal(proc.pid, signal.SIGKILL)
        await proc.wait()


def _signal(pid: int, sig: int) -> None:
    """``sig`` to a command, and to its group when it leads one (started in a session of its
    own: a shell and its line). On Python 3.11 a command's wait also waits for its pipes, which
    what it started would hold open."""
    with contextlib.suppress(ProcessLookupError):  # it may have ended unwaited
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)


def reap() -> list[int]:
    """Kill what the last test left running; the ids of the processes it killed."""
    killed = []
    for proc, out in list(_servers.items()):
        if proc.poll() is None:
            killed.append(proc.pid)
            kill(proc)
        out.close()
        del _servers[proc]
    for command in list(_commands):
        if command.returncode is None:
            killed.append(command.pid)
            # The test's loop may be gone: a signal needs none (the loop reaps the child later).
            _signal(command.pid, signal.SIGKILL)
        _commands.discard(command)
    return killed
