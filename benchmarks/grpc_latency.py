"""Median Store and Recall latency through gRPC with the bundled model, 1,000 memories stored,
for each encoder (ONNX Runtime and torch) in the same run; or, with ``--rankers``, for each
order of a recall (CELESTIAL_RANKER) on one encoder in the same run.

    make bench-latency            (or: python benchmarks/grpc_latency.py --calls 200)
    make bench-latency RANKERS=learned,weights     (learned / weights: the ranker's cost)

One server per encoder runs in-process on its own thread and event loop over a fresh embedded
store; the client is the blocking Python client over loopback. The calls alternate between the
servers, and which goes first alternates from one call to the next (ABBA), so drift on the noisy
machine falls on both alike. Texts are LoCoMo turns and questions
from ../shared/data/locomo-dev (synthetic sentences if that folder is absent). Both timings
include embedding the text with all-MiniLM-L6-v2 on the CPU. Then a recall's stages, by
encoder: the raw encode of the question, the same through the micro-batcher, the service's
recall in-process and through gRPC, interleaved question by question.

Last, Store latency with the model extractor on and off in the same run
(``extractor_on_off``): the Store must not wait on the model, which a scripted local server
plays here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from celestial_client import CelestialClient
from celestial_client.v1 import memory_pb2 as pb
from celestial_memory.api.grpc import converters as cv
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.app import build_service
from celestial_memory.config import Settings
from celestial_memory.domain.requests import RecallQuery
from celestial_memory.memory.service import MemoryService
from celestial_memory.observability import metrics

# LOCOMO in the environment points elsewhere (a git worktree has no ../shared beside it).
LOCOMO = Path(os.environ.get(
    "LOCOMO", Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev"))
# The exported ONNX file is kept between runs (an export takes seconds).
ONNX_CACHE = Path(tempfile.gettempdir()) / "celestial-bench-encoders"


def corpus(n: int, queries: int) -> tuple[list[str], list[str]]:
    turns: list[str] = []
    questions: list[str] = []
    for f in sorted(LOCOMO.glob("*.json")):
        data = json.loads(f.read_text())
        conv = data.get("conversation", data)
        for key in sorted(k for k in conv if k.startswith("session_") and k[8:].isdigit()):
            turns += [f"{t['speaker']}: {t['text']}" for t in conv[key]]
        questions += [q["question"] for q in data.get("qa", []) if q.get("category") != 5]
    if len(turns) < n + queries or len(questions) < queries:
        turns = [f"memory number {i} about topic {i % 37}" for i in range(n + queries)]
        questions = [f"what about topic {i % 37}?" for i in range(queries)]
    return turns[: n + queries], questions[:queries]


def percentile(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * len(s)))]


class Running:
    """A server on its own thread and event loop over a fresh embedded store."""

    def __init__(self, **settings: object) -> None:
        self.data_dir = Path(tempfile.mkdtemp(prefix="celestial-bench-"))
        service = build_service(Settings(data_dir=self.data_dir, rebalance_interval_s=0,
                                         **settings))  # type: ignore[arg-type]
        self.loop = asyncio.new_event_loop()
        self.server = MemoryServer(service, "127.0.0.1:0")
        self.port = self.loop.run_until_complete(self.server.start())
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()


def facts(body: dict[str, object]) -> str:
    """The scripted model's answer: one entity and one triple per memory."""
    messages = body["messages"]
    assert isinstance(messages, list)
    lines = str(messages[1]["content"]).splitlines()
    return json.dumps({"memories": [
        {"n": i, "entities": [{"name": "Someone", "kind": "person"}],
         "triples": [["Someone", "said", line[:30]]]} for i, line in enumerate(lines, 1)]})


def extractor_on_off(texts: list[str], calls: int, stall_s: float) -> None:
    """Store latency with the model extractor on (a scripted local model that takes
    ``stall_s`` a call, so the queue is busy throughout) and off, in one run: two servers, the
    same texts, calls alternating between them (which goes first alternates too)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.scripted_model import ScriptedModel

    model = ScriptedModel(facts)
    model.stall_s = stall_s
    off = Running()
    on = Running(extractor="llm", llm_base_url=model.url, llm_model="scripted",
                 understand_poll_s=0.05, understand_batch=4)
    times: dict[str, list[float]] = {"off": [], "on": []}
    try:
        with CelestialClient(f"127.0.0.1:{off.port}", tenant="bench", timeout=120) as a, \
                CelestialClient(f"127.0.0.1:{on.port}", tenant="bench", timeout=120) as b:
            a.store("warm up")
            b.store("warm up")
            for i, text in enumerate(texts[:calls]):
                order = [("off", a), ("on", b)] if i % 2 == 0 else [("on", b), ("off", a)]
                for name, client in order:
                    t = time.perf_counter()
                    client.store(text)
                    times[name].append((time.perf_counter() - t) * 1000)
            understood = sum(m.understanding == "done" for m in b.iter_memories())
    finally:
        on.stop()
        off.stop()
        model.close()
    p50 = {k: statistics.median(v) for k, v in times.items()}
    for name in ("off", "on"):
        xs = times[name]
        print(f"Store, extractor {name:3s} n={len(xs)}  median {p50[name]:6.1f} ms  "
              f"p90 {percentile(xs, 0.9):6.1f} ms")
    print(f"Store p50 extractor on/off {p50['on'] / p50['off']:.3f} (model calls: "
          f"{len(model.requests)}, {stall_s:.1f} s each; memories understood by the end: "
          f"{understood} of {calls + 1})")


@dataclass
class Served:
    encoder: str  # its name in the output: the encoder, and the ranker when one is given
    service: MemoryService
    server: MemoryServer
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread
    client: CelestialClient

    def stop(self) -> None:
        self.client.close()
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()


def encoder_settings(encoder: str) -> tuple[str, bool, int]:
    """``onnx``, ``onnx-int8`` or ``torch``, optionally ``:threads``, as the settings
    embed_backend, embed_int8 and embed_threads."""
    kind, _, threads = encoder.partition(":")
    int8 = kind == "onnx-int8"
    return ("onnx" if int8 else kind), int8, int(threads or 0)


def serve(encoder: str, ranker: str = "") -> Served:
    """A server whose encoder is ``onnx``, ``onnx-int8`` (the model's int8 copy) or ``torch``,
    optionally with threads: ``torch:1``; ``ranker``: its CELESTIAL_RANKER (empty: the default)."""
    data_dir = Path(tempfile.mkdtemp(prefix="celestial-bench-"))
    backend, int8, threads = encoder_settings(encoder)
    settings = Settings(data_dir=data_dir, rebalance_interval_s=0, embed_backend=backend,
                        embed_int8=int8, embed_threads=threads, embed_onnx_dir=ONNX_CACHE,
                        **({"ranker": ranker} if ranker else {}))  # type: ignore[arg-type]
    service = build_service(settings)
    loop = asyncio.new_event_loop()
    server = MemoryServer(service, "127.0.0.1:0")
    port = loop.run_until_complete(server.start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    client = CelestialClient(f"127.0.0.1:{port}", tenant="bench", timeout=120)
    return Served(f"{encoder} {ranker}".strip(), service, server, loop, thread, client)


def turns(servers: list[Served], i: int) -> list[Served]:
    """The servers in the order of call ``i``: as given, then reversed, by turns (ABBA)."""
    return servers if i % 2 == 0 else servers[::-1]


def timed(fn: Callable[[], Any]) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1000


def line(name: str, xs: list[float]) -> str:
    return (f"{name:34s} n={len(xs)}  median {statistics.median(xs):6.2f} ms  "
            f"p90 {percentile(xs, 0.9):6.2f} ms  min {min(xs):6.2f} ms")


def stages(servers: list[Served], questions: list[str]) -> dict[str, dict[str, list[float]]]:
    """A recall's parts, question by question, every way and encoder in turn."""
    out: dict[str, dict[str, list[float]]] = {s.encoder: {} for s in servers}
    for i, q in enumerate(questions):
        for s in turns(servers, i):
            batcher: Any = s.service.embedder
            ways: dict[str, Callable[[], Any]] = {
                "raw encode": lambda b=batcher, q=q: b.inner.embed([q]),
                "encode through the micro-batcher": lambda b=batcher, q=q: b.embed([q]),
                "recall in-process, not reinforced": lambda s=s, q=q: s.service.recall(
                    "bench", RecallQuery(query=q, limit=10, reinforce=False)),
                "recall through gRPC, not reinforced": lambda s=s, q=q: s.client.recall(
                    q, limit=10, reinforce=False),
            }
            for name, fn in ways.items():
                out[s.encoder].setdefault(name, []).append(timed(fn))
    return out


def stage_seconds() -> dict[str, float]:
    """The recall stages' total seconds so far (the service's own histogram)."""
    return {smp.labels["stage"]: smp.value for m in metrics.RECALL_STAGE.collect()
            for smp in m.samples if smp.name.endswith("_sum")}


def stage_table(s: Served, questions: list[str]) -> None:
    """Where a recall's time goes, stage by stage, in milliseconds per recall (mean): the
    service's own stages (encode, keywords, entities, candidates, rescoring, ranking (the
    learned ranker's read, features and model), payloads, reinforcement), what the rest of the
    in-process call costs, the protobuf conversion, and what gRPC adds (its p50 over the
    in-process p50, less the conversion). In-process and gRPC recalls alternate question by
    question; the stages are read around the in-process ones."""
    n = len(questions)
    inproc, results, grpc_ms = [], [], []
    spent = {k: 0.0 for k in stage_seconds()}
    for q in questions:  # in-process and through gRPC by turns, so drift falls on both
        before = stage_seconds()
        t = time.perf_counter()
        results.append(s.service.recall("bench", RecallQuery(query=q, limit=10)))
        inproc.append((time.perf_counter() - t) * 1000)
        after = stage_seconds()
        for k, v in after.items():
            spent[k] = spent.get(k, 0.0) + v - before.get(k, 0.0)
        grpc_ms.append(timed(lambda q=q: s.client.recall(q, limit=10)))
    service = s.service

    def convert(rs: list[Any]) -> None:
        pb_results = [cv.recall_result_to_pb(r, service.breakdown(r.memory),
                                             service.next_move(r.memory)) for r in rs]
        pb.RecallResponse(results=pb_results).SerializeToString()

    conversion = [timed(lambda rs=rs: convert(rs)) for rs in results]
    stages_ms = {k: v * 1000 / n for k, v in spent.items()}
    own = sum(stages_ms.values())
    rows = [*[(f"  {k}", v) for k, v in sorted(stages_ms.items(), key=lambda kv: -kv[1])],
            ("  the rest of the call", statistics.mean(inproc) - own),
            ("recall in-process (mean)", statistics.mean(inproc)),
            ("recall in-process (p50)", statistics.median(inproc)),
            ("protobuf conversion", statistics.mean(conversion)),
            ("transport (gRPC p50 - in-process p50 - conversion)",
             statistics.median(grpc_ms) - statistics.median(inproc) - statistics.median(conversion)),
            ("recall through gRPC (p50)", statistics.median(grpc_ms)),
            ("recall through gRPC (p99)", percentile(grpc_ms, 0.99))]
    print(f"\nencoder {s.encoder}: a recall's stages, ms per recall ({n} questions, limit 10, "
          "reinforced)")
    for name, ms in rows:
        print(f"  {name:52s} {ms:7.3f}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=1000)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--encoders", default="onnx,torch",
                    help="of: onnx, torch, each optionally :threads (torch's are process-wide)")
    ap.add_argument("--model-stall", type=float, default=0.5,
                    help="seconds the scripted model takes a call (extractor on/off)")
    ap.add_argument("--no-extractor", action="store_true",
                    help="skip the Store latency with the model extractor on and off")
    ap.add_argument("--rankers", default="",
                    help="of: learned, weights; a server per ranker on the first encoder (the "
                         "last is the base of the ratios): e.g. learned,weights")
    args = ap.parse_args()
    texts, questions = corpus(args.memories, args.calls)
    encoders = args.encoders.split(",")
    servers = ([serve(encoders[0], r) for r in args.rankers.split(",")] if args.rankers
               else [serve(e) for e in encoders])
    store_ms: dict[str, list[float]] = {s.encoder: [] for s in servers}
    recall_ms: dict[str, list[float]] = {s.encoder: [] for s in servers}
    for s in servers:
        t0 = time.perf_counter()
        s.client.store_batch(texts[: args.memories])
        print(f"{s.encoder}: StoreBatch of {args.memories} in {time.perf_counter() - t0:.1f} s")
        s.client.recall("warm up", limit=5)
    for i in range(args.calls):
        for s in turns(servers, i):
            text = texts[args.memories + i]
            store_ms[s.encoder].append(timed(lambda s=s, t=text: s.client.store(t)))
    for i, q in enumerate(questions):
        for s in turns(servers, i):
            recall_ms[s.encoder].append(timed(lambda s=s, q=q: s.client.recall(q, limit=10)))
    parts = stages(servers, questions)
    for s in servers:
        stage_table(s, questions)
    for s in servers:
        print(f"\nencoder {s.encoder}: memories at the end {s.client.stats().total}")
        print(line("Store", store_ms[s.encoder]))
        print(line("Recall (limit 10)", recall_ms[s.encoder]))
        for name, xs in parts[s.encoder].items():
            print(line(name, xs))
    b = servers[-1].encoder
    for a in [s.encoder for s in servers[:-1]]:
        print(f"\nmedian ratios {a} / {b}:")
        for name, mine, theirs in [("Store", store_ms[a], store_ms[b]),
                                   ("Recall", recall_ms[a], recall_ms[b]),
                                   *[(n, parts[a][n], parts[b][n]) for n in parts[a]]]:
            print(f"  {name:34s} {statistics.median(mine) / statistics.median(theirs):.2f}")
    for s in servers:
        s.stop()
    if not args.no_extractor:
        print()
        extractor_on_off(texts[args.memories:], args.calls, args.model_stall)
    return 0


if __name__ == "__main__":
    sys.exit(main())
