"""Whether the HTTP port can stall the server's other callers: a keyed gRPC caller and a keyed
HTTP caller time their calls while an attacker, on loopback, works the HTTP port.

    python benchmarks/http_isolation.py [--seconds 20] [--idle-seconds 30] [--json FILE]
    python benchmarks/http_isolation.py --phases idle,unauth,idle   # a subset, in this order

A server (``celestial serve``) runs as its own process over a fresh embedded store, API keys on,
gRPC and HTTP (Connect) ports on loopback; ``--memories`` memories are stored. Two callers then
run all along, each on its own thread, ``--rate`` times a second: one over gRPC (stubs, the key
as ``authorization: Bearer``), one over Connect JSON (a keep-alive HTTP/1.1 connection, POST
``/celestial.v1.MemoryService/<Method>``), each timing a Get of a random stored memory and a
Stats. A call counts in the phase it started in. Phases, in ``--phases`` order (default: idle,
each attack, idle again):

- ``idle``: nothing else (``--idle-seconds``); the first idle phase is the reference;
- ``unauth``: Store bodies without a key, ``--concurrency`` (4) at a time, round after round
  for ``--seconds`` (at least one round per body, at most ``--max-rounds``): a vector of 1.9
  million numbers (3.8 MB of JSON), 600,000 tags, 280,000 metadata keys;
- ``auth``: the same bodies with a valid write key (of another tenant than the callers');
- ``heavy``: keyed bodies just under what the server converts at all (about 130,000 JSON
  values: a vector of 125,000 numbers, 60,000 tags, 60,000 metadata keys), so each is really
  parsed (a third to half a second of work) before the settings' limits refuse it;
- ``exports``: ``--exports`` (20) Exports over Connect streaming JSON (an enveloped request)
  of the attacker's own tenant (as many memories as the callers'), whose answers are never
  read, held ``--hold`` seconds, then closed;
- ``slow``: ``--slow`` connections (half with a key) each sending a Store body a byte at a
  time, one byte every ``--slow-interval`` seconds, for ``--slow-seconds`` or until answered.

An attack phase lasts until its attacker is done and at least ``--seconds``, then
``--tail`` seconds more, and then until each caller has finished a call started after that,
so that what the attack left behind counts against it. A caller waits for each call before
the next (a closed loop): a stall shows as one long call (the max), not as many. Every attack
request has a socket timeout (``--attack-timeout``); the server is stopped (then killed) on
the way out whatever happens.

Printed: a markdown table (phase, caller, calls, p50 / p99 / max ms, p99 over the idle p99,
errors; a failed call's wait counts in the percentiles), the server's CPU seconds and memory
in each phase, what each attack got (HTTP status and Connect code, seconds per request) and a
verdict: whether each caller's p99 stayed within twice its idle p99 in every phase, without
errors. It does not assert: the figures depend on the machine (its cores and what else runs on
it, printed first). ``--json FILE`` writes every sample and attack outcome.

``--checkout DIR`` runs the server from another tree's code (its ``server/`` and ``client/``),
for a before/after comparison from one environment:

    git archive HEAD server client | tar -x -C /tmp/before
    python benchmarks/http_isolation.py --checkout /tmp/before
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from http.client import HTTPConnection, HTTPException
from pathlib import Path
from typing import Any

import grpc
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

TENANT = "isolation"
ATTACK_TENANT = "attacker"
SERVICE = "/celestial.v1.MemoryService"
ATTACKS = ("unauth", "auth", "heavy", "exports", "slow")
OPS = ("Get", "Stats")
CALLERS = ("gRPC", "HTTP")
MAX_MESSAGE_BYTES = 4 * 1024 * 1024  # the server's default max_message_bytes


# --- the server ---------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def checkout_env(checkout: Path | None) -> dict[str, str]:
    """The environment of the server's processes: this environment's code, or another
    checkout's (``--checkout``, e.g. ``git archive HEAD server client | tar -x -C DIR``)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    if checkout is not None:
        env["PYTHONPATH"] = os.pathsep.join(str(checkout.resolve() / d)
                                            for d in ("server", "client"))
    return env


def make_keys(path: Path, env: dict[str, str]) -> dict[str, str]:
    """Keys written with ``celestial keys create``: the callers' (read), the setup's (write),
    and the attacker's (write, of its own tenant; two, so 20 streams stay within the per-key
    bound on open streams, max_streams_per_caller)."""
    wanted = {"caller": ("read", TENANT), "setup": ("write", TENANT),
              "attacker": ("write", ATTACK_TENANT), "attacker2": ("write", ATTACK_TENANT)}
    keys: dict[str, str] = {}
    for name, (role, tenant) in wanted.items():
        out = subprocess.run(
            [sys.executable, "-m", "celestial_client.cli", "keys", "--file", str(path), "create",
             "--name", name, "--role", role, "--tenant", tenant],
            check=True, capture_output=True, text=True, timeout=120, env=env).stdout
        found = [w for w in out.split() if w.startswith("cm_")]
        if not found:
            raise SystemExit(f"no key in the output of celestial keys create: {out!r}")
        keys[name] = found[0]
    return keys


def _die_with_parent() -> None:
    """In the server's process before it runs (Linux): killed when this probe dies, even by
    SIGKILL, so that no server outlives its probe."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def start_server(data_dir: Path, keys_file: Path, log: Path,
                 env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str, int]:
    grpc_address, http_port = f"127.0.0.1:{free_port()}", free_port()
    env = dict(env, CELESTIAL_DATA_DIR=str(data_dir / "data"),
               CELESTIAL_ADDRESS=grpc_address,
               CELESTIAL_HTTP_ADDRESS=f"127.0.0.1:{http_port}",
               CELESTIAL_API_KEYS_FILE=str(keys_file), CELESTIAL_REBALANCE_INTERVAL_S="0",
               CELESTIAL_LOG_LEVEL="WARNING")
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "celestial_client.cli", "serve"], env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=_die_with_parent if sys.platform == "linux" else None)
    try:
        deadline = time.monotonic() + 180
        with grpc.insecure_channel(grpc_address) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            while True:
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = log.read_text(errors="replace")[-3000:]
                    raise SystemExit(f"the server did not start; its log ends:\n{tail}")
                try:
                    if health.Check(health_pb2.HealthCheckRequest(), timeout=1).status == \
                            health_pb2.HealthCheckResponse.SERVING:
                        break
                except grpc.RpcError:
                    time.sleep(0.3)
        deadline = time.monotonic() + 30  # the HTTP port starts after the gRPC one
        while True:
            try:
                socket.create_connection(("127.0.0.1", http_port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("the HTTP port did not open") from None
                time.sleep(0.2)
    except BaseException:
        stop_server(proc)
        raise
    return proc, grpc_address, http_port


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(30)


def usage(pid: int) -> tuple[float, int]:
    """The process's CPU seconds and its resident memory in MiB so far (Linux; else 0, 0)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        status = Path(f"/proc/{pid}/status").read_text()
    except (OSError, IndexError, ValueError):
        return 0.0, 0
    rss = next((int(line.split()[1]) for line in status.splitlines()
                if line.startswith("VmRSS:")), 0)
    return cpu, rss // 1024


# --- the callers --------------------------------------------------------------------------

@dataclass
class Sample:
    phase: str
    caller: str
    op: str
    ms: float
    error: str | None = None


class Clock:
    """The phase now under way, read by the callers as each call starts, and when each
    caller's last finished call started."""

    def __init__(self) -> None:
        self.phase = "setup"
        self.stopped = threading.Event()
        self.served: dict[str, float] = {}

    def settle(self, limit: float) -> None:
        """Waits (at most ``limit`` seconds) until every caller has finished a call started
        from now: a stall an attack left behind counts in its phase, not the next."""
        since, ends = time.monotonic(), time.monotonic() + limit
        while time.monotonic() < ends and any(self.served.get(c, 0) < since for c in CALLERS):
            time.sleep(0.05)


def pace(clock: Clock, rate: float, once: Callable[[], None]) -> None:
    """``once`` ``rate`` times a second (a late call is followed at once by the next)."""
    period, due = 1.0 / rate, time.monotonic()
    while not clock.stopped.is_set():
        once()
        due += period
        wait = due - time.monotonic()
        if wait > 0:
            clock.stopped.wait(wait)
        else:
            due = time.monotonic()


def grpc_caller(address: str, key: str, ids: list[str], clock: Clock, rate: float,
                samples: list[Sample], timeout: float) -> None:
    meta = (("authorization", f"Bearer {key}"),)
    rng = random.Random(1)
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        calls: dict[str, Callable[[], object]] = {
            "Get": lambda: stub.Get(pb.GetRequest(tenant=TENANT, id=rng.choice(ids)),
                                    metadata=meta, timeout=timeout),
            "Stats": lambda: stub.Stats(pb.StatsRequest(tenant=TENANT), metadata=meta,
                                        timeout=timeout),
        }

        def once() -> None:
            for op, call in calls.items():
                phase, error, began = clock.phase, None, time.monotonic()
                t = time.perf_counter()
                try:
                    call()
                except grpc.RpcError as exc:
                    error = exc.code().name
                samples.append(Sample(phase, "gRPC", op, (time.perf_counter() - t) * 1000, error))
                clock.served["gRPC"] = began

        pace(clock, rate, once)


class HttpCaller:
    """Connect JSON calls on one keep-alive connection, opened again when the server closed it
    between calls (a call that fails on a fresh connection is an error)."""

    def __init__(self, port: int, key: str, timeout: float) -> None:
        self.port, self.timeout = port, timeout
        self.headers = {"content-type": "application/json", "connect-protocol-version": "1",
                        "authorization": f"Bearer {key}"}
        self.conn: HTTPConnection | None = None

    def call(self, method: str, body: dict[str, Any]) -> str | None:
        """None, or what went wrong (a Connect code, an HTTP status or an exception's name)."""
        data = json.dumps(body).encode()
        for attempt in (0, 1):
            fresh = self.conn is None
            if self.conn is None:
                self.conn = HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            try:
                self.conn.request("POST", f"{SERVICE}/{method}", body=data, headers=self.headers)
                resp = self.conn.getresponse()
                text = resp.read()
            except (OSError, HTTPException) as exc:
                self.conn.close()
                self.conn = None
                if fresh or attempt or isinstance(exc, TimeoutError):
                    return type(exc).__name__
                continue
            if resp.status == 200:
                return None
            try:
                return str(json.loads(text)["code"])
            except (ValueError, KeyError, TypeError):
                return f"HTTP {resp.status}"
        return "unreachable"

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


def http_caller(port: int, key: str, ids: list[str], clock: Clock, rate: float,
                samples: list[Sample], timeout: float) -> None:
    caller = HttpCaller(port, key, timeout)
    rng = random.Random(2)

    def once() -> None:
        for op in OPS:
            body = {"tenant": TENANT, "id": rng.choice(ids)} if op == "Get" else {"tenant": TENANT}
            phase, began = clock.phase, time.monotonic()
            t = time.perf_counter()
            error = caller.call(op, body)
            samples.append(Sample(phase, "HTTP", op, (time.perf_counter() - t) * 1000, error))
            clock.served["HTTP"] = began

    try:
        pace(clock, rate, once)
    finally:
        caller.close()


# --- the attacker -------------------------------------------------------------------------

@dataclass
class Outcome:
    phase: str
    kind: str
    seconds: float
    status: int | None  # HTTP status; None: no answer
    code: str  # the Connect code of the answer, or what happened instead


def costly_bodies() -> dict[str, bytes]:
    """Store requests that cost the server much to parse and convert, each within the 4 MiB
    message bound: a vector of 1.9 million numbers, 600,000 tags, 280,000 metadata keys."""
    head = f'{{"tenant":"{ATTACK_TENANT}","content":"x",'.encode()
    bodies = {
        "vector-1.9M": head + b'"vector":[' + b",".join([b"0"] * 1_900_000) + b"]}",
        "tags-600k": head + b'"tags":[' + b",".join([b'"t"'] * 600_000) + b"]}",
        "metadata-280k": head + b'"metadata":{' + b",".join(
            f'"{i:x}":""'.encode() for i in range(280_000)) + b"}}",
    }
    for name, body in bodies.items():
        assert len(body) < MAX_MESSAGE_BYTES, (name, len(body))
    return bodies


def _answer(raw: bytes) -> tuple[int | None, str]:
    """The HTTP status and Connect code of a raw answer (a unary error's JSON, or a stream's
    first envelope: an end message's error, else ``streaming``)."""
    head, _, body = raw.partition(b"\r\n\r\n")
    try:
        status = int(head.split(b" ", 2)[1])
    except (IndexError, ValueError):
        return None, "no answer" if not raw else "garbled answer"
    if b"transfer-encoding: chunked" in head.lower():  # one chunk is enough for a code
        size, _, rest = body.partition(b"\r\n")
        with contextlib.suppress(ValueError):
            body = rest[:int(size, 16)]
    if status == 200 and b"application/connect+" in head.lower():
        if len(body) >= 5 and body[0] & 0x02:
            try:
                end = json.loads(body[5:5 + int.from_bytes(body[1:5], "big")])
                return status, str(end.get("error", {}).get("code", "ok"))
            except ValueError:
                return status, "end message unreadable"
        return status, "streaming" if body else "headers only"
    if status == 200:
        return status, "ok"
    try:
        return status, str(json.loads(body)["code"])
    except (ValueError, KeyError, TypeError):
        return status, f"HTTP {status}"


def _head(port: int, path: str, length: int, kind: str, key: str | None) -> bytes:
    lines = [f"POST {path} HTTP/1.1", f"host: 127.0.0.1:{port}", f"content-type: {kind}",
             f"content-length: {length}", "connect-protocol-version: 1", "connection: close"]
    if key:
        lines.append(f"authorization: Bearer {key}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def read_to_end(sock: socket.socket, deadline: float) -> bytes:
    """What the server sends until it closes, or until ``deadline``."""
    raw = bytearray()
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except OSError:
            break
        if not chunk:
            break
        raw += chunk
    return bytes(raw)


def post_raw(port: int, path: str, body: bytes, key: str | None, timeout: float,
             kind: str = "application/json") -> tuple[int | None, str, float]:
    """One request on a connection of its own: sent whole (unless the server closes first),
    the answer read to its end; its status, Connect code and seconds."""
    t = time.perf_counter()
    deadline = time.monotonic() + timeout
    note = ""
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    except OSError as exc:
        return None, f"connect: {type(exc).__name__}", time.perf_counter() - t
    raw = bytearray()
    try:
        try:
            sock.sendall(_head(port, path, len(body), kind, key) + body)
        except OSError as exc:  # the server may answer and close before the body is all sent
            note = f" (send: {type(exc).__name__})"
        while time.monotonic() < deadline:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                note += " (timed out)"
                break
            except OSError as exc:
                note += f" (recv: {type(exc).__name__})"
                break
            if not chunk:
                break
            raw += chunk
    finally:
        sock.close()
    status, code = _answer(bytes(raw))
    return status, code + note, time.perf_counter() - t


def heavy_bodies() -> dict[str, bytes]:
    """Store requests just under the number of JSON values the server converts at all, so
    that each is parsed in full before a limit refuses it."""
    head = f'{{"tenant":"{ATTACK_TENANT}","content":"x",'.encode()
    return {
        "vector-125k": head + b'"vector":[' + b",".join([b"0.5"] * 125_000) + b"]}",
        "tags-60k": head + b'"tags":[' + b",".join([b'"t"'] * 60_000) + b"]}",
        "metadata-60k": head + b'"metadata":{' + b",".join(
            f'"{i:x}":""'.encode() for i in range(60_000)) + b"}}",
    }


def attack_costly(port: int, key: str | None, phase: str, seconds: float, concurrency: int,
                  max_rounds: int, timeout: float, out: list[Outcome],
                  heavy: bool = False) -> None:
    """Rounds of ``concurrency`` costly bodies at a time, cycling through the bodies, until
    ``seconds`` have passed and each body was sent once (at most ``max_rounds`` rounds)."""
    bodies = list((heavy_bodies() if heavy else costly_bodies()).items())
    started = time.monotonic()
    for r in range(max_rounds):
        if r >= len(bodies) and time.monotonic() - started >= seconds:
            break
        name, body = bodies[r % len(bodies)]

        def one(name: str = name, body: bytes = body) -> None:
            status, code, took = post_raw(port, f"{SERVICE}/Store", body, key, timeout)
            out.append(Outcome(phase, name, took, status, code))

        threads = [threading.Thread(target=one, daemon=True) for _ in range(concurrency)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()


def attack_exports(port: int, keys: list[str], phase: str, count: int, hold: float,
                   timeout: float, out: list[Outcome]) -> None:
    """``count`` Exports over Connect streaming JSON whose answers are not read for ``hold``
    seconds; then what each had answered by then (its first bytes), and closed."""
    message = json.dumps({"tenant": ATTACK_TENANT}).encode()  # its own, filled beforehand
    body = b"\x00" + len(message).to_bytes(4, "big") + message
    socks: list[tuple[socket.socket, float]] = []
    try:
        for i in range(count):
            t = time.perf_counter()
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
                s.sendall(_head(port, f"{SERVICE}/Export", len(body),
                                "application/connect+json", keys[i % len(keys)]) + body)
                socks.append((s, t))
            except OSError as exc:
                out.append(Outcome(phase, "export (unread)", time.perf_counter() - t, None,
                                   f"connect/send: {type(exc).__name__}"))
        time.sleep(hold)
    finally:
        for s, t in socks:
            s.setblocking(False)
            try:
                first = s.recv(65536)
            except OSError:
                first = b""
            status, code = _answer(first)
            out.append(Outcome(phase, f"export (unread {hold:g} s)", time.perf_counter() - t,
                               status, code))
            s.close()


def attack_slow(port: int, key: str, phase: str, count: int, interval: float, seconds: float,
                out: list[Outcome]) -> None:
    """``count`` connections (every other one keyed) each sending a Store body one byte every
    ``interval`` seconds until the server answers or closes, or ``seconds`` pass."""
    length = 4096
    prefix = f'{{"tenant":"{ATTACK_TENANT}","content":"'.encode()
    body = prefix + b"a" * (length - len(prefix) - 2) + b'"}'
    conns: list[tuple[socket.socket, str, float]] = []
    for i in range(count):
        kind = "slow body, keyed" if i % 2 else "slow body, no key"
        t = time.perf_counter()
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(_head(port, f"{SERVICE}/Store", length, "application/json",
                            key if i % 2 else None))
            conns.append((s, kind, t))
        except OSError as exc:
            out.append(Outcome(phase, kind, time.perf_counter() - t, None,
                               f"connect/send: {type(exc).__name__}"))
    sent, live = 0, list(conns)
    ends = time.monotonic() + seconds
    while live and time.monotonic() < ends and sent < length:
        readable, _, _ = select.select([s for s, _, _ in live], [], [], interval)
        for s in readable:  # the server answered (or closed): that connection is done
            s_kind, t = next((k, t) for c, k, t in live if c is s)
            raw = read_to_end(s, time.monotonic() + 2)
            status, code = _answer(raw)
            out.append(Outcome(phase, s_kind, time.perf_counter() - t, status,
                               code if raw else "closed without an answer"))
            s.close()
            live = [c for c in live if c[0] is not s]
        for s, s_kind, t in list(live):
            try:
                s.send(body[sent:sent + 1])
            except OSError as exc:
                out.append(Outcome(phase, s_kind, time.perf_counter() - t, None,
                                   f"send: {type(exc).__name__}"))
                s.close()
                live = [c for c in live if c[0] is not s]
        sent += 1
    for s, s_kind, t in live:
        out.append(Outcome(phase, s_kind, time.perf_counter() - t, None,
                           f"no answer after {sent} bytes; closed by the attacker"))
        s.close()


# --- the run ------------------------------------------------------------------------------

def percentile(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * len(s)))]


def store_memories(address: str, key: str, tenant: str, n: int) -> list[str]:
    meta = (("authorization", f"Bearer {key}"),)
    topics = ["the boiler", "Alice's tea", "the garden fence", "the quarterly report",
              "a trip to Lisbon", "the dentist", "Bob's bicycle", "the new printer"]
    texts = [f"note {i}: {topics[i % len(topics)]} came up again on day {i // len(topics)}"
             for i in range(n)]
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.MemoryServiceStub(channel)
        resp = stub.StoreBatch(iter([pb.StoreRequest(tenant=tenant, content=t) for t in texts]),
                               metadata=meta, timeout=600)
    return list(dict.fromkeys(resp.ids))


def run_phase(name: str, args: argparse.Namespace, port: int, keys: dict[str, str],
              outcomes: list[Outcome], clock: Clock) -> None:
    if name == "idle":
        time.sleep(args.idle_seconds)
        return
    started = time.monotonic()
    if name in ("unauth", "auth", "heavy"):
        attack_costly(port, None if name == "unauth" else keys["attacker"], name, args.seconds,
                      args.concurrency, args.max_rounds, args.attack_timeout, outcomes,
                      heavy=name == "heavy")
    elif name == "exports":
        attack_exports(port, [keys["attacker"], keys["attacker2"]], name, args.exports,
                       args.hold, args.attack_timeout, outcomes)
    elif name == "slow":
        attack_slow(port, keys["attacker"], name, args.slow, args.slow_interval,
                    args.slow_seconds, outcomes)
    left = args.seconds - (time.monotonic() - started)
    time.sleep(max(0.0, left) + args.tail)
    clock.settle(args.call_timeout)


def summarize(samples: list[Sample], phases: list[str], outcomes: list[Outcome],
              spans: dict[str, dict[str, float]]) -> tuple[list[str], dict[str, Any]]:
    lines = ["| phase | caller | calls | p50 ms | p99 ms | max ms | p99 / idle p99 | errors |",
             "|---|---|---:|---:|---:|---:|---:|---|"]
    idle: dict[tuple[str, str], float] = {}
    worst: dict[str, tuple[float, str]] = {}
    failed: dict[str, int] = {}
    table: dict[str, Any] = {}
    for phase in phases:
        for caller in CALLERS:
            for op in OPS:
                rows = [s for s in samples if (s.phase, s.caller, s.op) == (phase, caller, op)]
                ms = [s.ms for s in rows]  # a failed call waited too: it counts
                errors = Counter(s.error for s in rows if s.error is not None)
                if errors:
                    failed[caller] = failed.get(caller, 0) + sum(errors.values())
                err = ", ".join(f"{c} x{n}" for c, n in errors.most_common()) or "0"
                if not ms:
                    lines.append(f"| {phase} | {caller} {op} | {len(rows)} | - | - | - | - | {err} |")
                    continue
                p50, p99, top = (percentile(ms, 0.5), percentile(ms, 0.99), max(ms))
                if phase.startswith("idle") and (caller, op) not in idle:
                    idle[(caller, op)] = p99
                ref = idle.get((caller, op))
                ratio = p99 / ref if ref else None
                if ratio is not None and phase != phases[0]:
                    worst[caller] = max(worst.get(caller, (0.0, "")),
                                        (ratio, f"{phase}, {op}: p99 {p99:.0f} ms"))
                lines.append(f"| {phase} | {caller} {op} | {len(rows)} | {p50:.1f} | {p99:.1f} | "
                             f"{top:.1f} | {'-' if ratio is None else f'{ratio:.1f}x'} | {err} |")
                table[f"{phase}/{caller} {op}"] = {
                    "calls": len(rows), "p50_ms": p50, "p99_ms": p99, "max_ms": top,
                    "p99_over_idle": ratio, "errors": dict(errors)}
    lines += ["", "Server and attacker, by phase:", ""]
    for phase in phases:
        mine = [o for o in outcomes if o.phase == phase]
        span = spans.get(phase, {})
        lines.append(f"- {phase}: {span.get('seconds', 0):.0f} s; the server used "
                     f"{span.get('server_cpu_s', 0):.1f} CPU s, resident "
                     f"{span.get('server_rss_mib', 0):.0f} MiB at its end")
        for kind in dict.fromkeys(o.kind for o in mine):
            got = [o for o in mine if o.kind == kind]
            codes = Counter(f"{o.status or '-'} {o.code}" for o in got)
            secs = sorted(o.seconds for o in got)
            lines.append(f"  - {kind}: {len(got)} requests; "
                         + ", ".join(f"{c} x{n}" for c, n in codes.most_common())
                         + f"; seconds each: min {secs[0]:.2f}, p50 {percentile(secs, 0.5):.2f},"
                         f" max {secs[-1]:.2f}")
    lines += [""]
    for caller in CALLERS:
        if not idle or caller not in worst:
            lines.append(f"Verdict, {caller}: no idle reference or no other phase")
            continue
        ratio, where = worst[caller]
        ok = "yes" if ratio <= 2 and not failed.get(caller) else "NO"
        lines.append(f"Verdict, {caller}: p99 within 2x idle p99 in every phase, no errors? {ok} "
                     f"(worst {ratio:.1f}x: {where}; {failed.get(caller, 0)} failed calls)")
    return lines, table


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--phases", default="idle,unauth,auth,heavy,exports,slow,idle",
                    help="comma-separated, in order: idle, " + ", ".join(ATTACKS))
    ap.add_argument("--seconds", type=float, default=20, help="shortest attack phase")
    ap.add_argument("--idle-seconds", type=float, default=30, help="each idle phase")
    ap.add_argument("--warmup", type=float, default=20,
                    help="seconds the callers run before the first phase, not counted")
    ap.add_argument("--tail", type=float, default=3,
                    help="seconds an attack phase goes on after its attacker is done")
    ap.add_argument("--rate", type=float, default=10, help="each caller's Get+Stats pairs/s")
    ap.add_argument("--memories", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=4, help="costly bodies at a time")
    ap.add_argument("--max-rounds", type=int, default=30, help="most rounds of costly bodies")
    ap.add_argument("--exports", type=int, default=20, help="unread Exports")
    ap.add_argument("--hold", type=float, default=15, help="how long they stay unread")
    ap.add_argument("--slow", type=int, default=6, help="slow-body connections")
    ap.add_argument("--slow-interval", type=float, default=0.5, help="seconds between bytes")
    ap.add_argument("--slow-seconds", type=float, default=35,
                    help="how long the slow bodies go on unanswered (past the server's own "
                         "30 s bound on a unary body, to see it)")
    ap.add_argument("--attack-timeout", type=float, default=120,
                    help="longest an attack request may take")
    ap.add_argument("--call-timeout", type=float, default=60, help="a caller's call deadline")
    ap.add_argument("--json", type=Path, help="write every sample and outcome here")
    ap.add_argument("--checkout", type=Path,
                    help="run the server from this folder's server/ and client/ instead")
    args = ap.parse_args()
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    unknown = [p for p in phases if p != "idle" and p not in ATTACKS]
    if unknown:
        ap.error(f"unknown phases: {unknown}")
    labels: list[str] = []  # a phase named twice is told apart: idle, then "idle 2"
    for p in phases:
        n = phases[:len(labels)].count(p)
        labels.append(f"{p} {n + 1}" if n else p)

    # SIGTERM unwinds like Ctrl-C, through the finally that stops the server.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start; "
          f"callers {args.rate:g} Get+Stats/s each; phases {', '.join(labels)}", flush=True)
    samples: list[Sample] = []
    outcomes: list[Outcome] = []
    spans: dict[str, dict[str, float]] = {}
    clock = Clock()
    with tempfile.TemporaryDirectory(prefix="celestial-isolation-") as tmp:
        root = Path(tmp)
        env = checkout_env(args.checkout)
        keys = make_keys(root / "keys.json", env)
        proc, address, http_port = start_server(root, root / "keys.json", root / "server.log",
                                                env)
        threads: list[threading.Thread] = []
        try:
            ids = store_memories(address, keys["setup"], TENANT, args.memories)
            if "exports" in phases:  # the attacker exports its own tenant: fill it as well
                store_memories(address, keys["attacker"], ATTACK_TENANT, args.memories)
            print(f"stored {len(ids)} memories; server pid {proc.pid}, gRPC {address}, "
                  f"HTTP 127.0.0.1:{http_port}", flush=True)
            for target, where in ((grpc_caller, address), (http_caller, http_port)):
                threads.append(threading.Thread(target=target, daemon=True, args=(
                    where, keys["caller"], ids, clock, args.rate, samples, args.call_timeout)))
            for th in threads:
                th.start()
            # Warm up, not counted: connections made, first calls served, and what a server
            # does just after it starts (indexes, the ranker's trial) done.
            time.sleep(args.warmup)
            for phase, label in zip(phases, labels, strict=True):
                clock.phase = label
                started, (cpu, _) = time.monotonic(), usage(proc.pid)
                mark = len(outcomes)
                run_phase(phase, args, http_port, keys, outcomes, clock)
                for o in outcomes[mark:]:
                    o.phase = label
                cpu_end, rss = usage(proc.pid)
                spans[label] = {"seconds": time.monotonic() - started,
                                "server_cpu_s": cpu_end - cpu, "server_rss_mib": rss}
                print(f"phase {label}: {spans[label]['seconds']:.0f} s", flush=True)
            clock.phase = "done"
        finally:
            clock.stopped.set()
            for th in threads:
                th.join(args.call_timeout + 5)
            stop_server(proc)
    lines, table = summarize([s for s in samples if s.phase in labels], labels, outcomes, spans)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}\n")
    print("\n".join(lines))
    if args.json:
        args.json.write_text(json.dumps({
            "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            "cpus": os.cpu_count(),
            "phases": spans, "table": table, "outcomes": [asdict(o) for o in outcomes],
            "samples": [asdict(s) for s in samples if s.phase in labels]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
