"""`celestial serve` as a real process: health, store, SIGTERM drains and exits 0, and the
memories are there after a restart on the same data folder; a server its test left running is
killed after it (tests/processes.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
from celestial_client import CelestialClient
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc

from tests.processes import STOP_S, free_port, kill, output, reap, start, stop


def test_sigterm_drains_and_memories_survive_a_restart(tmp_path: Path) -> None:
    port = free_port()
    proc = start(tmp_path, port)
    try:
        with CelestialClient(f"127.0.0.1:{port}") as c:
            m = c.store("the boiler was serviced on 3 March", importance=0.6)
            assert c.recall("when was the boiler serviced?", limit=1)[0].id == m.id
    finally:
        log = stop(proc)
    assert "store flushed and closed" in log

    proc = start(tmp_path, port)
    try:
        with CelestialClient(f"127.0.0.1:{port}") as c:
            got = c.get(m.id)
            assert got.content == m.content and got.recall_count == 1
            assert c.stats().total == 1
    finally:
        stop(proc)


def test_a_server_its_test_left_running_is_killed_after_it(tmp_path: Path) -> None:
    proc = start(tmp_path, free_port())
    assert reap() == [proc.pid]  # what the fixture after every test does
    assert proc.returncode == -signal.SIGKILL


def test_sigterm_during_a_long_batch_stops_within_the_grace_period(tmp_path: Path) -> None:
    port = free_port()
    proc = start(tmp_path, port, CELESTIAL_GRACE_SECONDS="1")
    long = " ".join(f"word{i} of a long note about the garden" for i in range(40))
    outcome: list[grpc.StatusCode] = []

    def send() -> None:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            stub = pb_grpc.MemoryServiceStub(ch)
            try:  # a minute or more of embedding on two cores, whichever encoder
                stub.StoreBatch(iter([pb.StoreRequest(content=f"{i} {long}") for i in range(6000)]))
            except grpc.RpcError as err:
                outcome.append(err.code())

    sender = threading.Thread(target=send)
    sender.start()
    time.sleep(3)
    proc.send_signal(signal.SIGTERM)
    started = time.monotonic()
    try:
        proc.wait(STOP_S)
    finally:
        took = time.monotonic() - started
        kill(proc)  # nothing once it exited; else it is not left running
        sender.join(10)
    out = output(proc)
    assert proc.returncode == 0, out
    # Stopped by the grace period, not by the batch ending (which takes far longer); the bound
    # is loose because a loaded machine is slow to stop too.
    assert took < 40, f"the server took {took:.1f} s to stop after a 1 s grace period"
    assert len(outcome) == 1 and outcome[0] != grpc.StatusCode.OK
    assert "store flushed and closed" in out


def test_an_unreachable_store_at_start_is_one_line_and_a_failing_exit(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CELESTIAL_QDRANT_RETRIES": "0",
           "CELESTIAL_QDRANT_GRPC_PORT": "1"}
    cmd = [sys.executable, "-m", "celestial_client.cli", "serve", "--address",
           f"127.0.0.1:{free_port()}", "--backend", "qdrant", "--qdrant-url", "http://127.0.0.1:1"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "cannot reach Qdrant at http://127.0.0.1:1 (gRPC port 1)" in errors[0]
    assert "Traceback" not in done.stderr


def test_a_second_server_on_a_data_folder_in_use_says_so_in_one_line(tmp_path: Path) -> None:
    first = start(tmp_path, free_port())
    try:
        cmd = [sys.executable, "-m", "celestial_client.cli", "serve", "--address",
               f"127.0.0.1:{free_port()}", "--data-dir", str(tmp_path)]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "CELESTIAL_REBALANCE_INTERVAL_S": "0"}
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    finally:
        stop(first)
    assert done.returncode == 2, done.stderr
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1, done.stderr
    assert f"the data folder {tmp_path} is in use by another Celestial server" in errors[0]
    assert "--data-dir" in errors[0]
    assert "Traceback" not in done.stderr and "WouldBlock" not in done.stderr
