"""``celestial eval locomo``: evidence recall at k on LoCoMo, replayed through the public client.

Follows the protocol of the data's README: every turn is one memory ("<speaker>: <text>" plus
" [shares <caption>]"), created at its session's time plus one second per position, with the
speaker, session and dia_id as metadata; the two previous turns of its session are sent as the
memory's context (indexed for search, not part of the content). The server's clock follows the
sessions (admin SetClock; the server needs CELESTIAL_ADMIN_CLOCK=true). Then, one hour after the
last session, every category 1-4 question is asked in file order.

Five settings run side by side, each in its own tenant:
- ``hybrid``: plain hybrid search, zones ignored, nothing reinforced;
- ``zones``: zone-ordered recall with reinforcement, rebalanced after every session with
  forgetting off;
- ``zones+forget``: the same with the server's default forgetting, recalling without the
  archive (deep=False): what forgetting costs when what it takes is out of reach;
- ``zones+archive``: the same forgetting with the server's default recall, which searches the
  archive when the zones fall short (deep recall);
- ``zones+expand``: ``zones`` with one step of graph expansion (the best matches' related
  memories join the candidates: here the turns before and after each, by session order).

``hybrid`` and ``zones`` ask for no expansion whatever the server's default, so the table shows
both beside each other; the forgetting settings take the server's default.

A result counts for its own dia_id and for those of the repeats merged into it (the server
folds a near-duplicate turn into the memory it repeats and keeps its metadata).

Each question is one recall with limit max(k); R@k is computed on its first k results, so the
smaller k sees the same ranking (and the same reinforcement history) as the larger.
"""

from __future__ import annotations

import json
import re
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from celestial_client.client import CelestialClient
from celestial_client.types import Memory, StoreItem

SETTINGS = ("hybrid", "zones", "zones+forget", "zones+archive", "zones+expand")
FORGETTING = ("zones+forget", "zones+archive")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
CONTEXT_TURNS = 2


@dataclass
class Conversation:
    name: str
    sessions: list[tuple[float, list[StoreItem]]]  # (session time, its turns)
    questions: list[tuple[str, set[str], int]]  # (question, evidence dia_ids, category)


@dataclass
class Scores:
    hits: dict[int, list[float]] = field(default_factory=lambda: defaultdict(list))
    by_category: dict[tuple[int, int], list[float]] = field(
        default_factory=lambda: defaultdict(list)
    )
    forgotten: int = 0
    archived: int = 0  # in the archive at the end (forgotten, not deleted)
    merged: int = 0  # turns folded into another memory as repeats
    recall_ms: list[float] = field(default_factory=list)


def _session_time(text: str) -> float:
    return datetime.strptime(text, "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC).timestamp()


def load(path: Path) -> Conversation:
    d = json.loads(path.read_text())
    sessions = []
    n = 1
    while f"session_{n}" in d:
        start = _session_time(d[f"session_{n}_date_time"])
        texts: list[str] = []
        items = []
        for i, t in enumerate(d[f"session_{n}"]):
            text = f"{t['speaker']}: {t['text']}"
            if t.get("blip_caption"):
                text += f" [shares {t['blip_caption']}]"
            items.append(StoreItem(
                content=text, created_at=start + i, context="\n".join(texts[-CONTEXT_TURNS:]),
                session_id=f"session_{n}",
                metadata={"speaker": t["speaker"], "session": str(n), "dia_id": t["dia_id"]},
            ))
            texts.append(text)
        sessions.append((start, items))
        n += 1
    questions = [
        (q["question"], set(q["evidence"]), int(q["category"]))
        for q in d["qa"] if q.get("category") in CATEGORIES and q.get("evidence")
    ]
    return Conversation(path.stem, sessions, questions)


def _tenant(conv: str, setting: str) -> str:
    return f"locomo-{re.sub(r'[^a-z0-9]+', '-', conv.lower())}-{setting.replace('+', '-')}-" \
        f"{int(time.time())}"


def run(
    target: str, paths: Sequence[Path], ks: Sequence[int],
    progress: Callable[[str], None] = lambda s: None,
) -> dict[str, Scores]:
    scores = {s: Scores() for s in SETTINGS}
    limit = max(ks)
    for path in paths:
        conv = load(path)
        clients = {s: CelestialClient(target, tenant=_tenant(conv.name, s), timeout=120)
                   for s in SETTINGS}
        admin = clients[SETTINGS[0]]
        try:
            for n, (start, items) in enumerate(conv.sessions, 1):
                admin.set_clock(start + len(items))
                for s, c in clients.items():
                    c.store_batch(items)
                    if s != "hybrid":
                        scores[s].forgotten += c.rebalance(forget=s in FORGETTING).forgotten
                progress(f"{conv.name}: session {n}/{len(conv.sessions)} stored")
            admin.set_clock(conv.sessions[-1][0] + 3600)
            for s, c in clients.items():
                if s != "hybrid":
                    scores[s].forgotten += c.rebalance(forget=s in FORGETTING).forgotten
            for qi, (question, evidence, cat) in enumerate(conv.questions, 1):
                for s, c in clients.items():
                    plain = s == "hybrid"
                    t0 = time.perf_counter()
                    if s == "zones+forget":
                        res = c.recall(question, limit, deep=False)
                    elif s == "zones+archive":
                        res = c.recall(question, limit)
                    else:
                        res = c.recall(question, limit, ignore_zones=plain, reinforce=not plain,
                                       expand=1 if s == "zones+expand" else 0)
                    scores[s].recall_ms.append((time.perf_counter() - t0) * 1000)
                    got = [_dia_ids(r.memory) for r in res]
                    for k in ks:
                        r = len(evidence & set().union(*got[:k])) / len(evidence)
                        scores[s].hits[k].append(r)
                        scores[s].by_category[(k, cat)].append(r)
                if qi % 50 == 0:
                    progress(f"{conv.name}: {qi}/{len(conv.questions)} questions")
            turns = sum(len(items) for _, items in conv.sessions)
            for s, c in clients.items():
                st = c.stats()
                scores[s].archived += st.archived
                scores[s].merged += turns - st.total - st.archived
        finally:
            for c in clients.values():
                c.close()
    return scores


def _dia_ids(m: Memory) -> set[str]:
    return {m.metadata.get("dia_id", ""), *(r.metadata.get("dia_id", "") for r in m.merged)}


def report(scores: dict[str, Scores], ks: Sequence[int]) -> str:
    head = ["setting", *(f"R@{k}" for k in ks)]
    head += [f"{name} R@{k}" for k in ks for name in CATEGORIES.values()]
    head += ["forgotten", "archived", "merged", "recall p50 ms"]
    rows = []
    for s, sc in scores.items():
        row = [s, *(f"{_mean(sc.hits[k]):.3f}" for k in ks)]
        row += [f"{_mean(sc.by_category[(k, c)]):.3f}" for k in ks for c in CATEGORIES]
        ms = sorted(sc.recall_ms)
        row += [str(sc.forgotten), str(sc.archived), str(sc.merged),
                f"{ms[len(ms) // 2]:.1f}" if ms else "-"]
        rows.append(row)
    n = len(next(iter(scores.values())).hits[ks[0]])
    from celestial_client.cli.output import table

    return f"{n} questions\n" + table(head, rows)


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0
