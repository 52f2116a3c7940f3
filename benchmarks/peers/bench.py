"""Celestial Memory beside Chroma, LangChain over Qdrant and mem0, on the same texts, queries and
embedding model, with the raw model and engine as floors: ``benchmarks/peers/run.sh`` (or
``make bench-peers``) sets up the peers' environment and runs this with the service's Python.

Each system runs in its own process, one after another, and goes through the same protocol
(harness.measure); this script prepares the data, starts the workers and prints one table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from celestial_client.cli.locomo_eval import load
from celestial_memory.config import BUNDLED_MODEL, Settings
from celestial_memory.encoding.embedding import resolve_model

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PEERS = ("celestial", "celestial-int8", "chroma", "chroma-server", "chroma-server-default-ef",
         "langchain-qdrant", "mem0")
# Run with this interpreter; the rest in the peers' venv.
SERVICE_SIDE = ("floor", "floor-onnx", "celestial", "celestial-int8")
FLOORS = ("floor", "floor-onnx")
WARMUP = 5
COPY_MARK = " (copy {n})"


def _turn(item: Any, copy: int = 0) -> dict[str, Any]:
    mark = COPY_MARK.format(n=copy) if copy else ""
    return {"text": item.content + mark, "created_at": item.created_at, "context": item.context,
            "session": int(item.metadata["session"]), "speaker": item.metadata["speaker"],
            "dia_id": item.metadata["dia_id"] + mark}


def prepare(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    files = sorted(Path(args.data).glob("*.json"))
    if not files:
        raise SystemExit(f"no LoCoMo files in {args.data}")
    convs = [load(f) for f in files]
    turns = [item for c in convs for _, items in c.sessions for item in items]
    # The latency set: every turn once, then again with a copy marker, as often as needed.
    need = args.memories + args.adds
    padded = [_turn(turns[i % len(turns)], i // len(turns)) for i in range(need)]
    questions = [q for c in convs for q, _, _ in c.questions]
    step = len(questions) / args.queries
    picked = sorted({int(i * step) for i in range(args.queries)})
    taken = set(picked)
    rest = [q for i, q in enumerate(questions) if i not in taken]
    threads = Settings().embed_threads  # 0: torch's default, as the server reads it
    evaluated = convs[: args.conversations] if args.conversations else convs
    data = {
        "model_path": resolve_model(BUNDLED_MODEL),
        "torch_threads": threads,
        "batch": args.batch,
        "conversations": [
            {"name": c.name,
             "sessions": [{"start": start, "turns": [_turn(i) for i in items]}
                          for start, items in c.sessions],
             "questions": [{"question": q, "evidence": sorted(ev), "category": cat}
                           for q, ev, cat in c.questions]}
            for c in evaluated
        ],
        "bench": padded[: args.memories],
        "adds": padded[args.memories:],
        "queries": [questions[i] for i in picked],
        "warmup": rest[:WARMUP],
    }
    (workdir / "dataset.json").write_text(json.dumps(data))
    copies = max(0, (need - 1) // len(turns))
    return {
        "model_path": data["model_path"], "torch_threads": threads, "batch": args.batch,
        "memories": args.memories, "adds": args.adds, "queries": len(picked),
        "texts": f"{len(turns)} LoCoMo turns of {len(files)} files"
                 + (f", then the same turns again with '{COPY_MARK.format(n='N')}' appended "
                    f"(N = 1..{copies})" if copies else ""),
        "query_source": f"{len(picked)} of the {len(questions)} category 1-4 questions, evenly "
                        f"spaced; {WARMUP} others to warm up",
        "evaluated": [c.name for c in evaluated],
        "questions": sum(len(c.questions) for c in evaluated),
    }


# User time only, on both sides: the kernel's own threads (writeback of the systems' files,
# for one) show as system time that no process is charged with.
def machine_user_s() -> float:
    """User CPU seconds of the whole machine since boot (/proc/stat)."""
    user, nice = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:3]
    return (int(user) + int(nice)) / os.sysconf("SC_CLK_TCK")


def children_user_s() -> float:
    """User CPU of this process's waited-for descendants (a worker and the server it started)."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime


def wait_quiet(limit: float, window: float = 5.0) -> float:
    """Wait (at most ``limit`` s) until other processes use under a tenth of a core; returns
    the seconds waited."""
    start = time.perf_counter()
    while time.perf_counter() - start < limit:
        before = machine_user_s()
        time.sleep(window)
        if machine_user_s() - before < 0.1 * window:
            break
    return time.perf_counter() - start


def run_worker(python: str, name: str, workdir: Path, timeout: float) -> dict[str, Any]:
    started = time.perf_counter()
    busy, ours = machine_user_s(), children_user_s()
    # Its own process group: whatever it started (the celestial server) goes with it.
    proc = subprocess.Popen([python, str(HERE / "worker.py"), name, str(workdir)],
                            start_new_session=True)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    out = workdir / f"result-{name}.json"
    if out.exists():
        result: dict[str, Any] = json.loads(out.read_text())
    else:
        result = {"system": name, "error": f"worker exited {proc.returncode} with no result"}
    result["wall_s"] = wall = time.perf_counter() - started
    # The machine is shared: what others used meanwhile says how far to trust the timings.
    other = (machine_user_s() - busy) - (children_user_s() - ours)
    result["other_cores"] = max(0.0, other / wall)
    return result


def _ms(s: dict[str, float] | None, floor: dict[str, float] | None = None, p90: bool = True) -> str:
    if not s:
        return "n/a"
    cell = f"{s['p50_ms']:.1f}" + (f" / {s['p90_ms']:.1f}" if p90 else "")
    if p90 and "p99_ms" in s:  # results written before p99 was kept have none
        cell += f" / {s['p99_ms']:.1f}"
    if floor:
        cell += f" (×{s['p50_ms'] / floor['p50_ms']:.1f})"
    return cell


def _mib(n: float) -> str:
    return f"{n / 2**20:.0f}"


def table(results: dict[str, dict[str, Any]], config: dict[str, Any]) -> str:
    names = list(results)
    ok = {n: r for n, r in results.items() if "error" not in r}
    fl = ok.get("floor", {})

    def row(label: str, cell: Any) -> str:
        cells = []
        for n in names:
            if n not in ok:
                cells.append("failed")
                continue
            try:
                cells.append(cell(n, ok[n]))
            except (KeyError, TypeError):
                cells.append("—")
        return f"| {label} | " + " | ".join(cells) + " |"

    def rate(n: str, r: dict[str, Any]) -> str:
        v = r["ingest"]["per_s"]
        return f"{v:.0f}" + (f" (×{v / fl['ingest']['per_s']:.2f})" if fl and n != "floor" else "")

    def rk(variant: str) -> Any:
        def cell(n: str, r: dict[str, Any]) -> str:
            v = r["recall_at_k"][variant]
            return f"{v['R@5']:.3f} / {v['R@10']:.3f}"
        return cell

    def lat(key: str, floor_key: str) -> Any:
        def cell(n: str, r: dict[str, Any]) -> str:
            if key not in r:
                return "n/a"
            return _ms(r[key], None if n == "floor" else fl.get(floor_key))
        return cell

    onnx = ok.get("floor-onnx", {})

    def against_onnx(n: str, r: dict[str, Any]) -> str:
        if n in FLOORS or not onnx:
            return "—"
        return " / ".join(f"×{r[k]['p50_ms'] / onnx[k]['p50_ms']:.2f}"
                          for k in ("text_recall", "vector_recall"))

    m = config["memories"]
    lines = [
        "| at " + f"{m:,} memories" + " | " + " | ".join(names) + " |",
        "|---" * (len(names) + 1) + "|",
        row(f"ingest, memories/s (batches of {config['batch']})", rate),
        row("index build / background work after ingest, s",
            lambda n, r: f"{r['index_s'] + r['settle_s']:.1f}"),
        row("add one memory, p50 / p90 / p99 ms", lat("add", "add")),
        row("text recall, top 10, p50 / p90 / p99 ms", lat("text_recall", "text_recall")),
        row("text recall, no reinforcement, p50 / p90 / p99 ms",
            lambda n, r: _ms(r["extra_text_recall"]["no_reinforce"], fl.get("text_recall"))),
        row("vector recall, top 10, p50 / p90 / p99 ms", lat("vector_recall", "vector_recall")),
        row("text / vector recall p50 against the ONNX hybrid floor (floor-onnx)", against_onnx),
        row("floor parts: encode one query / engine search, p50 ms",
            lambda n, r: f"{r['encode_one']['p50_ms']:.1f} / {r['search_one']['p50_ms']:.2f}"),
        row("RSS of the process holding the data, MiB (peak)",
            lambda n, r: f"{_mib(r['memory']['rss_kib'] * 1024)} "
                         f"({_mib(r['memory']['peak_rss_kib'] * 1024)})"),
        row("RSS above its model-loaded, empty start, MiB",
            lambda n, r: _mib((r["memory"]["rss_kib"] - r["baseline"]["rss_kib"]) * 1024)),
        row("data folder on disk, MiB (apparent)",
            lambda n, r: f"{_mib(r['memory']['disk_bytes'])} ({_mib(r['memory']['disk_apparent_bytes'])})"),
        row(f"LoCoMo R@5 / R@10 ({config['questions']} questions)", rk("")),
        row("LoCoMo R@5 / R@10, two previous turns as context", rk("context")),
    ]
    return "\n".join(lines)


def disk_table(results: dict[str, dict[str, Any]]) -> str:
    """The floor's and the service's data folders by part (both are Qdrant Edge folders)."""
    shown = {n: r["memory"]["disk_parts"] for n, r in results.items()
             if n in SERVICE_SIDE and "error" not in r and "disk_parts" in r.get("memory", {})}
    if not shown:
        return ""
    parts = sorted({p for d in shown.values() for p in d},
                   key=lambda p: -max(d.get(p, 0) for d in shown.values()))
    lines = ["| data folder by part, MiB (allocated) | " + " | ".join(shown) + " |",
             "|---" * (len(shown) + 1) + "|"]
    for part in parts:
        lines.append(f"| {part} | " + " | ".join(
            f"{d.get(part, 0) / 2**20:.1f}" for d in shown.values()) + " |")
    return "\n".join(lines)


def notes(results: dict[str, dict[str, Any]], config: dict[str, Any]) -> str:
    out = [
        f"Texts: {config['texts']}. Queries: {config['query_source']}. Model: {config['model_path']} "
        f"(torch threads as the service sets them: {config['torch_threads'] or 'torch default'}).",
        f"LoCoMo: conversations {', '.join(config['evaluated'])}, one collection / tenant each.",
        "Ratios (×) are to the floor column's same row; the text-recall floor is the raw encode "
        "plus the raw engine search, timed together. floor-onnx is the second floor: the "
        "service's own ONNX Runtime encoder and keyword vector, and one hybrid (dense + BM25, "
        "RRF) query of the raw engine, in-process.",
    ]
    for n, r in results.items():
        if "error" in r:
            out.append(f"{n}: FAILED: {r['error']}")
        else:
            if "index_builds" in r:
                b = r["index_builds"]
                times = "time" if b["count"] == 1 else "times"
                out.append(f"{n}: its server built the HNSW index {b['count']} {times} in the "
                           f"background ({b['seconds']:.1f} s in all, during ingest and R@k loads).")
            if "embedding_check" in r:
                c = r["embedding_check"]
                out.append(f"{n}: Chroma's DefaultEmbeddingFunction on the ONNX export of the bundled "
                           f"model, cosine to sentence-transformers at least "
                           f"{c['min_cosine_to_sentence_transformers']:.5f}; one query encoded in "
                           f"{c['default_ef_one_query']['p50_ms']:.1f} ms (p50) as it runs (a new "
                           f"ONNX Runtime session per call), "
                           f"{c['onnx_ef_kept_one_query']['p50_ms']:.1f} ms with one "
                           f"ONNXMiniLM_L6_V2 kept.")
            out.append(f"{n}: " + ", ".join(f"{k} {v}" for k, v in r["versions"].items())
                       + f"; whole run {r['wall_s']:.0f} s, other processes used "
                       f"{r['other_cores']:.2f} cores meanwhile"
                       + (" (timings disturbed)" if r["other_cores"] > 0.2 else ""))
    return "\n".join(f"- {line}" for line in out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memories", type=int, default=10_000, help="latency set size (default 10000)")
    ap.add_argument("--queries", type=int, default=200, help="timed recalls per way (default 200)")
    ap.add_argument("--adds", type=int, default=100, help="single stores timed (default 100)")
    ap.add_argument("--batch", type=int, default=1000, help="memories per ingest batch")
    ap.add_argument("--systems", default=",".join(PEERS),
                    help=f"comma-separated, of {','.join(PEERS)} (both floors always run)")
    ap.add_argument("--conversations", type=int, default=0,
                    help="evaluate R@k on the first N LoCoMo files only (default all)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 300 memories, 20 queries, 20 adds, one conversation")
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "locomo-dev"),
                    help="the LoCoMo files (default ../shared/data/locomo-dev from the repo)")
    ap.add_argument("--peers-python", default=str(HERE / ".venv" / "bin" / "python"),
                    help="interpreter of the peers' environment (run.sh passes it)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per system")
    ap.add_argument("--quiet-wait", type=float, default=300,
                    help="before each system, wait up to this long for other processes to go "
                         "quiet (default 300; 0: do not wait)")
    args = ap.parse_args()
    if args.quick:
        args.memories, args.queries, args.adds, args.conversations = 300, 20, 20, 1
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = set(systems) - set(PEERS)
    if unknown:
        ap.error(f"unknown systems: {', '.join(sorted(unknown))}")

    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
        workdir = Path(tmp)
        config = prepare(args, workdir)
        config["machine"] = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
        if subprocess.run([sys.executable, str(HERE / "worker.py"), "embed", tmp]).returncode:
            raise SystemExit("embedding the queries failed")
        for name in [*FLOORS, *systems]:
            python = sys.executable if name in SERVICE_SIDE else args.peers_python
            waited = wait_quiet(args.quiet_wait) if args.quiet_wait > 0 else 0.0
            print(f"== {name}" + (f" (waited {waited:.0f} s for a quiet machine)" if waited > 6 else ""),
                  file=sys.stderr, flush=True)
            results[name] = run_worker(python, name, workdir, args.timeout)

    text = table(results, config) + "\n\n" + disk_table(results) + "\n\n" + notes(results, config)
    print("\n" + text)
    out_dir = HERE / "results"
    out_dir.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (out_dir / f"peers-{stamp}.json").write_text(
        json.dumps({"config": config, "results": results, "table": text}, indent=1))
    (out_dir / f"peers-{stamp}.md").write_text(text + "\n")
    print(f"\nwritten: {out_dir / f'peers-{stamp}.json'}", file=sys.stderr)
    return 1 if any("error" in r for r in results.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
