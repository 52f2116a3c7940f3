"""What the turn policy costs a turn: Observe against Store through gRPC, on one server, in
the same run.

    make bench-observe            (or: python benchmarks/observe_latency.py --memories 10000)

One server (the ONNX encoder, the default ranker) over a fresh embedded store; two tenants
each hold the same ``--memories`` memories (synthetic texts with random unit vectors, stored
with StoreBatch: nothing to encode, so the fill takes seconds). Then each LoCoMo turn (from
../shared/data/locomo-dev, speaker as the role) is stored in one tenant and observed in the
other, which goes first alternating from one turn to the next (ABBA), so drift on a noisy
machine falls on both. Observe's timings are grouped by its decision: a SAVE against the
Store of the same turn (the median of the pairs' differences), a SKIP (written into the
archive), a RETRIEVE (answers a context block). Last, a dry run of each turn: the decision
alone, by what took it: the rules alone answer without encoding the turn; the bandit needs it
encoded and its novelty searched.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict

import numpy as np
from celestial_client import CelestialClient
from celestial_client.types import StoreItem
from grpc_latency import LOCOMO, line, serve, timed


def locomo_turns(n: int) -> list[tuple[str, str]]:
    """(speaker, "speaker: text") of the first ``n`` LoCoMo turns, in order."""
    out: list[tuple[str, str]] = []
    for f in sorted(LOCOMO.glob("*.json")):
        data = json.loads(f.read_text())
        for key in sorted((k for k in data if k.startswith("session_") and k[8:].isdigit()),
                          key=lambda k: int(k[8:])):
            out += [(t["speaker"], f"{t['speaker']}: {t['text']}") for t in data[key]]
    if not out:
        out = [("user", f"turn {i} about topic {i % 37}") for i in range(n)]
    return out[:n]


def fill(n: int, dim: int, seed: int = 7) -> list[StoreItem]:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, dim)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return [StoreItem(content=f"memory number {i} about topic {i % 37}", vector=v[i].tolist(),
                      request_id=f"fill-{i}") for i in range(n)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--calls", type=int, default=300)
    args = ap.parse_args()
    s = serve("onnx")
    store = s.client
    observe = CelestialClient(f"127.0.0.1:{s.server.port}", tenant="observed", timeout=120)
    try:
        items = fill(args.memories, s.service.embedder.dimension)
        t0 = time.perf_counter()
        for tenant_client in (store, observe):
            for i in range(0, len(items), 1000):
                tenant_client.store_batch(items[i:i + 1000])
        print(f"two tenants of {args.memories:,} memories in {time.perf_counter() - t0:.1f} s")
        store.recall("warm up", limit=5)
        observe.observe("warm up", dry_run=True)
        by_action: dict[str, list[float]] = defaultdict(list)
        save_pairs: list[tuple[float, float]] = []
        store_ms: list[float] = []
        turns = locomo_turns(args.calls)
        for i, (speaker, text) in enumerate(turns):
            got: dict[str, object] = {}

            def do_store(text: str = text) -> None:
                store.store(text, session_id="bench")

            def do_observe(text: str = text, speaker: str = speaker,
                           got: dict[str, object] = got) -> None:
                got["o"] = observe.observe(text, session_id="bench", role=speaker)

            order = [do_store, do_observe] if i % 2 == 0 else [do_observe, do_store]
            ms = {f.__name__: timed(f) for f in order}
            store_ms.append(ms["do_store"])
            action = got["o"].decision.action  # type: ignore[attr-defined]
            by_action[action].append(ms["do_observe"])
            if action == "SAVE":
                save_pairs.append((ms["do_observe"], ms["do_store"]))
        dry: list[float] = []
        dry_by: dict[str, list[float]] = defaultdict(list)
        for speaker, text in turns:
            seen: dict[str, object] = {}

            def do_dry(text: str = text, speaker: str = speaker,
                       seen: dict[str, object] = seen) -> None:
                seen["o"] = observe.observe(text, role=speaker, dry_run=True)

            dry.append(timed(do_dry))
            d = seen["o"].decision  # type: ignore[attr-defined]
            # The rules alone decide without encoding the turn; the bandit needs its novelty.
            by = "the bandit" if d.trace.phase == 2 or d.trace.keep_by == "bandit" else "the rules"
            dry_by[f"{d.action} by {by}"].append(dry[-1])
        print(line("Store", store_ms))
        for action, xs in sorted(by_action.items()):
            print(line(f"Observe, decided {action}", xs))
        print(line("Observe, dry run (the decision)", dry))
        for kind, xs in sorted(dry_by.items()):
            print(line(f"  dry run, {kind}", xs))
        if save_pairs:
            diffs = [o - st for o, st in save_pairs]
            ratio = (statistics.median(o for o, _ in save_pairs)
                     / statistics.median(st for _, st in save_pairs))
            print(f"\nSAVE through Observe over the Store of the same turn: median "
                  f"{statistics.median(diffs):+.2f} ms over {len(diffs)} pairs "
                  f"(ratio of medians {ratio:.2f})")
    finally:
        observe.close()
        s.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
