"""The Grafana dashboard in deploy/ asks only for metrics the server exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

from celestial_memory.domain.zones import Zone
from celestial_memory.observability.metrics import REGISTRY, ZoneCounts

DASHBOARD = Path(__file__).parents[2] / "deploy" / "grafana" / "celestial-memory.json"


def exported() -> set[str]:
    counts = ({z.name.lower(): 1 for z in Zone}, 0)
    families = [*REGISTRY.collect(), *ZoneCounts(lambda: ["t"], lambda t: counts, 5).collect()]
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"),
                "gauge": ("",)}
    # Labelled metrics have no samples until a label is used: the names come from the types.
    return {f.name + s for f in families for s in suffixes.get(f.type, ("",))}


def test_every_query_names_an_exported_metric() -> None:
    dash = json.loads(DASHBOARD.read_text())
    names = exported()
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert len(exprs) >= 10
    for expr in exprs:
        used = set(re.findall(r"\b((?:grpc_server|celestial)_[a-z_]+)\b", expr))
        assert used, expr
        assert used <= names, (expr, used - names)
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
