"""Checks of a model's text (``ranker.txt``) before LightGBM holds it in the server's process.

LightGBM's reader trusts its input: the first half of a valid model ends the process that
parses it (SIGABRT), before any Python exception can be raised. So the text is checked twice.
First its structure, here, without LightGBM: the header, each tree's arrays (their lengths,
their feature and child indices), as many trees as the header's ``tree_sizes`` says, ``end of
trees`` and the parameters block. Then a short-lived process parses it with LightGBM and scores
a row (``trial_load``): what would have ended the server ends that process instead. A text that
passed once is not tried again in the same process (its SHA-256 is kept).
"""

from __future__ import annotations

import subprocess
import sys
import threading

MODEL_BYTES = 64 << 20  # 100 trees of 15 leaves take 180 KB; this allows thousands
TRIAL_TIMEOUT_S = 60.0  # importing LightGBM on a busy machine takes seconds, parsing less
_TRIED: set[str] = set()  # SHA-256 of the texts that loaded in a trial
_TRIED_LOCK = threading.Lock()

# The child reads the text from its stdin, so the bytes it parses are the bytes checked here.
_TRIAL = """
import sys
import lightgbm
booster = lightgbm.Booster(model_str=sys.stdin.read())
n = booster.num_feature()
booster.predict([[0.0] * n], num_threads=1)
print("loaded", n, booster.num_trees())
"""


class TextRefused(Exception):
    """What is wrong with a model's text."""


def check_structure(text: str, features: int) -> int:
    """The number of trees of ``text``, a LightGBM text model over ``features`` features, or
    TextRefused saying what is wrong with it."""
    lines = text.split("\n")
    if not lines or lines[0].strip() != "tree":
        raise TextRefused("it does not start as a LightGBM text model (\"tree\")")
    header = _fields(lines[1:_index(lines, "Tree=0", "the first tree")])
    if header.get("version") != "v4":
        raise TextRefused(f"its format version is {header.get('version')!r}, not 'v4'")
    for name, want in (("num_class", "1"), ("num_tree_per_iteration", "1"),
                       ("max_feature_idx", str(features - 1))):
        if header.get(name) != want:
            raise TextRefused(f"its {name} is {header.get(name)!r}, not {want!r}")
    if len(header.get("feature_names", "").split()) != features:
        raise TextRefused(f"it does not name {features} features")
    sizes = _ints(header.get("tree_sizes", ""), "tree_sizes")
    end = _index(lines, "end of trees", "'end of trees'")
    starts = [i for i, line in enumerate(lines[:end]) if line.startswith("Tree=")]
    if not sizes or len(starts) != len(sizes):
        raise TextRefused(f"it holds {len(starts)} trees, its header says {len(sizes)}")
    for n, (start, stop) in enumerate(zip(starts, [*starts[1:], end], strict=True)):
        if lines[start] != f"Tree={n}":
            raise TextRefused(f"tree {n} is named {lines[start][:40]!r}")
        _check_tree(n, _fields(lines[start + 1:stop]), features)
    params = _index(lines, "parameters:", "its parameters")
    if params < end or "end of parameters" not in (line.strip() for line in lines[params:]):
        raise TextRefused("its parameters block is missing or unfinished")
    return len(sizes)


def trial_load(text: str, digest: str, features: int) -> None:
    """Parse ``text`` with LightGBM in a short-lived process; TextRefused when that process
    does not come back saying it loaded a model over ``features`` features."""
    with _TRIED_LOCK:
        if digest in _TRIED:
            return
    # -P: the working directory is not put first on the child's path (no stray lightgbm.py).
    flags = ["-P"] if sys.version_info >= (3, 11) else []
    try:
        done = subprocess.run([sys.executable, *flags, "-c", _TRIAL], input=text.encode(),
                              capture_output=True, timeout=TRIAL_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise TextRefused(f"LightGBM did not read it within {TRIAL_TIMEOUT_S:.0f} s") from None
    except OSError as exc:
        raise TextRefused(f"no process could be started to try it: {exc}") from None
    said = done.stdout.decode(errors="replace").split()
    if done.returncode < 0:
        raise TextRefused(f"LightGBM ended the process that read it (signal {-done.returncode})")
    if done.returncode != 0 or said[:2] != ["loaded", str(features)]:
        why = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no reason"]
        raise TextRefused(f"LightGBM cannot read it: {why[0][:200]}")
    with _TRIED_LOCK:
        _TRIED.add(digest)


def _check_tree(n: int, tree: dict[str, str], features: int) -> None:
    leaves = _int(tree.get("num_leaves", ""), f"tree {n}'s num_leaves")
    if leaves < 1:
        raise TextRefused(f"tree {n} has {leaves} leaves")
    if tree.get("num_cat", "0") != "0" or tree.get("is_linear", "0") != "0":
        raise TextRefused(f"tree {n} has categorical or linear splits, which no feature has")
    if len(_floats(tree.get("leaf_value", ""), f"tree {n}'s leaf_value")) != leaves:
        raise TextRefused(f"tree {n} does not have a value for each of its {leaves} leaves")
    if leaves == 1:
        return
    for name in ("split_feature", "threshold", "decision_type", "left_child", "right_child"):
        if len(tree.get(name, "").split()) != leaves - 1:
            raise TextRefused(f"tree {n}'s {name} does not have {leaves - 1} values")
    _floats(tree["threshold"], f"tree {n}'s threshold")
    if any(not 0 <= f < features for f in _ints(tree["split_feature"], "split_feature")):
        raise TextRefused(f"tree {n} splits on a feature it does not have")
    for side in ("left_child", "right_child"):  # an inner node's index, or ~leaf
        if any(not -leaves <= c < leaves - 1 for c in _ints(tree[side], side)):
            raise TextRefused(f"tree {n}'s {side} points outside the tree")


def _index(lines: list[str], line: str, what: str) -> int:
    try:
        return lines.index(line)
    except ValueError:
        raise TextRefused(f"{what} is missing") from None


def _fields(lines: list[str]) -> dict[str, str]:
    return dict(line.split("=", 1) for line in lines if "=" in line)


def _int(value: str, what: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise TextRefused(f"{what} is not a number: {value[:40]!r}") from None


def _ints(values: str, what: str) -> list[int]:
    return [_int(v, what) for v in values.split()]


def _floats(values: str, what: str) -> list[float]:
    try:
        return [float(v) for v in values.split()]
    except ValueError:
        raise TextRefused(f"{what} holds something that is not a number") from None
