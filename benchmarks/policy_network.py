"""Turn policies shared between real server processes (the gossip of CELESTIAL_POLICY_PEERS):
policy_sharing.py's experiment, with five ``celestial serve`` processes on loopback instead of
five policies in one process, every turn sent through Observe and every reward through the API.

    python benchmarks/policy_network.py [DATA] [--folds 26] [--part curve,byzantine,faults,noise]

DATA: the LoCoMo JSON folder (policy_replay.py's default). The default run (one fold, the one
that holds conversation 26 back; every part) took 15 and 19 minutes on 2 shared cores; ``--folds 26,30`` adds
folds (each held-back conversation by its file name; ``all``: the five), ``--part`` runs some
parts only, ``--quick N`` cuts every stream and the held-back conversation to N turns (a smoke
test of the machinery, about 5 minutes). Tables go to stdout as
markdown, under the command line that produced them; progress lines go to stderr.

Folds and streams are policy_sharing.py's: the held-back conversation is evaluated, the other
four are cut at session boundaries into five streams of about equal turns, one per node. Each
node is a server of its own (its own data folder and port; the ONNX Runtime encoder, its int8
copy, one thread; merging repeats, deep recall and the scheduled rebalance off), and its stream
is one tenant's.

What reaches a node's policy (the API's rewards, given at each session's end, or at a cut
where a checkpoint falls inside a session, as policy_replay.py gives them):

- the turn itself, by Observe (session: the turn's own id, so no turn follows another within a
  session and the server's implicit rewards from the next turn never fire: the simulation runs
  with ``implicit=False``; ``--implicit`` sends the real session ids instead);
- an evidence turn kept: one Feedback vote HELPFUL on the memory Observe wrote (``voted``:
  +0.5 to its decision, VOTE in memory/observing.py) where the simulation credits +1;
- an evidence turn skipped: Restore of the archived memory Observe wrote (``found``,
  "restored": -1, rewards.SKIP_FOUND), as the simulation's -1; the memory is live from then on
  (one more in the tenant's count);
- another turn kept: one Feedback vote NOT_HELPFUL (-0.5) with probability ``--vote-share``
  (c = 0.2 by default, a seeded draw per turn), where the simulation credits -c to every such
  turn: a vote is worth 0.5 whatever is asked, and the SAVE arm then estimates
  0.5·P(evidence) - 0.5·c·(1 - P(evidence)) per rewarded turn, which changes sign where the
  simulation's P - c·(1 - P) does (P = c / (1 + c)), though the arm sees fewer rewards;
- another turn skipped: one Feedback vote NOT_HELPFUL on the archived memory Observe wrote,
  with the same probability ``--vote-share`` (Feedback takes a vote on a turn the policy kept
  out of the zones: not helpful says the skip was right, +0.5 to its SKIP), where the
  simulation credits +c; ``--no-skip-votes`` leaves such turns unrewarded, as the API did
  before it took those votes (the SKIP arm then learns only from evidence skipped, -1, and
  its prior).

Further differences from the simulation: the tenant's memory count is the node's whole stream
so far (the simulation starts each conversation piece at 0), novelty is measured (the
simulation's is unmeasured), the exploration is the server's (0.05, as the simulation's), the
all-data policy holds five streams' memories, and a RETRIEVE answers a context block (deep
recall off, so no skip is penalised by a question's recall).

Evaluation: the held-back conversation's turns sent as Observe dry runs (decide without
learning, drawing or storing; greedy), each with its session's earlier turns as ``previous``,
to a frozen copy of the node's tenant (Export and Import into a tenant no gossip touches: its
memories and its policy as they were), so that rounds that go on meanwhile change nothing of
what is measured. A dry run stores nothing: the count and the recent keep/retrieve shares stay
those of the node's stream, where the simulation's frozen policy counts what it keeps of the
held-back conversation. Skip rate and evidence kept are pooled over nodes and folds; beside
them, how many of the held-back turns the bandit decided (phase 2, or the keeping of a
RETRIEVE's turn) and how many of those it skipped (the rest is the rules').

Parts:

1. ``curve``: the five nodes sharing (Multi-Krum), five nodes alone (sharing off) and one node
   replaying all five streams (interleaved, the first K turns of each at checkpoint K), each
   measured after K = 25, 50, 100, 200 and all turns a node. At a checkpoint the sharing nodes
   wait for each other and for two more merges each before they are frozen.
2. ``byzantine``: the nodes alone after their whole streams (the curve's, or replayed here)
   are copied and started sharing: four of them with either the fifth (all honest) or a fake
   peer in its place (a grpc.aio server of the contract's PolicySharing service (its
   ExchangePolicy) inside this process, on its own port:
   it answers every exchange and pushes each round to every honest node an update built from
   the last real one it took: ×100 (counts ×100, at most 1e6), sign-flipped, or a random
   vector of the same norm). The four honest nodes are measured after ``--rounds`` merges each,
   with Multi-Krum and with CELESTIAL_POLICY_SHARE_AGGREGATION=mean.
3. ``faults``: five honest nodes and the fake peer sending another fingerprint (refused by
   every peer: the refusal counts of GetPolicy's sharing status); one node SIGKILLed and
   started again on its port and data folder (its peers' exchange counts with it grow again);
   one node paused with SIGSTOP then SIGCONT (a partition that heals); and, while one node is
   paused, a second fake peer, listed by no node, calling the others under the paused node's
   address (whether the updates it sends are taken as that node's).
4. ``noise``: the five nodes sharing with Gaussian noise (CELESTIAL_POLICY_SHARE_NOISE, each
   ``--sigmas``): epsilon at delta after the rounds, from GetPolicy, and what it costs.

Every process this starts is stopped however it ends (SIGCONT, SIGTERM, then SIGKILL; and
PR_SET_PDEATHSIG where Linux has it, so none outlives a killed benchmark).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parent))
# Servers are started while client threads call: gRPC's fork handlers would only complain.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

import grpc
import numpy as np
from celestial_client.client import CelestialClient
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from policy_replay import DEFAULT_DATA, Conversation, Outcome, Utterance, load, pooled
from policy_sharing import COST, K_VALUES, NODES, first, streams

TENANT = "stream"
MAX_PREVIOUS = 64  # Observe's bound on earlier turns
ONNX_CACHE = Path(tempfile.gettempdir()) / "celestial-bench-encoders"
PARTS = ("curve", "byzantine", "faults", "noise")
ATTACKS = ("x100", "flip", "random")
ATTACK_NAMES = {"x100": "×100", "flip": "sign flip", "random": "random, same norm",
                "fingerprint": "another fingerprint"}
AGGREGATIONS = ("multi-krum", "mean")
# Every server: the quickest start and the fewest moving parts besides the policy.
BASE_ENV = {
    "HF_HUB_OFFLINE": "1", "CELESTIAL_LOG_LEVEL": "WARNING", "CELESTIAL_EMBED_BACKEND": "onnx",
    "CELESTIAL_EMBED_INT8": "true", "CELESTIAL_EMBED_THREADS": "1",
    "CELESTIAL_EMBED_ONNX_DIR": str(ONNX_CACHE), "CELESTIAL_REBALANCE_INTERVAL_S": "0",
    "CELESTIAL_OPTIMIZE_INTERVAL_S": "0", "CELESTIAL_MERGE_REPEATS": "false",
    "CELESTIAL_DEEP_RECALL": "false",
}
BANDIT, BANDIT_SKIPS = "bandit decided", "bandit skipped"
STOP = threading.Event()  # set on the way out: every loop of a worker thread ends


class Stopped(Exception):
    """The benchmark is stopping."""


def pause(seconds: float) -> None:
    """Sleep, or raise ``Stopped`` as soon as the benchmark stops."""
    if STOP.wait(seconds):
        raise Stopped


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- server processes ---------------------------------------------------------------------------


def _die_with_parent() -> None:
    """In a server's process before it runs (Linux): killed when this benchmark dies, even by
    SIGKILL. Servers are started from the main thread only (the signal follows the thread)."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


class Ports:
    """Loopback ports from ``base`` up, each checked free when handed out."""

    def __init__(self, base: int) -> None:
        self.next = base

    def take(self) -> int:
        while not port_free(self.next):
            self.next += 1
        self.next += 1
        return self.next - 1


class Server:
    """One ``celestial serve`` process."""

    live: ClassVar[list[Server]] = []  # every server started and not yet stopped

    def __init__(self, name: str, port: int, data: Path, env: dict[str, str]) -> None:
        self.name, self.port, self.data, self.env = name, port, data, env
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = data.parent / f"{data.name}.log"
        self._channel: grpc.Channel | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        assert threading.current_thread() is threading.main_thread()
        self.data.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, **BASE_ENV, CELESTIAL_ADDRESS=self.address,
                   CELESTIAL_DATA_DIR=str(self.data), CELESTIAL_INSTANCE_ID=self.name, **self.env)
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "celestial_client.cli", "serve"], env=env, stdout=out,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None)
        Server.live.append(self)

    def wait(self, timeout: float = 600.0) -> None:
        """Until its health check answers SERVING."""
        deadline = time.monotonic() + timeout
        with grpc.insecure_channel(self.address) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            while True:
                if STOP.is_set():
                    raise Stopped
                if self.proc is None or self.proc.poll() is not None or \
                        time.monotonic() > deadline:
                    tail = self.log.read_text(errors="replace")[-3000:]
                    raise SystemExit(f"server {self.name} did not start; its log ends:\n{tail}")
                try:
                    if health.Check(health_pb2.HealthCheckRequest(), timeout=2).status == \
                            health_pb2.HealthCheckResponse.SERVING:
                        return
                except grpc.RpcError:
                    pass
                pause(0.3)

    def signal(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, sig)

    def stop(self) -> None:
        """SIGCONT (it may be paused), SIGTERM, and SIGKILL when it has not ended in 30 s."""
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self.proc is not None:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
                self.proc.wait(30)
        if self in Server.live:
            Server.live.remove(self)

    def kill(self) -> None:
        """SIGKILL, as a crash."""
        self.signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(30)
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self in Server.live:
            Server.live.remove(self)

    def client(self, tenant: str) -> CelestialClient:
        return CelestialClient(self.address, tenant=tenant, timeout=300)

    def stub(self) -> pb_grpc.MemoryServiceStub:
        if self._channel is None:
            self._channel = grpc.insecure_channel(
                self.address, options=[("grpc.max_receive_message_length", 64 * 2**20),
                                       ("grpc.max_send_message_length", 64 * 2**20)])
        return pb_grpc.MemoryServiceStub(self._channel)

    def sharing(self, tenant: str = TENANT) -> pb.PolicySharingStatus | None:
        """GetPolicy's sharing status (None: not set, sharing off)."""
        r = self.stub().GetPolicy(pb.GetPolicyRequest(tenant=tenant, last=1), timeout=30)
        return r.sharing if r.HasField("sharing") else None


def start_all(servers: Sequence[Server]) -> None:
    t0 = time.monotonic()
    for s in servers:
        s.start()
    for s in servers:
        s.wait()
    say(f"{len(servers)} server(s) serving in {time.monotonic() - t0:.0f} s")


def stop_all(servers: Iterable[Server] | None = None) -> None:
    for s in list(Server.live if servers is None else servers):
        s.stop()


def sharing_env(peers: Sequence[str], interval: float, fanout: int, aggregation: str,
                noise: float = 0.0, epsilon: float = 0.0, delta: float | None = None,
                evidence: str = "typical") -> dict[str, str]:
    env = {"CELESTIAL_POLICY_PEERS": "[" + ",".join(f'"{p}"' for p in peers) + "]",
           "CELESTIAL_POLICY_SHARE_INTERVAL_S": str(interval),
           "CELESTIAL_POLICY_SHARE_FANOUT": str(fanout),
           "CELESTIAL_POLICY_SHARE_AGGREGATION": aggregation,
           "CELESTIAL_POLICY_SHARE_TENANTS": f'["{TENANT}"]',
           "CELESTIAL_POLICY_SHARE_NOISE": str(noise),
           "CELESTIAL_POLICY_SHARE_EPSILON": str(epsilon),
           "CELESTIAL_POLICY_SHARE_EVIDENCE": evidence}
    if delta is not None:
        env["CELESTIAL_POLICY_SHARE_DELTA"] = str(delta)
    return env


# -- replaying a stream through the API ---------------------------------------------------------


@dataclass(frozen=True)
class Step:
    u: Utterance
    evidence: bool
    session: str  # the conversation piece's session, across pieces unique
    previous: tuple[str, ...]


def steps(pieces: Sequence[Conversation]) -> list[Step]:
    return [Step(u, u.dia_id in c.evidence, f"{c.name}/{u.session}",
                 tuple(v.text for v in s[max(0, pos - MAX_PREVIOUS):pos]))
            for c in pieces for s in c.sessions for pos, u in enumerate(s)]


@dataclass
class Learner:
    """One stream replayed into one tenant of one server, a checkpoint at a time."""

    server: Server
    tenant: str
    turns: list[Step]
    seed: int
    vote_share: float = COST
    implicit: bool = False
    skip_votes: bool = True
    done: int = 0
    rewards: Counter[str] = field(default_factory=Counter)
    decisions: Counter[str] = field(default_factory=Counter)
    _client: CelestialClient | None = None

    def client(self) -> CelestialClient:
        if self._client is None:
            self._client = self.server.client(self.tenant)
            self._rng = np.random.default_rng(self.seed)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def run(self, upto: int | None) -> None:
        """Replay the turns up to ``upto`` (None: all), rewarding each session at its end and
        what is pending at the cut."""
        c = self.client()
        end = len(self.turns) if upto is None else min(upto, len(self.turns))
        pending: list[tuple[Step, Any]] = []
        for i in range(self.done, end):
            if STOP.is_set():
                raise Stopped
            st = self.turns[i]
            if pending and pending[-1][0].session != st.session:
                self._reward(c, pending)
            r = c.observe(st.u.text, session_id=st.session if self.implicit else f"{st.session}#{i}",
                          role=st.u.speaker, previous=list(st.previous))
            self.decisions[r.decision.action] += 1
            pending.append((st, r))
        self._reward(c, pending)
        self.done = end

    def _reward(self, c: CelestialClient, pending: list[tuple[Step, Any]]) -> None:
        for st, r in pending:
            if r.memory is None:
                self.rewards["no memory"] += 1
            elif st.evidence and r.decision.keep:
                c.feedback(r.memory.id, True)
                self.rewards["evidence kept: helpful"] += 1
            elif st.evidence:
                c.restore(r.memory.id)
                self.rewards["evidence skipped: restored"] += 1
            elif r.decision.keep:
                if self._rng.random() < self.vote_share:
                    c.feedback(r.memory.id, False)
                    self.rewards["other kept: not helpful"] += 1
                else:
                    self.rewards["other kept: no vote"] += 1
            elif self.skip_votes and self._rng.random() < self.vote_share:
                c.feedback(r.memory.id, False)
                self.rewards["other skipped: not helpful"] += 1
            else:
                self.rewards["other skipped: no vote"] += 1
        pending.clear()


def evaluate(server: Server, tenant: str, held: Conversation) -> Outcome:
    """The held-back conversation through Observe dry runs on ``tenant``."""
    out = Outcome(held.name)
    with server.client(tenant) as c:
        for s in held.sessions:
            for pos, u in enumerate(s):
                if STOP.is_set():
                    raise Stopped
                d = c.observe(u.text, session_id=f"held/{u.session}#{pos}", role=u.speaker,
                              previous=[v.text for v in s[max(0, pos - MAX_PREVIOUS):pos]],
                              dry_run=True).decision
                out.turns += 1
                out.kept += int(d.keep)
                if u.dia_id in held.evidence:
                    out.evidence += 1
                    out.evidence_kept += int(d.keep)
                if int(d.trace.phase) == 2 or d.trace.keep_by == "bandit":
                    # Counted where pooled() sums them: the turns the bandit kept or skipped.
                    out.lost_by[BANDIT] += 1
                    out.lost_by[BANDIT_SKIPS] += int(not d.keep)
    return out


def freeze(server: Server, tenant: str, copy: str) -> None:
    """``tenant``'s memories and policy copied into ``copy`` (Export, then Import): a tenant no
    gossip round touches (CELESTIAL_POLICY_SHARE_TENANTS names only ``tenant``)."""
    stub = server.stub()
    records = list(stub.Export(pb.ExportRequest(tenant=tenant), timeout=300))
    if not records:
        raise SystemExit(f"{server.name}: tenant {tenant} exported nothing")
    for r in records:  # ids are unique across tenants: the copy's are new (its relations,
        r.memory.id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{copy}/{r.memory.id}"))
        del r.memory.relations[:]  # which name the originals, are left behind: no decision
    records[0].tenant = copy  # reads them)
    stub.Import(iter(records), timeout=300)


def parallel(fns: Sequence[Callable[[], Any]]) -> list[Any]:
    """Each of ``fns`` on a thread of its own; their results in order (the first error
    raised, after every one has ended)."""
    if not fns:
        return []
    with ThreadPoolExecutor(len(fns)) as ex:
        futures = [ex.submit(f) for f in fns]
        try:
            return [f.result() for f in futures]
        except BaseException as first:
            STOP.set()  # the others end at their next turn
            errors = [e for f in futures if (e := f.exception()) is not None]
            real = [e for e in errors if not isinstance(e, Stopped)]
            raise (real[0] if real else first) from None


# -- the fake peer --------------------------------------------------------------------------


class FakePeer:
    """A PolicySharing server in this process, on its own port: it answers every exchange and
    pushes to every target each round an update made by ``mode`` from the last real update it
    took (none until it took one)."""

    def __init__(self, port: int, targets: Sequence[str], mode: str, interval: float,
                 seed: int, claim: str | None = None) -> None:
        self.port, self.targets, self.mode = port, list(targets), mode
        # A node names itself by its address as its peers list it; ``claim``: another's.
        self.name = claim or self.address
        self.interval = interval
        self.rng = np.random.default_rng(seed)
        self.last: pb.SharedPolicy | None = None
        self.stats: Counter[str] = Counter()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._done: asyncio.Event | None = None
        self._ready = threading.Event()
        self.pushing = threading.Event()  # set once its targets serve
        self._thread = threading.Thread(target=self._run, name=f"fake-{port}", daemon=True)
        self._error: BaseException | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def bad(self) -> pb.SharedPolicy | None:
        if self.last is None:
            return None
        v = np.array(self.last.parameters, dtype=np.float64)
        counts = list(self.last.counts)
        fp = self.last.fingerprint
        if self.mode == "x100":
            v, counts = 100.0 * v, [min(1e6, 100.0 * c) for c in counts]
        elif self.mode == "flip":
            v = -v
        elif self.mode == "random":
            r = self.rng.normal(size=v.shape)
            v = r * (np.linalg.norm(v) / max(1e-12, float(np.linalg.norm(r))))
        elif self.mode == "fingerprint":
            fp = hashlib.sha256(b"other rules " + fp.encode()).hexdigest()
        elif self.mode != "honest":
            raise ValueError(self.mode)
        return pb.SharedPolicy(fingerprint=fp, parameters=v.tolist(), counts=counts)

    def _took(self, u: pb.SharedPolicy) -> None:
        if u.parameters:
            self.last = pb.SharedPolicy()
            self.last.CopyFrom(u)

    async def ExchangePolicy(self, request: pb.ExchangePolicyRequest,
                             context: grpc.aio.ServicerContext) -> pb.ExchangePolicyResponse:
        self.stats["called"] += 1
        if request.HasField("update"):
            self._took(request.update)
        out = pb.ExchangePolicyResponse(node=self.name)
        bad = self.bad()
        if bad is not None:
            out.update.CopyFrom(bad)
        return out

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as e:  # reported by stop()
            self._error = e
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._done = asyncio.Event()
        service = sharing_service()
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, {
            "ExchangePolicy": grpc.unary_unary_rpc_method_handler(
                self.ExchangePolicy, pb.ExchangePolicyRequest.FromString,
                pb.ExchangePolicyResponse.SerializeToString)}),))
        server.add_insecure_port(self.address)
        await server.start()
        channels = [grpc.aio.insecure_channel(t) for t in self.targets]
        stubs = [ch.unary_unary(f"/{service}/ExchangePolicy",
                                request_serializer=pb.ExchangePolicyRequest.SerializeToString,
                                response_deserializer=pb.ExchangePolicyResponse.FromString)
                 for ch in channels]
        self._ready.set()
        try:
            while not self._done.is_set():
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._done.wait(), self.interval)
                    break
                if self.pushing.is_set():
                    await asyncio.gather(*(self._push(s) for s in stubs))
        finally:
            for ch in channels:
                await ch.close()
            await server.stop(0)

    async def _push(self, stub: Any) -> None:
        req = pb.ExchangePolicyRequest(node=self.name)
        bad = self.bad()
        if bad is not None:
            req.update.CopyFrom(bad)
        try:
            r = await stub(req, timeout=max(1.0, self.interval))
            self.stats["pushed"] += 1
            if r.HasField("update"):
                self._took(r.update)
        except grpc.aio.AioRpcError as e:
            self.stats[f"push refused: {e.code().name}"] += 1

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        if self._loop is not None and self._done is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._done.set)
        self._thread.join(10)


def sharing_service() -> str:
    """The full name of the contract's policy sharing service (celestial.v1.PolicySharing...):
    the fake peer serves and calls it by name, whatever the generated classes are called."""
    names = [n for n in pb.DESCRIPTOR.services_by_name if n.startswith("PolicySharing")]
    if not names:
        raise SystemExit("the contract has no PolicySharing service: is the sharing commit in?")
    return pb.DESCRIPTOR.services_by_name[names[0]].full_name


# -- folds and figures ----------------------------------------------------------------------


@dataclass
class Fold:
    held: Conversation
    streams: list[list[Step]]


def folds_of(convs: Sequence[Conversation], names: Sequence[str],
             quick: int | None = None) -> list[Fold]:
    """``quick``: every stream and the held-back conversation cut to that many turns."""
    out = []
    for name in names:
        idx = [i for i, c in enumerate(convs) if c.name == name]
        if not idx:
            raise SystemExit(f"no conversation {name!r}: {[c.name for c in convs]}")
        c = convs[idx[0]]
        held = Conversation(c.name, c.sessions, [], c.evidence)
        if quick is not None:
            held = first([held], quick)[0]
        out.append(Fold(held, [steps(s)[:quick] for s in streams(
            [x for j, x in enumerate(convs) if j != idx[0]], NODES)]))
    return out


def fig(outs: Sequence[Outcome]) -> tuple[float, float]:
    o = pooled("", outs)
    return o.skip, o.kept_evidence


def bandit(outs: Sequence[Outcome]) -> str:
    """How many turns the bandit skipped of those it decided."""
    o = pooled("", outs)
    return f"{o.lost_by[BANDIT_SKIPS]} / {o.lost_by[BANDIT]}"


def pct(x: float) -> str:
    return f"{x:.1%}"


def table(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(str(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)


@dataclass
class Bench:
    args: argparse.Namespace
    root: Path
    ports: Ports
    # Per fold: the five nodes' data folders after their whole streams alone (stopped).
    trained: dict[str, list[Path]] = field(default_factory=dict)
    honest_krum: dict[str, list[Outcome]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def server(self, name: str, data: Path, env: dict[str, str] | None = None,
               port: int | None = None) -> Server:
        return Server(name, port or self.ports.take(), data, env or {})

    def learner(self, s: Server, turns: list[Step], seed: int) -> Learner:
        return Learner(s, TENANT, turns, seed, self.args.vote_share, self.args.implicit,
                       not self.args.no_skip_votes)

    def cluster(self, tag: str, dirs: Sequence[Path] | None, n: int, aggregation: str,
                extra_peers: Sequence[str] = (), noise: float = 0.0, fresh: bool = False,
                replace_last: str | None = None) -> list[Server]:
        """``n`` sharing nodes (not started), each listing the others (and ``extra_peers``);
        their data folders copies of ``dirs`` (new ones when ``dirs`` is None).
        ``replace_last``: the address the others list instead of the last node's (which is
        then not made)."""
        a = self.args
        ports = [self.ports.take() for _ in range(n)]
        addrs = [f"127.0.0.1:{p}" for p in ports]
        if replace_last is not None:
            addrs[-1] = replace_last
        out = []
        for i in range(n if replace_last is None else n - 1):
            data = self.root / f"{tag}-n{i}"
            if dirs is not None:
                shutil.copytree(dirs[i], data)
            peers = [x for j, x in enumerate(addrs) if j != i] + list(extra_peers)
            out.append(Server(f"{tag}-n{i}", ports[i], data, sharing_env(
                peers, a.interval, a.fanout, aggregation, noise, a.epsilon_budget,
                evidence=a.evidence)))
        return out

    # -- part 1 ------------------------------------------------------------------------------

    def curve(self, fold: Fold) -> dict[str, dict[int | None, list[Outcome]]]:
        a, name = self.args, fold.held.name
        shared = self.cluster(f"{name}-shared", None, NODES, "multi-krum")
        alone = [self.server(f"{name}-alone-n{i}", self.root / f"{name}-alone-n{i}")
                 for i in range(NODES)]
        everything = self.server(f"{name}-all", self.root / f"{name}-all")
        start_all([*shared, *alone, everything])
        results: dict[str, dict[int | None, list[Outcome]]] = {
            "alone": {}, "shared": {}, "all data": {}}
        merges: dict[int | None, str] = {}
        try:
            ls = [self.learner(s, t, a.seed + i) for i, (s, t) in
                  enumerate(zip(shared, fold.streams, strict=True))]
            la = [self.learner(s, t, a.seed + i) for i, (s, t) in
                  enumerate(zip(alone, fold.streams, strict=True))]
            le = [self.learner(everything, t, a.seed + i) for i, t in enumerate(fold.streams)]

            def sharing_group() -> None:
                for k in a.ks:
                    parallel([lambda lr=lr, k=k: lr.run(k) for lr in ls])
                    merges[k] = self.settle(shared, a.settle)
                    copy = f"{TENANT}-at-{k or 'all'}"
                    parallel([lambda s=s, c=copy: freeze(s, TENANT, c) for s in shared])
                    results["shared"][k] = parallel(
                        [lambda s=s, c=copy: evaluate(s, c, fold.held) for s in shared])
                    say(f"{name} shared K={k or 'all'}: {self.line(results['shared'][k])}; "
                        f"{merges[k]}")

            def alone_group() -> None:
                for k in a.ks:
                    parallel([lambda lr=lr, k=k: lr.run(k) for lr in la])
                    results["alone"][k] = parallel(
                        [lambda s=s: evaluate(s, TENANT, fold.held) for s in alone])
                    say(f"{name} alone K={k or 'all'}: {self.line(results['alone'][k])}")

            def everything_group() -> None:
                for k in a.ks:
                    for lr in le:
                        lr.run(k)
                    results["all data"][k] = [evaluate(everything, TENANT, fold.held)]
                    say(f"{name} all data K={k or 'all'}: {self.line(results['all data'][k])}")

            parallel([sharing_group, alone_group, everything_group])
            for label, group in (("shared", ls), ("alone", la), ("all data", le)):
                total: Counter[str] = Counter()
                for lr in group:
                    total.update(lr.rewards)
                say(f"{name} {label} rewards: {dict(total)}")
            for lr in (*ls, *la, *le):
                lr.close()
        finally:
            stop_all([*shared, *alone, everything])
        self.trained[name] = [s.data for s in alone]
        results["merges"] = merges  # type: ignore[assignment]
        return results

    def settle(self, nodes: Sequence[Server], more: int, timeout: float = 20.0) -> str:
        """Wait until each node has merged ``more`` more times (or ``timeout``); what their
        status says then."""
        before = [self.status(s) for s in nodes]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            now = [self.status(s) for s in nodes]
            if all(n.merges - b.merges >= more for n, b in zip(now, before, strict=True)):
                break
            if STOP.wait(0.25):
                raise Stopped
        now = [self.status(s) for s in nodes]
        waiting = {n.waiting for n in now if n.waiting}
        return (f"rounds {min(n.rounds for n in now)}-{max(n.rounds for n in now)}, merges "
                f"{min(n.merges for n in now)}-{max(n.merges for n in now)}"
                + (f", waiting: {'; '.join(sorted(waiting))}" if waiting else ""))

    def status(self, s: Server) -> pb.PolicySharingStatus:
        st = s.sharing()
        if st is None:
            raise SystemExit(f"{s.name}: GetPolicy has no sharing status: is sharing on?")
        return st

    @staticmethod
    def line(outs: Sequence[Outcome]) -> str:
        skip, ev = fig(outs)
        return f"skip {pct(skip)}, evidence kept {pct(ev)}"

    # -- the nodes alone after their whole streams ------------------------------------------

    def trained_alone(self, fold: Fold) -> list[Path]:
        name = fold.held.name
        if name in self.trained:
            return self.trained[name]
        t0 = time.monotonic()
        alone = [self.server(f"{name}-alone-n{i}", self.root / f"{name}-alone-n{i}")
                 for i in range(NODES)]
        start_all(alone)
        try:
            learners = [self.learner(s, t, self.args.seed + i) for i, (s, t) in
                        enumerate(zip(alone, fold.streams, strict=True))]
            parallel([lambda lr=lr: lr.run(None) for lr in learners])
            for lr in learners:
                lr.close()
        finally:
            stop_all(alone)
        say(f"{name}: five nodes alone replayed their whole streams in "
            f"{time.monotonic() - t0:.0f} s")
        self.trained[name] = [s.data for s in alone]
        return self.trained[name]

    def measured(self, tag: str, nodes: Sequence[Server], held: Conversation,
                 rounds: int) -> tuple[list[Outcome], str, list[pb.PolicySharingStatus]]:
        """After each node has ``rounds`` merges: frozen, then evaluated."""
        summary = self.settle(nodes, rounds, timeout=max(30.0, 6 * rounds * self.args.interval))
        statuses = [self.status(s) for s in nodes]
        copy = f"{TENANT}-{tag}"
        parallel([lambda s=s: freeze(s, TENANT, copy) for s in nodes])
        outs = parallel([lambda s=s: evaluate(s, copy, held) for s in nodes])
        return outs, summary, statuses

    # -- part 2 ------------------------------------------------------------------------------

    def byzantine(self, fold: Fold) -> list[tuple[str, str, list[Outcome], str, Counter[str]]]:
        a, name = self.args, fold.held.name
        dirs = self.trained_alone(fold)
        rows = []
        scenarios: list[tuple[str | None, str]] = [(None, "multi-krum")]
        scenarios += [(att, agg) for att in a.attacks for agg in AGGREGATIONS]
        for attack, agg in scenarios:
            t0 = time.monotonic()
            tag = f"{name}-byz-{attack or 'honest'}-{agg}"
            fake = None
            if attack is None:
                nodes = self.cluster(tag, dirs, NODES, agg)
            else:
                fport = self.ports.take()
                nodes = self.cluster(tag, dirs, NODES, agg, replace_last=f"127.0.0.1:{fport}")
                fake = FakePeer(fport, [s.address for s in nodes], attack, a.interval, a.seed)
            try:
                if fake is not None:
                    fake.start()
                start_all(nodes)
                if fake is not None:
                    fake.pushing.set()
                measured = nodes[:NODES - 1]
                outs, summary, _ = self.measured(tag, measured, fold.held, a.rounds)
            finally:
                stop_all(nodes)
                if fake is not None:
                    fake.stop()
            label = "none (all honest)" if attack is None else ATTACK_NAMES[attack]
            if attack is None:
                self.honest_krum[name] = outs
            if fake is not None and fake.last is not None:
                # The arms' counts of the last real update it took: an arm under
                # update.MIN_COUNT rewards travels empty (0).
                summary += ("; last honest update's counts (SAVE, SKIP): "
                            + ", ".join(f"{c:.0f}" for c in fake.last.counts))
            rows.append((label, agg, outs, summary, fake.stats if fake else Counter()))
            say(f"{name} byzantine {label}, {agg}: {self.line(outs)}; {summary}; "
                f"{time.monotonic() - t0:.0f} s")
        return rows

    # -- part 3 ------------------------------------------------------------------------------

    def faults(self, fold: Fold) -> list[str]:
        """What each event did to the peers' exchange and refusal counts: markdown tables."""
        a, name = self.args, fold.held.name
        dirs = self.trained_alone(fold)
        tag = f"{name}-faults"
        fport = self.ports.take()
        fake_addr = f"127.0.0.1:{fport}"
        nodes = self.cluster(tag, dirs, NODES, "multi-krum", extra_peers=[fake_addr])
        fake = FakePeer(fport, [s.address for s in nodes], "fingerprint", a.interval, a.seed)
        out: list[str] = []
        try:
            fake.start()
            start_all(nodes)
            fake.pushing.set()
            self.settle(nodes, 3, timeout=60)
            # 1. another fingerprint
            wait = max(3.0, 4 * a.interval)
            pause(wait)
            st = {s.name: self.status(s) for s in nodes}
            rows = []
            for s in nodes:
                ex, ref = peer_counts(st[s.name], [fake_addr])
                rows.append([s.name, ex, fmt_refused(ref), st[s.name].rounds, st[s.name].merges])
            out.append(f"**A peer with another fingerprint** (the fake peer, listed by every node "
                       f"and pushing to each every round; its own counts: {dict(fake.stats)})\n\n"
                       + table(["node", "updates taken from the fake", "its refusals, by reason",
                                "rounds", "merges"], rows))
            # 2. a kill mid-round, and a restart on the same port and data folder
            victim = nodes[2]
            others = [s for s in nodes if s is not victim]
            snap0 = self.peer_snapshot(others, victim)
            pause(a.interval * 0.5)  # inside a round
            victim.kill()
            say(f"{victim.name} killed (SIGKILL)")
            pause(wait)
            snap1 = self.peer_snapshot(others, victim)
            t0 = time.monotonic()
            victim.start()
            victim.wait()
            say(f"{victim.name} restarted in {time.monotonic() - t0:.0f} s")
            pause(wait)
            snap2 = self.peer_snapshot(others, victim)
            vs = self.status(victim)
            out.append(f"**A node killed (SIGKILL) and started again** on its port and data "
                       f"folder ({victim.name}; after the restart its own status: rounds "
                       f"{vs.rounds}, merges {vs.merges})\n\n" + self.fault_table(
                           others, ("before the kill", snap0), (f"{wait:.0f} s after", snap1),
                           (f"{wait:.0f} s after the restart", snap2)))
            # 3. a partition that heals: SIGSTOP, then SIGCONT
            paused = nodes[3]
            others = [s for s in nodes if s is not paused]
            snap0 = self.peer_snapshot(others, paused)
            paused.signal(signal.SIGSTOP)
            say(f"{paused.name} paused (SIGSTOP)")
            try:
                pause(wait)
                snap1 = self.peer_snapshot(others, paused)
                pause(wait)
                snap2 = self.peer_snapshot(others, paused)
            finally:
                paused.signal(signal.SIGCONT)
            say(f"{paused.name} resumed (SIGCONT)")
            pause(wait)
            snap3 = self.peer_snapshot(others, paused)
            ps = self.status(paused)
            # 4. a caller that names itself as another peer (no keys: nothing binds the name)
            spoofed = nodes[1]
            others4 = [s for s in nodes if s is not spoofed]
            spoof = FakePeer(self.ports.take(), [s.address for s in others4], "flip",
                             a.interval, a.seed, claim=spoofed.address)
            spoofed.signal(signal.SIGSTOP)
            say(f"{spoofed.name} paused; a caller naming itself {spoofed.address} pushes")
            try:
                snap4 = self.peer_snapshot(others4, spoofed)
                spoof.start()
                spoof.pushing.set()
                pause(wait)
                snap5 = self.peer_snapshot(others4, spoofed)
            finally:
                spoof.stop()
                spoofed.signal(signal.SIGCONT)
            impersonation = (
                f"**A caller naming itself as another peer**: {spoofed.name} paused (SIGSTOP), "
                f"while a second fake peer, listed by no node, calls the others naming itself "
                f"{spoofed.address} and sending a sign-flipped update (its counts: "
                f"{dict(spoof.stats)}); without API keys nothing binds a caller to the address "
                "it names\n\n" + self.fault_table(
                    others4, ("before", snap4), (f"{wait:.0f} s of the impostor", snap5)))
            out.append(f"**A partition that heals**: {paused.name} paused with SIGSTOP, then "
                       f"SIGCONT (after it, its own status: rounds {ps.rounds}, merges "
                       f"{ps.merges})\n\n" + self.fault_table(
                           others, ("before", snap0), (f"{wait:.0f} s paused", snap1),
                           (f"{2 * wait:.0f} s paused", snap2),
                           (f"{wait:.0f} s after SIGCONT", snap3)))
            out.append(impersonation)
        finally:
            stop_all(nodes)
            fake.stop()
        return out

    def peer_snapshot(self, others: Sequence[Server], target: Server
                      ) -> dict[str, tuple[int, Counter[str]]]:
        return {s.name: peer_counts(self.status(s), [target.address])
                for s in others}

    @staticmethod
    def fault_table(others: Sequence[Server],
                    *snaps: tuple[str, dict[str, tuple[int, Counter[str]]]]) -> str:
        head = ["peer"] + [f"{label}: taken / refused" for label, _ in snaps]
        rows = [[s.name] + [f"{snap[s.name][0]} / {fmt_refused(snap[s.name][1])}"
                            for _, snap in snaps] for s in others]
        return table(head, rows)

    # -- part 4 ------------------------------------------------------------------------------

    def noise(self, fold: Fold) -> list[tuple[float, list[Outcome], list[pb.PolicySharingStatus],
                                              str]]:
        a, name = self.args, fold.held.name
        dirs = self.trained_alone(fold)
        rows = []
        sigmas = list(a.sigmas)
        if name not in self.honest_krum and 0.0 not in sigmas:
            sigmas.insert(0, 0.0)
        for sigma in sigmas:
            t0 = time.monotonic()
            tag = f"{name}-noise-{sigma:g}"
            nodes = self.cluster(tag, dirs, NODES, "multi-krum", noise=sigma)
            try:
                start_all(nodes)
                outs, summary, statuses = self.measured(tag, nodes, fold.held, a.rounds)
            finally:
                stop_all(nodes)
            rows.append((sigma, outs, statuses, summary))
            say(f"{name} noise {sigma:g}: {self.line(outs)}; epsilon "
                f"{max(s.epsilon for s in statuses):.3g}; {time.monotonic() - t0:.0f} s")
        return rows


def peer_counts(st: pb.PolicySharingStatus, keys: Sequence[str]) -> tuple[int, Counter[str]]:
    """Updates taken from, and refusals of, the peer known by any of ``keys``."""
    taken, refused = 0, Counter[str]()
    for p in st.peers:
        if p.peer in keys:
            taken += int(p.exchanged)
            refused.update({k: int(v) for k, v in p.refused.items()})
    return taken, refused


def fmt_refused(c: Counter[str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(c.items())) or "0"


# -- the report -------------------------------------------------------------------------------


def report_curve(per_fold: Sequence[dict[str, dict[int | None, list[Outcome]]]],
                 ks: Sequence[int | None], tol: float) -> str:
    rows, gaps = [], {"alone": None, "shared": None}
    target = fig([o for r in per_fold for o in r["all data"][None]])
    for k in ks:
        al, sh, ev = (fig([o for r in per_fold for o in r[g][k]])
                      for g in ("alone", "shared", "all data"))
        merges = "; ".join(str(r["merges"].get(k, "")) for r in per_fold)  # type: ignore[attr-defined]
        gap_a = max(abs(al[0] - target[0]), abs(al[1] - target[1]))
        gap_s = max(abs(sh[0] - target[0]), abs(sh[1] - target[1]))
        for g, gap in (("alone", gap_a), ("shared", gap_s)):
            if gaps[g] is None and gap <= tol:
                gaps[g] = "all" if k is None else str(k)  # type: ignore[assignment]
        rows.append(["all" if k is None else k, pct(al[0]), pct(al[1]), f"{gap_a:.3f}",
                     pct(sh[0]), pct(sh[1]), f"{gap_s:.3f}", pct(ev[0]), pct(ev[1]),
                     " · ".join(bandit([o for r in per_fold for o in r[g][k]])
                                for g in ("alone", "shared", "all data")), merges])
    head = ["K (turns a node)", "alone skip", "alone evidence kept", "alone gap",
            "shared skip", "shared evidence kept", "shared gap", "all-data skip (5K turns)",
            "all-data evidence kept", "bandit skips / bandit decisions (alone · shared · all)",
            "sharing nodes at the checkpoint"]
    return (table(head, rows) + "\n\ngap: the larger of |Δ skip| and |Δ evidence kept| to the "
            f"all-data policy after all turns ({pct(target[0])} / {pct(target[1])}); within "
            f"{tol}: alone from K = {gaps['alone'] or 'never'}, shared from K = "
            f"{gaps['shared'] or 'never'}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--folds", default="26", help="held-back conversations (file names), comma "
                    "separated, or 'all'")
    ap.add_argument("--part", default=",".join(PARTS), help=f"comma separated of {PARTS}")
    ap.add_argument("--attacks", default=",".join(ATTACKS), help=f"of {ATTACKS}")
    ap.add_argument("--sigmas", default="0.05,1", help="noise multipliers of part 4")
    ap.add_argument("--rounds", type=int, default=6, help="merges each node makes before "
                    "parts 2 and 4 measure it")
    ap.add_argument("--settle", type=int, default=2, help="merges each sharing node makes at "
                    "a checkpoint of part 1 before it is frozen")
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between gossip rounds")
    ap.add_argument("--fanout", type=int, default=2)
    ap.add_argument("--epsilon-budget", type=float, default=0.0)
    ap.add_argument("--vote-share", type=float, default=COST, help="share of the kept turns "
                    "no question asks about that get a NOT_HELPFUL vote (the cost c), and of "
                    "the skipped ones")
    ap.add_argument("--evidence", choices=("typical", "sum"), default="typical",
                    help="CELESTIAL_POLICY_SHARE_EVIDENCE of every sharing node")
    ap.add_argument("--no-skip-votes", action="store_true", help="no vote on a skipped turn "
                    "(its SKIP then learns only from evidence skipped)")
    ap.add_argument("--implicit", action="store_true", help="the turns' real sessions (the "
                    "server's implicit rewards from the next turn then fire)")
    ap.add_argument("--tolerance", type=float, default=0.02)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--port-base", type=int, default=50061)
    ap.add_argument("--keep", action="store_true", help="keep the data folders and logs")
    ap.add_argument("--quick", type=int, default=None, metavar="N", help="a smoke test: every "
                    "stream and the held-back conversation cut to N turns")
    args = ap.parse_args(argv)
    args.attacks = [x for x in args.attacks.split(",") if x]
    args.sigmas = [float(x) for x in args.sigmas.split(",") if x]
    parts = [p for p in args.part.split(",") if p]
    bad = [p for p in parts if p not in PARTS] + [x for x in args.attacks if x not in ATTACKS]
    if bad:
        ap.error(f"unknown: {bad}")
    convs = load(args.data)
    names = [c.name for c in convs] if args.folds == "all" else args.folds.split(",")
    folds = folds_of(convs, names, args.quick)
    args.ks = [k for k in K_VALUES if k is None or args.quick is None or k < args.quick]

    def interrupted(*_: object) -> None:
        # gRPC's blocking calls may swallow an exception raised inside them: every loop of
        # this benchmark checks STOP as well.
        if not STOP.is_set():
            STOP.set()
            raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)
    root = Path(tempfile.mkdtemp(prefix="policy-network-"))
    bench = Bench(args, root, Ports(args.port_base))
    started = time.monotonic()
    say(f"data folders and logs in {root}; {len(folds)} fold(s): {', '.join(names)}; parts "
        f"{', '.join(parts)}")
    sections: list[str] = []
    code = 0
    try:
        if "curve" in parts:
            t0 = time.monotonic()
            per_fold = [bench.curve(f) for f in folds]
            bench.timings["curve"] = time.monotonic() - t0
            sections.append("### 1. Sharing against alone and all data, by turns replayed\n\n"
                            + report_curve(per_fold, args.ks, args.tolerance))
        if "byzantine" in parts:
            t0 = time.monotonic()
            rows = [r for f in folds for r in bench.byzantine(f)]
            bench.timings["byzantine"] = time.monotonic() - t0
            sections.append(report_byzantine(rows))
        if "faults" in parts:
            t0 = time.monotonic()
            text = [t for f in folds for t in bench.faults(f)]
            bench.timings["faults"] = time.monotonic() - t0
            sections.append("### 3. Faults\n\n" + "\n\n".join(text))
        if "noise" in parts:
            t0 = time.monotonic()
            rows4 = [(f.held.name, r) for f in folds for r in bench.noise(f)]
            bench.timings["noise"] = time.monotonic() - t0
            sections.append(report_noise(rows4, bench.honest_krum))
    except (KeyboardInterrupt, Stopped):
        say("interrupted: stopping every server")
        STOP.set()
        sections.append("(interrupted: the parts above are all that ran)")
        code = 130
    finally:
        STOP.set()
        stop_all()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    cmd = " ".join(shlex.quote(x) for x in [Path(sys.executable).name, *sys.argv])
    print(f"`{cmd}`\n\n{len(folds)} fold(s), held back: {', '.join(names)}; {NODES} nodes; "
          f"gossip every {args.interval:g} s, fanout {args.fanout}; c {COST}, vote share "
          f"{args.vote_share}; implicit rewards {'on' if args.implicit else 'off'}; votes on "
          f"skipped turns {'off' if args.no_skip_votes else 'on'}; evidence {args.evidence}\n")
    print("\n\n".join(sections))
    print("\n" + ", ".join(f"{k} {v:.0f} s" for k, v in bench.timings.items())
          + f"; in all {time.monotonic() - started:.0f} s")
    return code


def report_byzantine(rows: Sequence[tuple[str, str, list[Outcome], str, Counter[str]]]) -> str:
    base: dict[str, tuple[float, float]] = {}
    by: dict[tuple[str, str], list[Outcome]] = {}
    notes: dict[tuple[str, str], list[str]] = {}
    for label, agg, outs, summary, stats in rows:
        by.setdefault((label, agg), []).extend(outs)
        notes.setdefault((label, agg), []).append(
            summary + (f"; fake: {dict(stats)}" if stats else ""))
    for (label, agg), outs in by.items():
        if label.startswith("none"):
            base[agg] = fig(outs)
    ref = base.get("multi-krum")
    out = []
    for (label, agg), outs in by.items():
        skip, ev = fig(outs)
        d = (f"{skip - ref[0]:+.3f} / {ev - ref[1]:+.3f}" if ref else "-")
        out.append([label, agg, pct(skip), pct(ev), d, bandit(outs),
                    "; ".join(notes[(label, agg)])])
    return ("### 2. One Byzantine peer of five, the four honest nodes after the rounds\n\n"
            + table(["bad peer", "aggregation", "skip", "evidence kept",
                     "Δ skip / Δ evidence vs all honest (Multi-Krum)",
                     "bandit skips / decisions", "nodes"], out))


def report_noise(rows: Sequence[tuple[str, tuple[float, list[Outcome], list[Any], str]]],
                 honest: dict[str, list[Outcome]]) -> str:
    by: dict[float, list[Outcome]] = {}
    eps: dict[float, list[str]] = {}
    for _, (sigma, outs, statuses, summary) in rows:
        by.setdefault(sigma, []).extend(outs)
        eps.setdefault(sigma, []).append(
            f"released {min(s.released for s in statuses)}-{max(s.released for s in statuses)}, "
            f"ε {min(s.epsilon for s in statuses):.3g}-{max(s.epsilon for s in statuses):.3g} "
            f"at δ {statuses[0].delta:g}; {summary}")
    if 0.0 not in by and honest:
        by[0.0] = [o for outs in honest.values() for o in outs]
        eps[0.0] = ["(part 2's all-honest run)"]
    ref = fig(by[0.0]) if 0.0 in by else None
    out = []
    for sigma in sorted(by):
        skip, ev = fig(by[sigma])
        d = f"{skip - ref[0]:+.3f} / {ev - ref[1]:+.3f}" if ref else "-"
        out.append([f"{sigma:g}", pct(skip), pct(ev), d, bandit(by[sigma]),
                    "; ".join(eps[sigma])])
    return ("### 4. Noise on the updates sent: privacy spent and what it costs\n\n"
            + table(["σ (noise multiplier)", "skip", "evidence kept", "Δ skip / Δ evidence vs σ 0",
                     "bandit skips / decisions", "epsilon after the rounds (GetPolicy)"], out))


if __name__ == "__main__":
    raise SystemExit(main())
