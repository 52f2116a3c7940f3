"""Designs of more features for the learned ranker, measured leave one conversation out on the
LoCoMo dev split beside the shipped features (train_ranker.py's rows, its parameters, its
rounds), before any of them is built into the server.

    python benchmarks/ranker_designs.py DATA --cache FILE      (DATA: the LoCoMo dev split)

The designs (each adds columns to the shipped 36):

- ``across``: what a candidate shares with the other strong candidates (the best five by
  relevance): how many of them share an entity with it other than the query's, how many are of
  its session, the best relevance among the candidates sharing such an entity, and the share of
  the query's entities it mentions that none of the best three does (coverage it adds).
- ``form``: the question's form against the kinds of entities a memory holds: its places,
  numbers and titles (names and dates are among the shipped features), and the products of the
  question word with the kind that answers it (when x date or time words, where x place,
  who x name, how many x number).
- ``both``: the two together.
- ``times``: the query's dates against the memory's time and the dates it mentions, and its
  distance in days from the best candidate.
- ``neighbours``: the best relevance among its session's candidates within two turns of it,
  and whether it comes first of them.
- ``form+times``: those two together; ``all``: every design above together.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from celestial_client.cli.locomo_eval import load
from celestial_memory.domain.candidate_facts import CandidateFacts
from celestial_memory.domain.models import Memory
from celestial_memory.ranking.features import FEATURES, features

sys.path.insert(0, str(Path(__file__).resolve().parent))
from locomo_inprocess import Gathered, turn_ids
from train_ranker import CANDIDATES, PARAMS, ROUNDS, Question, collect, figures

Floats = npt.NDArray[np.float64]
AT = {name: i for i, name in enumerate(FEATURES)}


def kind_count(memories: list[Memory], kind: str) -> Floats:
    return np.array([float(sum(e.startswith(kind + ":") for e in m.entities)) for m in memories])


def across(rows: Floats, memories: list[Memory], asked: list[str]) -> tuple[list[str], Floats]:
    rel = rows[:, AT["relevance"]]
    top = list(np.argsort(-rel, kind="stable")[:5])
    wanted = set(asked)
    own = [set(m.entities) - wanted for m in memories]
    mentions = [set(m.entities) & wanted for m in memories]
    n = len(memories)
    sharing, same_session, best_sharing, adds = (np.zeros(n) for _ in range(4))
    covered = set().union(*(mentions[j] for j in top[:3])) if top else set()
    for i, m in enumerate(memories):
        others = [j for j in top if j != i]
        sharing[i] = sum(bool(own[i] & own[j]) for j in others)
        same_session[i] = sum(bool(m.session_id) and memories[j].session_id == m.session_id
                              for j in others)
        best_sharing[i] = max((rel[j] for j in range(n) if j != i and own[i] & own[j]),
                              default=0.0)
        adds[i] = len(mentions[i] - covered) / max(len(wanted), 1)
    return (["top5_sharing_entity", "top5_same_session", "best_sharing_entity", "coverage_added"],
            np.stack([sharing, same_session, best_sharing, adds], axis=1))


def form(rows: Floats, memories: list[Memory], asked: list[str]) -> tuple[list[str], Floats]:
    places, numbers = kind_count(memories, "place"), kind_count(memories, "number")
    titles = kind_count(memories, "title")
    q = {w: rows[0, AT[f"q_{w}"]] for w in ("when", "where", "who", "how")}
    dated = np.maximum(rows[:, AT["has_date"]], np.minimum(rows[:, AT["time_words"]], 1.0))
    return (["places", "numbers", "titles", "when_x_date", "where_x_place", "who_x_name",
             "how_x_number"],
            np.stack([places, numbers, titles, q["when"] * dated,
                      q["where"] * np.minimum(places, 1.0),
                      q["who"] * np.minimum(rows[:, AT["names"]], 1.0),
                      q["how"] * np.minimum(numbers, 1.0)], axis=1))


def times(rows: Floats, memories: list[Memory], asked: list[str]) -> tuple[list[str], Floats]:
    """The query's dates (its date entities: a day, a month or a year) against the memory's own
    time and the dates it mentions; and its nearness in time to the best candidate."""
    wanted = [e[5:] for e in asked if e.startswith("date:")]
    made = [datetime.fromtimestamp(m.created_at, UTC) for m in memories]
    at_time = np.array([float(any(d and (f"{t:%Y-%m-%d}".startswith(d) or
                                         f"{t:%m-%d}" == d.lstrip("-")) for d in wanted))
                        for t in made])
    mentioned = np.array([float(any(f"date:{d}" in m.entities for d in wanted))
                          for m in memories])
    best = int(np.argmax(rows[:, AT["relevance"]]))
    days = np.array([abs(m.created_at - memories[best].created_at) / 86_400.0 for m in memories])
    return (["query_dates", "at_query_date", "mentions_query_date", "log_days_from_best"],
            np.stack([np.full(len(memories), float(len(wanted))), at_time, mentioned,
                      np.log1p(days)], axis=1))


def neighbours(rows: Floats, memories: list[Memory], asked: list[str],
               ) -> tuple[list[str], Floats]:
    """The best relevance among the candidates of its session within two turns of it (by
    creation time), and its place in the session's turns among the candidates."""
    rel = rows[:, AT["relevance"]]
    n = len(memories)
    near, first = np.zeros(n), np.zeros(n)
    for i, m in enumerate(memories):
        same = [j for j in range(n) if j != i and m.session_id
                and memories[j].session_id == m.session_id]
        close = [j for j in same if abs(memories[j].created_at - m.created_at) <= 2.0]
        near[i] = max((rel[j] for j in close), default=0.0)
        first[i] = float(all(memories[j].created_at > m.created_at for j in same))
    return ["best_within_two_turns", "first_of_session"], np.stack([near, first], axis=1)


Design = Callable[[Floats, list[Memory], list[str]], tuple[list[str], Floats]]
DESIGNS: dict[str, list[Design]] = {"shipped": [], "across": [across], "form": [form],
                                    "both": [across, form], "times": [times],
                                    "neighbours": [neighbours],
                                    "form+times": [form, times],
                                    "all": [across, form, times, neighbours]}


def questions(found: list[tuple[int, int, set[str], Gathered]], texts: list[str],
              extra: list[Design]) -> tuple[list[Question], list[str]]:
    out, names = [], list(FEATURES)
    for (ci, category, evidence, g), text in zip(found, texts, strict=True):
        k = min(CANDIDATES, len(g.ids))
        mems = g.memories[:k]
        rows = features(text, g.asked, g.signals[:k], g.relevance[:k], CandidateFacts.of(mems))
        names = list(FEATURES)
        for design in extra:
            more, cols = design(rows, mems, g.asked)
            rows, names = np.concatenate([rows, cols], axis=1), names + more
        out.append(Question(ci, category, evidence, [turn_ids(m) for m in mems], rows))
    return out, names


def leave_one_out(qs: list[Question], names: list[str], rounds: int) -> dict[str, float]:
    import lightgbm as lgb

    scores: list[Any] = [None] * len(qs)
    for held in sorted({q.conversation for q in qs}):
        train = [q for q in qs if q.conversation != held]
        data = lgb.Dataset(np.concatenate([q.rows for q in train]),
                           np.concatenate([q.grades() for q in train]),
                           group=[len(q.labels) for q in train], feature_name=names)
        model = lgb.train(PARAMS, data, num_boost_round=rounds)
        for i, q in enumerate(qs):
            if q.conversation == held:
                scores[i] = np.asarray(model.predict(q.rows, num_threads=1), dtype=np.float64)
    return figures(qs, scores)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("--cache", type=Path, required=True,
                        help="train_ranker.py's cache of the gathered candidates (made if absent)")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--designs", nargs="*", default=list(DESIGNS))
    parser.add_argument("--random-state", type=int, default=PARAMS["seed"],
                        help="LightGBM's random state (the spread between them is the noise)")
    args = parser.parse_args()
    PARAMS["seed"] = args.random_state
    paths = sorted(args.data.glob("*.json"))
    texts = [text for p in paths for text, _, _ in load(p).questions]
    if args.cache.exists():
        found = pickle.loads(args.cache.read_bytes())
    else:
        found = collect(paths, CANDIDATES)
        args.cache.write_bytes(pickle.dumps(found))
    header = False
    for name in args.designs:
        qs, names = questions(found, texts, DESIGNS[name])
        got = leave_one_out(qs, names, args.rounds)
        if not header:
            print("| design | " + " | ".join(got) + " |")
            header = True
        cells = " | ".join(f"{v:.3f}" for v in got.values())
        print(f"| {name} ({len(names)} features, random state {args.random_state}) | {cells} |", flush=True)


if __name__ == "__main__":
    main()
