"""Median Store and Recall latency through gRPC with the bundled model, 1,000 memories stored.

    make bench-latency            (or: python benchmarks/grpc_latency.py --calls 200)

The server runs in-process on its own thread and event loop over a fresh embedded store; the
client is the blocking Python client over loopback. Texts are LoCoMo turns and questions from
../shared/data/locomo-dev (synthetic sentences if that folder is absent). Both timings include
embedding the text with all-MiniLM-L6-v2 on the CPU.

Then Store latency with the model extractor on and off in the same run (``extractor_on_off``):
the Store must not wait on the model, which a scripted local server plays here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from celestial_client import CelestialClient
from celestial_memory.app import build_service
from celestial_memory.config import Settings
from celestial_memory.grpc_api.server import MemoryServer

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev"


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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=1000)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--model-stall", type=float, default=0.5,
                    help="seconds the scripted model takes a call (extractor on/off)")
    args = ap.parse_args()
    texts, questions = corpus(args.memories, args.calls)

    data_dir = Path(tempfile.mkdtemp(prefix="celestial-bench-"))
    settings = Settings(data_dir=data_dir, rebalance_interval_s=0)
    service = build_service(settings)
    loop = asyncio.new_event_loop()
    server = MemoryServer(service, "127.0.0.1:0")
    port = loop.run_until_complete(server.start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    with CelestialClient(f"127.0.0.1:{port}", tenant="bench", timeout=120) as client:
        t0 = time.perf_counter()
        client.store_batch(texts[: args.memories])
        load_s = time.perf_counter() - t0
        client.recall("warm up", limit=5)
        store_ms, recall_ms = [], []
        for i in range(args.calls):
            t = time.perf_counter()
            client.store(texts[args.memories + i])
            store_ms.append((time.perf_counter() - t) * 1000)
        for q in questions:
            t = time.perf_counter()
            client.recall(q, limit=10)
            recall_ms.append((time.perf_counter() - t) * 1000)
        total = client.stats().total

    asyncio.run_coroutine_threadsafe(server.stop(), loop).result()
    loop.call_soon_threadsafe(loop.stop)
    thread.join()
    print(f"memories stored before timing: {args.memories} (StoreBatch {load_s:.1f} s)")
    print(f"memories at the end: {total}")
    for name, xs in (("Store", store_ms), ("Recall (limit 10)", recall_ms)):
        print(
            f"{name:18s} n={len(xs)}  median {statistics.median(xs):6.1f} ms  "
            f"p90 {percentile(xs, 0.9):6.1f} ms  min {min(xs):6.1f} ms"
        )
    extractor_on_off(texts[args.memories:], args.calls, args.model_stall)
    return 0


if __name__ == "__main__":
    sys.exit(main())
