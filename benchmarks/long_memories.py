"""Long memories found by any part: each LoCoMo session stored as one memory (2,000-6,000
characters, most of it past the ~1,000 the encoder reads), then every category 1-4 question asked
as a recall of 5; a hit is a returned session that holds the question's evidence. Run once per
setting of the passages (recall/passages.py) in one sitting, so the store and recall costs
compare as ratios:

    .venv/bin/python benchmarks/long_memories.py ../shared/data/locomo-dev --conversations 26,30
    .venv/bin/python benchmarks/long_memories.py ../shared/data/locomo-dev --conversations 41,42,43

``--sizes``: passage lengths in characters, 0 = no passages (the content vector alone). Tune on
some conversations, report on the others (docs/benchmarks.md, "Long memories").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from celestial_client.cli.locomo_eval import load
from celestial_memory.app import build_service
from celestial_memory.clock import ManualClock
from celestial_memory.config import Settings
from celestial_memory.domain.requests import NewMemory, RecallQuery
from celestial_memory.encoding.choice import open_encoder
from celestial_memory.encoding.embedding import Embedder
from celestial_memory.memory.service import MemoryService
from celestial_memory.store import open_edge


@dataclass
class Result:
    hit1: list[float] = field(default_factory=list)
    recall5: list[float] = field(default_factory=list)
    store_s: float = 0.0
    chars: int = 0
    memories: int = 0
    recall_ms: list[float] = field(default_factory=list)


def _service(folder: Path, size: int, embedder: Embedder,
             start: float) -> tuple[MemoryService, ManualClock]:
    """A service on an embedded store in ``folder``, passages ``size`` wide (0: none)."""
    settings = Settings(data_dir=folder, rebalance_interval_s=0,
                        passages_over_chars=1000 if size else 0, passage_chars=size or 300)
    clock = ManualClock(start)
    return build_service(settings, embedder=embedder, clock=clock,
                         store=open_edge(folder / "edge", embedder.dimension)), clock


def run(folder: Path, conversations: list[str], size: int, embedder: Embedder) -> Result:
    out = Result()
    for name in conversations:
        conv = load(folder / f"{name}.json")
        with tempfile.TemporaryDirectory() as tmp:
            svc, clock = _service(Path(tmp), size, embedder, conv.sessions[0][0])
            try:
                for n, (start, items) in enumerate(conv.sessions, 1):
                    text = "\n".join(i.content for i in items)
                    clock.set(start + len(items))
                    began = time.perf_counter()
                    svc.store_memory("t", NewMemory(content=text, created_at=start,
                                                    metadata={"session": str(n)}))
                    out.store_s += time.perf_counter() - began
                    out.chars += len(text)
                    out.memories += 1
                clock.set(conv.sessions[-1][0] + 3600)
                for question, evidence, _ in conv.questions:
                    wanted = {e.split(":")[0].lstrip("D") for e in evidence}
                    began = time.perf_counter()
                    found = svc.recall("t", RecallQuery(query=question, limit=5, reinforce=False))
                    out.recall_ms.append((time.perf_counter() - began) * 1000)
                    sessions = [r.memory.metadata.get("session", "") for r in found]
                    out.hit1.append(float(bool(sessions) and sessions[0] in wanted))
                    out.recall5.append(len(wanted & set(sessions)) / len(wanted))
            finally:
                svc.close()
        print(f"  size {size}: {name} done", file=sys.stderr, flush=True)
    return out


def mixed(folder: Path, pairs: list[tuple[str, str]], size: int,
          embedder: Embedder) -> tuple[float, float]:
    """Short memories with long ones beside them: the turns of one conversation stored as
    ``celestial eval locomo`` stores them, the sessions of another as long memories, and the
    first one's questions asked (limit 5). Returns the turns' evidence recall@5 and the share of
    results that are long memories (none of which holds an answer)."""
    recall: list[float] = []
    long_share: list[float] = []
    for short_name, long_name in pairs:
        conv, other = load(folder / f"{short_name}.json"), load(folder / f"{long_name}.json")
        with tempfile.TemporaryDirectory() as tmp:
            svc, clock = _service(Path(tmp), size, embedder, conv.sessions[0][0])
            try:
                svc.store_many("t", [NewMemory(
                    content="\n".join(i.content for i in items), created_at=start,
                    metadata={"long": "1"}) for start, items in other.sessions])
                for start, items in conv.sessions:
                    clock.set(start + len(items))
                    svc.store_many("t", [NewMemory(
                        content=i.content, context=i.context, created_at=float(i.created_at or start),
                        metadata=dict(i.metadata)) for i in items])
                clock.set(conv.sessions[-1][0] + 3600)
                for question, evidence, _ in conv.questions:
                    found = svc.recall("t", RecallQuery(query=question, limit=5, reinforce=False))
                    got = {r.memory.metadata.get("dia_id", "") for r in found}
                    recall.append(len(evidence & got) / len(evidence))
                    long_share.append(sum(r.memory.metadata.get("long") == "1" for r in found)
                                      / 5)
            finally:
                svc.close()
        print(f"  mixed, size {size}: {short_name} beside {long_name} done", file=sys.stderr,
              flush=True)
    return statistics.mean(recall), statistics.mean(long_share)


def cost(folder: Path, embedder: Embedder, rounds: int) -> None:
    """Store and recall cost, one sitting: 20,000-character memories (LoCoMo sessions joined)
    stored with and without passages, alternating; then text recalls over a conversation's
    turns alone and with those long memories beside them."""
    conv = load(folder / "26.json")
    text = "\n".join(i.content for _, items in conv.sessions for i in items)
    longs = [text[k:k + 20_000] for k in range(0, len(text) - 20_000, 20_000)][:rounds]
    with tempfile.TemporaryDirectory() as tmp:
        services = {}
        for size in (0, 300):
            settings = Settings(data_dir=Path(tmp) / str(size), rebalance_interval_s=0,
                                passages_over_chars=1000 if size else 0)
            services[size] = build_service(
                settings, embedder=embedder, clock=ManualClock(conv.sessions[-1][0]),
                store=open_edge(Path(tmp) / str(size) / "edge", embedder.dimension))
        try:
            for svc in services.values():  # the same short turns in both
                for _, items in conv.sessions:
                    svc.store_many("t", [NewMemory(content=i.content, context=i.context)
                                         for i in items])
            questions = [q for q, _, _ in conv.questions][:100]

            def recall_ms() -> dict[int, float]:
                """p50 of each service, the calls alternating (twice through the questions)."""
                times: dict[int, list[float]] = {0: [], 300: []}
                for q in questions * 2:
                    for size, svc in services.items():
                        began = time.perf_counter()
                        svc.recall("t", RecallQuery(query=q, limit=10, reinforce=False))
                        times[size].append((time.perf_counter() - began) * 1000)
                return {size: statistics.median(t) for size, t in times.items()}

            before = recall_ms()
            stored: dict[int, list[float]] = {0: [], 300: []}
            for t in longs:
                for size, svc in services.items():
                    began = time.perf_counter()
                    svc.store_memory("t", NewMemory(content=t))
                    stored[size].append((time.perf_counter() - began) * 1000)
            after = recall_ms()
        finally:
            for svc in services.values():
                svc.close()
    none, some = statistics.median(stored[0]), statistics.median(stored[300])
    print(f"store of a 20,000-character memory, median of {len(longs)}: {none:.0f} ms without "
          f"passages, {some:.0f} ms with ({some / none:.1f}×)")
    print(f"text recall p50 over {len(questions)} questions, short turns only: "
          f"{before[0]:.1f} ms with passages off, {before[300]:.1f} ms on "
          f"({before[300] / before[0]:.2f}×); with {len(longs)} long memories beside them: "
          f"{after[0]:.1f} ms off, {after[300]:.1f} ms on ({after[300] / after[0]:.2f}×)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="the LoCoMo files (<name>.json)")
    ap.add_argument("--conversations", default="26,30", help="file names, comma-separated")
    ap.add_argument("--sizes", default="0,200,300,500",
                    help="passage lengths in characters; 0 = no passages")
    ap.add_argument("--mixed", metavar="SHORT:LONG,...",
                    help="instead: each SHORT conversation's turns beside LONG's sessions")
    ap.add_argument("--cost", action="store_true",
                    help="instead: the store and recall cost of 20,000-character memories")
    args = ap.parse_args()
    embedder = open_encoder(Settings())
    if args.cost:
        cost(args.folder, embedder, 8)
        return
    if args.mixed:
        pairs = [(a, b) for a, b in (p.split(":") for p in args.mixed.split(","))]
        print("| passages | turns' evidence recall@5 | long memories among the 5 |")
        print("|---|---|---|")
        for size in (int(s) for s in args.sizes.split(",")):
            r5, share = mixed(args.folder, pairs, size, embedder)
            print(f"| {'none' if size == 0 else f'{size} chars'} | {r5:.3f} | {share:.3f} |")
        return
    conversations = args.conversations.split(",")
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        r = run(args.folder, conversations, size, embedder)
        rows.append((size, r))
    base = next((r for s, r in rows if s == 0), rows[0][1])
    print(f"conversations {args.conversations}: {len(base.hit1)} questions, {base.memories} "
          f"memories (one a session, {base.chars / base.memories:,.0f} characters on average)")
    print("| passages | hit@1 | recall@5 | store s/1,000 chars (× none) | recall p50 ms (× none) |")
    print("|---|---|---|---|---|")
    for size, r in rows:
        store = r.store_s / r.chars * 1000
        p50 = statistics.median(r.recall_ms)
        print(f"| {'none' if size == 0 else f'{size} chars'} | {statistics.mean(r.hit1):.3f} | "
              f"{statistics.mean(r.recall5):.3f} | {store:.3f} "
              f"({store / (base.store_s / base.chars * 1000):.1f}×) | {p50:.1f} "
              f"({p50 / statistics.median(base.recall_ms):.2f}×) |")


if __name__ == "__main__":
    main()
