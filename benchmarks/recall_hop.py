"""A recall's own work beside the bare gRPC hop, measured from another process.

    make bench-hop        (or: python benchmarks/recall_hop.py [--memories 2000] [--calls 1000])
    python benchmarks/recall_hop.py --base /tmp/base     (another checkout's server beside)
    python benchmarks/recall_hop.py --text --base /tmp/base      (text recalls: the encoder too)

The service runs as ``celestial serve`` would (its own process, its defaults, the embedded
store, the ONNX encoder) over ``--memories`` LoCoMo turns stored with synthetic vectors around
100 centres, so that a vector recall near a centre has 20 good matches and returns ``limit``
(10). Beside it a bare ``grpc.aio`` server, in a process of its own, answers every Recall with
the RecallResponse the service gave for the first query (the same memories, the same bytes)
and every health Check with SERVING: no more than gRPC and protobuf can do. This process is the
client: one call at a time, over one channel per server, the same request for every way of a
round, and the ways' order rotated from round to round so that drift on the noisy machine falls
on all alike. Ways: Recall from the bare server, the service's vector recall reinforced (the
default) and not reinforced, and health Check from each. ``--base CHECKOUT`` starts a second
service from that checkout's server/ and client/ over the same memories, interleaved with the
rest: a change's effect as a ratio measured in one run. ``--text``: the turns are stored as
text (the service embeds them) and every recall asks a LoCoMo question as text, so the encoder,
the keyword signals and the learned ranker are on the path too.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
import numpy as np
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

TENANT = "hop"
DIM = 384
SERVICE = pb.DESCRIPTOR.services_by_name["MemoryService"].full_name


async def serve_bare(answer_file: str) -> None:
    """The bare server: prints its port, answers until its stdin closes."""
    answer = pb.RecallResponse.FromString(Path(answer_file).read_bytes())

    async def recall(request: pb.RecallRequest, context: object) -> pb.RecallResponse:
        return answer

    server = grpc.aio.server()
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {
        "Recall": grpc.unary_unary_rpc_method_handler(
            recall, request_deserializer=pb.RecallRequest.FromString,
            response_serializer=pb.RecallResponse.SerializeToString)}),))
    health_pb2_grpc.add_HealthServicer_to_server(
        health.aio.HealthServicer(), server)  # type: ignore[attr-defined]
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(port, flush=True)
    await asyncio.to_thread(sys.stdin.read)
    await server.stop(0)


def start_bare(answer: bytes, workdir: Path) -> tuple[subprocess.Popen[str], str]:
    path = workdir / "answer.bin"
    path.write_bytes(answer)
    proc = subprocess.Popen([sys.executable, __file__, "--serve-bare", str(path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, f"127.0.0.1:{proc.stdout.readline().strip()}"


def vectors(n: int, centres: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    # Noise of norm 0.8: a memory's cosine to its centre is about 0.78, to a query near it 0.6.
    v = centres[rng.integers(0, len(centres), n)] + 0.8 / np.sqrt(DIM) * rng.standard_normal(
        (n, DIM))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


async def preload(address: str, texts: list[str], vecs: np.ndarray | None) -> None:
    from celestial_client import AsyncCelestialClient, StoreItem

    async with AsyncCelestialClient(address, tenant=TENANT, timeout=300) as c:
        for i in range(0, len(texts), 500):
            await c.store_batch([StoreItem(t, vector=None if vecs is None else vecs[i + j].tolist())
                                 for j, t in enumerate(texts[i:i + 500])])


def p(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process, all its threads (Linux; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure(targets: dict[str, str], requests: list[pb.RecallRequest],
                  pids: dict[str, int]) -> None:
    channels = {name: grpc.aio.insecure_channel(a) for name, a in targets.items()}
    recall = {n: pb_grpc.MemoryServiceStub(c).Recall for n, c in channels.items()}
    check = {n: health_pb2_grpc.HealthStub(c).Check for n, c in channels.items()}
    ways: dict[str, Callable[[pb.RecallRequest], Awaitable[object]]] = {}
    for name in targets:
        if name == "bare":
            ways["Recall, bare grpc.aio server"] = recall[name]
        else:
            ways[f"Recall, {name}, reinforced"] = recall[name]
            ways[f"Recall, {name}, not reinforced"] = (
                lambda r, f=recall[name]: f(pb.RecallRequest(
                    tenant=r.tenant, query=r.query, query_vector=r.query_vector, limit=r.limit,
                    no_reinforce=True)))
        ways[f"Check, {name}"] = lambda r, f=check[name]: f(health_pb2.HealthCheckRequest())
    ms: dict[str, list[float]] = {w: [] for w in ways}
    returned: dict[str, list[int]] = {w: [] for w in ways}
    names = list(ways)
    cpu: dict[str, float] = {}
    for i, req in enumerate(requests):
        if i == 20:
            cpu = {n: cpu_seconds(pid) for n, pid in pids.items()}
        k = i % len(names)
        for w in names[k:] + names[:k]:
            t = time.perf_counter()
            got = await ways[w](req)
            if i >= 20:  # the first rounds warm the channels
                ms[w].append((time.perf_counter() - t) * 1000)
                if isinstance(got, pb.RecallResponse):
                    returned[w].append(len(got.results))
    cpu = {n: cpu_seconds(pid) - cpu[n] for n, pid in pids.items()}
    for c in channels.values():
        await c.close()
    bare = {"Recall": statistics.median(ms["Recall, bare grpc.aio server"]),
            "Check": statistics.median(ms["Check, bare"])}
    print(f"\n{len(requests) - 20} calls each, interleaved; ratios to the bare server's p50")
    print(f"  {'way':40s} {'p50 ms':>7s} {'p99 ms':>7s} {'× bare':>7s} {'results':>8s}")
    for w, xs in ms.items():
        got = f"{statistics.mean(returned[w]):8.1f}" if returned[w] else ""
        print(f"  {w:40s} {statistics.median(xs):7.3f} {p(xs, 0.99):7.3f} "
              f"{statistics.median(xs) / bare[w.split(',')[0]]:7.2f} {got}")
    # Less noisy than latency on a loaded machine: what each server's process (every thread,
    # background work included) spent per round: two recalls and a Check, the bare one one of each.
    rounds = len(requests) - 20
    if any(cpu.values()):
        print("  server CPU ms per round: " + ", ".join(
            f"{n} {cpu[n] * 1000 / rounds:.2f}" for n in pids))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=2000)
    ap.add_argument("--calls", type=int, default=1000, help="rounds: each way once a round")
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--base", default="", help="also a service from this checkout, beside")
    ap.add_argument("--text", action="store_true", help="text recalls over texts embedded")
    ap.add_argument("--serve-bare", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_bare:
        asyncio.run(serve_bare(args.serve_bare))
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from load import corpus, start_server

    rng = np.random.default_rng(5)
    centres = rng.standard_normal((100, DIM))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    texts, questions = corpus(args.memories, args.calls + 20 if args.text else 0)
    texts = texts[:args.memories]
    vecs = vectors(args.memories, centres, rng)
    requests = ([pb.RecallRequest(tenant=TENANT, query=q, limit=args.limit) for q in questions]
                if args.text else
                [pb.RecallRequest(tenant=TENANT, query_vector=q.tolist(), limit=args.limit)
                 for q in vectors(args.calls + 20, centres, rng)])
    checkouts = {"service": "", **({"base": args.base} if args.base else {})}
    procs: list[subprocess.Popen[bytes] | subprocess.Popen[str]] = []
    targets: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for name, checkout in checkouts.items():
                proc, targets[name] = start_server("edge", f"{tmp}/{name}", checkout, "onnx")
                procs.append(proc)
                asyncio.run(preload(targets[name], texts, None if args.text else vecs))
            with grpc.insecure_channel(targets["service"]) as ch:
                first = pb.RecallRequest()
                first.CopyFrom(requests[0])
                first.no_reinforce = True
                answer = pb_grpc.MemoryServiceStub(ch).Recall(first)
            print(f"{args.memories:,} memories; the bare server's answer: "
                  f"{len(answer.results)} memories, {answer.ByteSize():,} bytes")
            bare, targets["bare"] = start_bare(answer.SerializeToString(), Path(tmp))
            procs.append(bare)
            asyncio.run(measure(targets, requests,
                                {n: proc.pid for n, proc in zip(targets, procs, strict=True)}))
        finally:
            for proc in procs:
                if proc.stdin is not None:
                    proc.stdin.close()
                proc.terminate()
                proc.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
