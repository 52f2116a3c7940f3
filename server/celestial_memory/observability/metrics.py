"""Prometheus metrics, with ``prometheus-client``, in a registry of their own (served on
``CELESTIAL_METRICS_ADDRESS`` by ops/http.py).

Per RPC, the gRPC server conventions (go-grpc-prometheus, grpc-ecosystem's py-grpc-prometheus):
``grpc_server_started_total``, ``grpc_server_handled_total`` (with ``grpc_code``) and the
``grpc_server_handling_seconds`` histogram, labelled by type, service and method. The rest is
``celestial_*``: embedding time and batch sizes, recall stage timings, rebalance duration and
counts, the reinforcement queue's depth, store errors by kind, and memories per zone for the
largest tenants (``CELESTIAL_METRICS_TOP_TENANTS``, the others summed as "__other__", so the
cardinality is bounded whatever the number of tenants). No label carries content or keys: the
only free-form label is a tenant name, and only on the zone gauges; with
``CELESTIAL_METRICS_HIDE_TENANTS`` it is a hash of the name (``hashed``), as /metrics is open.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from celestial_memory.observability import telemetry
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)
REGISTRY = CollectorRegistry(auto_describe=True)
GRPC = ("grpc_type", "grpc_service", "grpc_method")
# Seconds: a recall is milliseconds, a rebalance or an import may be minutes.
LATENCY = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120,
           300, 600)
OTHER = "__other__"  # the tenants below the top ones, summed (no tenant is named so: reserved)

STARTED = Counter("grpc_server_started_total", "RPCs started on the server.", GRPC,
                  registry=REGISTRY)
HANDLED = Counter("grpc_server_handled_total", "RPCs completed on the server, by status code.",
                  (*GRPC, "grpc_code"), registry=REGISTRY)
HANDLING = Histogram("grpc_server_handling_seconds",
                     "Time to handle an RPC, from its start to its status.", GRPC,
                     buckets=LATENCY, registry=REGISTRY)
EMBED_SECONDS = Histogram("celestial_embedding_seconds", "Time of one encode (a batch of texts).",
                          buckets=LATENCY, registry=REGISTRY)
EMBED_BATCH = Histogram("celestial_embedding_batch_size", "Texts encoded together.",
                        buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512), registry=REGISTRY)
RECALL_STAGE = Histogram("celestial_recall_stage_seconds",
                         "Time of each stage of a recall: encode (a text query's embedding), "
                         "keywords (its keyword vector), entities (the query's and the entity "
                         "signal), candidates (the hybrid searches), rescoring (relevance and "
                         "zone order), payloads (reading what is returned), reinforcement.",
                         ("stage",), buckets=LATENCY,
                         registry=REGISTRY)
REBALANCE_SECONDS = Histogram("celestial_rebalance_seconds", "Time of one tenant's rebalance.",
                              ("dry_run",), buckets=LATENCY, registry=REGISTRY)
REBALANCED = Counter("celestial_rebalance_memories_total",
                     "Memories a rebalance (not a dry run) moved, evicted by capacity, forgot "
                     "into the archive, or purged from it.", ("outcome",), registry=REGISTRY)
STORE_ERRORS = Counter("celestial_store_errors_total",
                       "Calls that failed because of the store, by kind.", ("kind",),
                       registry=REGISTRY)
MODEL_CALLS = Counter("celestial_model_calls_total",
                      "Calls to the model endpoint, by feature and outcome (ok or failed).",
                      ("feature", "outcome"), registry=REGISTRY)
MODEL_TOKENS = Counter("celestial_model_tokens_total", "Tokens the model endpoint reported used.",
                       ("feature",), registry=REGISTRY)
UNDERSTAND_WAITING = Gauge("celestial_understanding_queue_depth",
                           "Memories waiting for the model (due or backing off).",
                           registry=REGISTRY)
UNDERSTAND_GIVEN_UP = Counter("celestial_understanding_given_up_total",
                              "Memories left with their error recorded after the last try.",
                              registry=REGISTRY)
QUEUE_DEPTH = Gauge("celestial_reinforcement_queue_depth",
                    "Reinforced memories waiting to be written.", registry=REGISTRY)

# Sharing between nodes (sharing/node.py): peers are the operator's list, so few labels.
POLICY_EXCHANGES = Counter("celestial_policy_exchanges_total",
                           "Peers' policy updates taken, or refused and calls failed, by outcome "
                           "(taken, fingerprint, damaged, too_often, unlisted, another_key, "
                           "and a failed call's status code).", ("outcome",), registry=REGISTRY)
POLICY_SHARING_MERGES = Counter("celestial_policy_sharing_merges_total",
                                "Gossip rounds whose aggregate the shared policies took.",
                                registry=REGISTRY)
POLICY_SHARING_EPSILON = Gauge("celestial_policy_sharing_epsilon",
                               "Privacy spent by the updates this node sent (epsilon at the "
                               "configured delta; 0 without noise).", registry=REGISTRY)


class Stages:
    """A recall's stage timings: ``with stages("candidates"): ...`` adds up the time of each
    stage (a stage may come back, as the archive's candidates do) and traces it when tracing is
    on (observability/telemetry.py); ``done`` observes each stage once."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        if telemetry.enabled():
            with telemetry.span(f"recall.{name}"):
                yield
        else:  # a recall enters ten stages: no span machinery when there is no tracing
            yield
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started

    def done(self) -> None:
        for name, seconds in self.seconds.items():
            if (child := _STAGE_CHILDREN.get(name)) is None:  # labels() locks and checks
                child = _STAGE_CHILDREN[name] = RECALL_STAGE.labels(name)
            child.observe(seconds)


_STAGE_CHILDREN: dict[str, Any] = {}


def rebalanced(seconds: float, dry_run: bool, moved: int, evicted: int, forgotten: int,
               purged: int) -> None:
    REBALANCE_SECONDS.labels(str(dry_run).lower()).observe(seconds)
    if not dry_run:
        for outcome, n in (("moved", moved), ("evicted", evicted), ("forgotten", forgotten),
                           ("purged", purged)):
            REBALANCED.labels(outcome).inc(n)


def hashed(tenant: str) -> str:
    """A tenant's label when names are hidden: short, and the same on every scrape and replica."""
    return "t-" + hashlib.sha256(tenant.encode()).hexdigest()[:12]


class ZoneCounts(Collector):
    """``celestial_zone_memories{tenant, zone}`` and ``celestial_archived_memories{tenant}`` for
    the ``top`` largest tenants and "other", read at most every ``ttl_s`` (a scrape must not
    count every tenant's zones each time); ``hide``: tenants labelled by ``hashed`` names."""

    def __init__(self, tenants: Callable[[], list[str]],
                 counts: Callable[[str], tuple[dict[str, int], int]], top: int,
                 ttl_s: float = 30.0, hide: bool = False) -> None:
        self._tenants, self._counts, self._top, self._ttl = tenants, counts, top, ttl_s
        self._hide = hide
        self._lock = threading.Lock()
        self._at = -1e18  # monotonic time of the last read
        self._rows: list[tuple[str, dict[str, int], int]] = []

    def _read(self) -> list[tuple[str, dict[str, int], int]]:
        with self._lock:
            if time.monotonic() - self._at < self._ttl:
                return self._rows
            per: list[tuple[str, dict[str, int], int]] = []
            try:
                for t in self._tenants():
                    zones, n_archived = self._counts(t)
                    per.append((t, zones, n_archived))
            except Exception:  # the store is down: the other metrics are still served
                log.warning("zone gauges: the store did not answer; the last counts stay")
                self._at = time.monotonic()
                return self._rows
            per.sort(key=lambda r: (-sum(r[1].values()), r[0]))
            rows, rest = per[:self._top], per[self._top:]
            if rest:
                other: dict[str, int] = {}
                for _, zones, _ in rest:
                    for z, n in zones.items():
                        other[z] = other.get(z, 0) + n
                rows.append((OTHER, other, sum(r[2] for r in rest)))
            self._rows, self._at = rows, time.monotonic()
            return rows

    def collect(self) -> Iterator[GaugeMetricFamily]:
        zones = GaugeMetricFamily("celestial_zone_memories", "Live memories per zone.",
                                  labels=("tenant", "zone"))
        archived = GaugeMetricFamily("celestial_archived_memories", "Memories in the archive.",
                                     labels=("tenant",))
        for name, counts, n_archived in self._read():
            tenant = hashed(name) if self._hide and name != OTHER else name
            for zone, n in counts.items():
                zones.add_metric((tenant, zone), n)
            archived.add_metric((tenant,), n_archived)
        yield zones
        yield archived

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())  # read at scrape time only


def watch_service(service: Any, top_tenants: int, refresh_s: float) -> ZoneCounts:
    """Register the gauges that read the service (queue depth, zone counts); once per process
    (a second server in the process, as in tests, replaces the first's)."""
    QUEUE_DEPTH.set_function(service.placement.queue.pending)
    global _zones
    if _zones is not None:
        REGISTRY.unregister(_zones)
    _zones = ZoneCounts(service.tenants, service.zone_counts, top_tenants, refresh_s,
                        hide=service.settings.metrics_hide_tenants)
    REGISTRY.register(_zones)
    return _zones


_zones: ZoneCounts | None = None
