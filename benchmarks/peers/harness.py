"""The measurement protocol every system goes through, and the dataset the orchestrator hands over.

Standard library only: this module is imported by workers in two virtual environments (the
service's and the peers'), which share no third-party package versions.
"""

from __future__ import annotations

import json
import math
import os
import socket
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")
K = 10  # every recall asks for the top 10; R@5 is read off its first five
WARMUP_INGEST = 10


@dataclass(frozen=True)
class Turn:
    text: str
    created_at: float
    context: str
    session: int
    speaker: str
    dia_id: str

    def metadata(self) -> dict[str, str]:
        return {"speaker": self.speaker, "session": str(self.session), "dia_id": self.dia_id}


@dataclass(frozen=True)
class Question:
    question: str
    evidence: frozenset[str]
    category: int


@dataclass(frozen=True)
class Conversation:
    name: str
    sessions: list[tuple[float, list[Turn]]]  # (session start, its turns)
    questions: list[Question]

    def turns(self) -> list[Turn]:
        return [t for _, turns in self.sessions for t in turns]


@dataclass(frozen=True)
class Dataset:
    model_path: str
    torch_threads: int
    batch: int
    conversations: list[Conversation]
    bench: list[Turn]  # the latency set, ingested in batches
    adds: list[Turn]  # stored one at a time afterwards
    queries: list[str]
    query_vectors: list[list[float]]
    warmup: list[str]
    warmup_vectors: list[list[float]]

    @staticmethod
    def load(path: Path) -> Dataset:
        d = json.loads(path.read_text())
        vectors = json.loads((path.parent / "vectors.json").read_text())

        def turns(xs: list[dict[str, Any]]) -> list[Turn]:
            return [Turn(**x) for x in xs]

        convs = [
            Conversation(
                c["name"],
                [(s["start"], turns(s["turns"])) for s in c["sessions"]],
                [Question(q["question"], frozenset(q["evidence"]), q["category"])
                 for q in c["questions"]],
            )
            for c in d["conversations"]
        ]
        return Dataset(d["model_path"], d["torch_threads"], d["batch"], convs, turns(d["bench"]),
                       turns(d["adds"]), d["queries"], vectors["queries"], d["warmup"],
                       vectors["warmup"])


class System:
    """One system under test. The harness owns the protocol; a system only maps its calls."""

    name = ""
    # Seconds without CPU use that mean "done with background work after ingest": a system
    # that builds its index on a timer needs a window longer than the timer.
    idle_window_s = 3.0
    supports_vector = True

    def open(self, data: Dataset, root: Path) -> None:
        raise NotImplementedError

    def data_pid(self) -> int:
        """The process that holds the data (its RSS is reported)."""
        return os.getpid()

    def data_dir(self) -> Path:
        raise NotImplementedError

    def ingest(self, coll: str, turns: Sequence[Turn]) -> None:
        """One batch, through the system's own batch API."""
        raise NotImplementedError

    def after_ingest(self, coll: str) -> None:
        """Work a system needs between a bulk ingest and recalls that it does not do itself."""

    def add(self, coll: str, turn: Turn) -> None:
        raise NotImplementedError

    def text_recall(self, coll: str, query: str, k: int) -> list[str]:
        """The dia_ids of the top k for a query text."""
        raise NotImplementedError

    def vector_recall(self, coll: str, vector: Sequence[float], k: int) -> list[str]:
        raise NotImplementedError

    def extra_text_recalls(self) -> dict[str, Callable[[str, str, int], list[str]]]:
        """Other ways of recalling by text, timed interleaved with ``text_recall``."""
        return {}

    def variants(self) -> list[str]:
        """Ways of loading a conversation for R@k; "" is the protocol's plain one."""
        return [""]

    def load_conversation(self, coll: str, conv: Conversation, variant: str, batch: int) -> None:
        for chunk in chunks(conv.turns(), batch):
            self.ingest(coll, chunk)

    def before_questions(self, coll: str, conv: Conversation) -> None:
        """Called once a conversation is stored, before its questions."""

    def versions(self) -> dict[str, str]:
        return {}

    def extra_results(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        pass


def chunks(xs: Sequence[T], n: int) -> Iterator[Sequence[T]]:
    for i in range(0, len(xs), n):
        yield xs[i:i + n]


def free_port() -> int:
    """A loopback port free now, for a server a system starts."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def percentile(xs: Sequence[float], p: float) -> float:
    """Nearest rank."""
    s = sorted(xs)
    return s[max(0, math.ceil(p * len(s)) - 1)]


def summary(ms: Sequence[float]) -> dict[str, float]:
    return {"p50_ms": statistics.median(ms), "p90_ms": percentile(ms, 0.9),
            "p99_ms": percentile(ms, 0.99), "n": len(ms)}


def rss_kib(pid: int) -> dict[str, int]:
    """Resident set now and at its peak (VmHWM), from /proc (Linux only)."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return {"rss_kib": fields["VmRSS"], "peak_rss_kib": fields["VmHWM"]}


def cpu_seconds(pid: int) -> float:
    """User plus system time of all the process's threads."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_idle(pid: int, window: float, limit: float = 900.0) -> float:
    """Wait until the process spends (almost) no CPU for a whole window; returns the seconds
    it was busy before that window (its background work after the last call)."""
    start = time.perf_counter()
    while time.perf_counter() - start < limit:
        before = cpu_seconds(pid)
        time.sleep(window)
        if cpu_seconds(pid) - before < 0.025 * window:
            return time.perf_counter() - start - window
    raise TimeoutError(f"process {pid} still busy after {limit:.0f} s")


def disk_bytes(path: Path) -> dict[str, int]:
    """Allocated (du) and apparent sizes: some engines preallocate sparse files."""
    allocated = apparent = 0
    for p in path.rglob("*"):
        if p.is_file() and not p.is_symlink():
            st = p.stat()
            allocated += st.st_blocks * 512
            apparent += st.st_size
    return {"disk_bytes": allocated, "disk_apparent_bytes": apparent}


def _part(rel: tuple[str, ...]) -> str:
    """What a file of a Qdrant Edge data folder holds, by where it lies (see disk_parts)."""
    if any(r.endswith("_journal") for r in rel[:1]):
        return "reinforcement journal"
    if any(r.endswith("_ledger") for r in rel[:1]):
        return "ledger (its own shard)"
    for i, r in enumerate(rel):
        if r == "wal":
            return "write-ahead log"
        if r.startswith("vector_storage-"):
            name = r.removeprefix("vector_storage-")
            return f"{name}: int8 copy" if rel[-1].startswith("quantized") else f"{name}: vectors"
        if r.startswith("vector_index-"):
            return f"{r.removeprefix('vector_index-')}: index (HNSW / inverted)"
        if r == "payload_storage":
            return "payload"
        if r == "payload_index":
            return "payload indexes"
        if r.startswith("id_tracker") or r in ("mutable_id_tracker", "version.info"):
            return "ids and versions"
        if r == "segments" and i + 2 == len(rel):
            return "segment metadata"
    return "other"


def disk_parts(path: Path) -> dict[str, int]:
    """Allocated bytes of a Qdrant Edge data folder by what they hold (write-ahead log, each
    named vector, its index, payload, payload indexes, ...); other layouts land in "other"."""
    parts: dict[str, int] = {}
    for p in path.rglob("*"):
        if p.is_file() and not p.is_symlink():
            part = _part(p.relative_to(path).parts)
            parts[part] = parts.get(part, 0) + p.stat().st_blocks * 512
    return dict(sorted(parts.items(), key=lambda kv: -kv[1]))


def timed(fn: Callable[..., R], *args: Any) -> tuple[float, R]:
    """Milliseconds ``fn(*args)`` took, and what it returned."""
    t = time.perf_counter()
    out = fn(*args)
    return (time.perf_counter() - t) * 1000, out


def recall_at(got: Sequence[str], evidence: frozenset[str], k: int) -> float:
    return len(evidence & set(got[:k])) / len(evidence)


def measure(system: System, data: Dataset, root: Path) -> dict[str, Any]:
    """The whole protocol for one system (the caller closes it); see the README for the order
    and why."""
    out: dict[str, Any] = {"system": system.name}
    t = time.perf_counter()
    system.open(data, root)
    out["open_s"] = time.perf_counter() - t
    pid = system.data_pid()
    out["baseline"] = rss_kib(pid)  # model loaded, store empty
    out["versions"] = system.versions()

    # One small batch elsewhere first: the first encode and the first write pay one-off costs.
    system.ingest("warmup", data.adds[:WARMUP_INGEST])
    n = len(data.bench)
    log(f"{system.name}: ingesting {n} memories in batches of {data.batch}")
    batch_s = []
    for chunk in chunks(data.bench, data.batch):
        t = time.perf_counter()
        system.ingest("bench", chunk)
        batch_s.append(time.perf_counter() - t)
    ingest_s = sum(batch_s)
    out["ingest"] = {"memories": n, "batch": data.batch, "seconds": ingest_s,
                     "per_s": n / ingest_s, "batch_s": batch_s}
    t = time.perf_counter()
    system.after_ingest("bench")
    out["index_s"] = time.perf_counter() - t
    out["settle_s"] = wait_idle(pid, system.idle_window_s)
    log(f"{system.name}: {n / ingest_s:.0f}/s, settled after {out['settle_s']:.1f} s")

    for q in data.warmup:
        system.text_recall("bench", q, K)
        for fn in system.extra_text_recalls().values():
            fn("bench", q, K)
    extras = system.extra_text_recalls()
    times: dict[str, list[float]] = {"text": [], **{name: [] for name in extras}}
    ways: list[tuple[str, Callable[[str, str, int], list[str]]]] = [
        ("text", system.text_recall), *extras.items()]
    for i, q in enumerate(data.queries):
        # Alternate which way goes first, so that neither always finds the other's caches.
        for name, fn in ways if i % 2 == 0 else ways[::-1]:
            ms, _ = timed(fn, "bench", q, K)
            times[name].append(ms)
    out["text_recall"] = summary(times.pop("text"))
    out["extra_text_recall"] = {name: summary(ms) for name, ms in times.items()}

    if system.supports_vector:
        for v in data.warmup_vectors:
            system.vector_recall("bench", v, K)
        vms = [timed(system.vector_recall, "bench", v, K)[0] for v in data.query_vectors]
        out["vector_recall"] = summary(vms)
    log(f"{system.name}: text recall p50 {out['text_recall']['p50_ms']:.1f} ms")

    out["memory"] = {"memories": n, **rss_kib(pid), **disk_bytes(system.data_dir()),
                     "disk_parts": disk_parts(system.data_dir())}

    ams = [timed(system.add, "bench", a)[0] for a in data.adds]
    out["add"] = summary(ams)

    out["recall_at_k"] = evaluate(system, data)
    out.update(system.extra_results())
    return out


def evaluate(system: System, data: Dataset) -> dict[str, Any]:
    """Evidence R@5 and R@10, one collection per conversation and variant, questions asked in
    file order once the whole conversation is stored."""
    hits: dict[str, dict[str, list[float]]] = {}
    ms: dict[str, list[float]] = {}
    for conv in data.conversations:
        colls = {v: f"locomo-{conv.name}" + (f"-{v}" if v else "") for v in system.variants()}
        t = time.perf_counter()
        for v, c in colls.items():
            system.load_conversation(c, conv, v, data.batch)
        for c in colls.values():
            system.before_questions(c, conv)
        log(f"{system.name}: conversation {conv.name} stored in {time.perf_counter() - t:.1f} s, "
            f"{len(conv.questions)} questions")
        for q in conv.questions:
            for v, c in colls.items():
                took, got = timed(system.text_recall, c, q.question, K)
                ms.setdefault(v, []).append(took)
                h = hits.setdefault(v, {})
                for k in (5, 10):
                    r = recall_at(got, q.evidence, k)
                    h.setdefault(f"R@{k}", []).append(r)
                    h.setdefault(f"R@{k} cat{q.category}", []).append(r)
    return {
        v: {"questions": len(h["R@5"]), **{key: statistics.fmean(xs) for key, xs in sorted(h.items())},
            "recall_p50_ms": statistics.median(ms[v])}
        for v, h in hits.items()
    }
