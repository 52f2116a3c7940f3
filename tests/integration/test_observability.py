"""Metrics scraped after known traffic, the orrery's data and its guard, JSON access logs, and
traces, against a real server."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import pytest
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.clock import ManualClock
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.observability import telemetry
from celestial_memory.observability.json_logs import JsonFormatter
from celestial_memory.ops.http import OpsServer
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.conftest import running_server

T = "obs"
SECRET_CONTENT = "the espresso machine code is quokka"


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def rpc(method: str, code: str = "") -> dict[str, str]:
    out = {"grpc_type": "unary", "grpc_service": "celestial.v1.MemoryService",
           "grpc_method": method}
    return {**out, "grpc_code": code} if code else out


@pytest.fixture
async def observed(tmp_path: Path, embedder: SentenceTransformerEmbedder,
                   clock: ManualClock) -> Any:
    async with running_server(tmp_path, embedder, clock, metrics_address="127.0.0.1:0",
                              metrics_zone_refresh_s=0) as srv:
        yield srv


async def test_metrics_move_by_the_traffic(observed: MemoryServer) -> None:
    assert observed.ops is not None
    port = observed.ops.port
    before = await asyncio.to_thread(scrape, port)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{observed.port}") as ch:
        stub = pb_grpc.MemoryServiceStub(ch)
        for text in (SECRET_CONTENT, "Bob walks the dog at seven", "Carol plays the cello"):
            await stub.Store(pb.StoreRequest(tenant=T, content=text))
        for q in ("espresso", "dog walk"):
            await stub.Recall(pb.RecallRequest(tenant=T, query=q))
        with pytest.raises(grpc.aio.AioRpcError):
            await stub.Get(pb.GetRequest(tenant=T, id="00000000-0000-4000-8000-000000000000"))
        with pytest.raises(grpc.aio.AioRpcError):
            await stub.Recall(pb.RecallRequest(tenant=T, query="x", limit=-1))
        await stub.Rebalance(pb.RebalanceRequest(tenant=T))
    after = await asyncio.to_thread(scrape, port)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("grpc_server_started_total", **rpc("Store")) == 3
    assert delta("grpc_server_handled_total", **rpc("Store", "OK")) == 3
    assert delta("grpc_server_handled_total", **rpc("Recall", "OK")) == 2
    assert delta("grpc_server_handled_total", **rpc("Recall", "INVALID_ARGUMENT")) == 1
    assert delta("grpc_server_handled_total", **rpc("Get", "NOT_FOUND")) == 1
    assert delta("grpc_server_handling_seconds_count", **rpc("Recall")) == 3
    assert delta("grpc_server_handling_seconds_sum", **rpc("Recall")) > 0
    # The two good recalls went through every stage; the bad one through none.
    for stage in ("candidates", "rescoring", "payloads", "reinforcement"):
        assert delta("celestial_recall_stage_seconds_count", stage=stage) == 2, stage
    assert delta("celestial_embedding_batch_size_count") >= 5  # 3 stores, 2 queries
    assert delta("celestial_embedding_seconds_count") == delta("celestial_embedding_batch_size_count")
    assert delta("celestial_rebalance_seconds_count", dry_run="false") == 1
    zones = {lab: v for (name, lab), v in after.items() if name == "celestial_zone_memories"
             and dict(lab)["tenant"] == T}
    assert sum(zones.values()) == 3 and len(zones) == 5
    assert ("celestial_reinforcement_queue_depth", ()) in after
    # No label, and nothing in the exposition, carries content or a query.
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    for word in ("espresso", "quokka", "cello", "dog walk"):
        assert word not in text


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


async def test_orrery_page_data_sampling_and_guard(observed: MemoryServer) -> None:
    assert observed.ops is not None
    svc = observed.service
    from celestial_memory.domain.requests import NewMemory

    for i in range(12):
        await asyncio.to_thread(svc.store_memory, T, NewMemory(f"note {i} about the orrery",
                                                               importance=i / 12))
    base = f"http://127.0.0.1:{observed.ops.port}"
    status, page = await asyncio.to_thread(get, f"{base}/orrery?tenant={T}")
    assert status == 200 and b"/orrery/orrery.js" in page
    assert (await asyncio.to_thread(get, f"{base}/orrery/orrery.js"))[0] == 200
    assert (await asyncio.to_thread(get, f"{base}/orrery/../config.py"))[0] == 404
    status, body = await asyncio.to_thread(get, f"{base}/orrery/data?tenant={T}")
    data = json.loads(body)
    assert status == 200 and data["total"] == 12 and not data["sampled"]
    assert len(data["memories"]) == 12
    assert sum(data["zones"].values()) == 12
    m = data["memories"][0]
    assert set(m["breakdown"]) == {"recall", "freshness", "importance", "context", "total"}
    # A large tenant is sampled, each zone in proportion, and the page says so.
    svc.settings.orrery_max_dots = 4
    data = json.loads((await asyncio.to_thread(get, f"{base}/orrery/data?tenant={T}"))[1])
    assert data["sampled"] and len(data["memories"]) <= 6
    # Without keys, only a request naming a loopback host: a page elsewhere that rebinds its
    # own name to this machine is refused.
    status, body = await asyncio.to_thread(get, f"{base}/orrery/data?tenant={T}",
                                           {"Host": f"evil.example:{observed.ops.port}"})
    assert status == 403 and b"localhost" in body
    # Content is behind the same guard as the gRPC port: without keys, loopback only.
    guarded = OpsServer(svc, "127.0.0.1:0", None, open_without_keys=False)
    guarded.start()
    try:
        status, body = await asyncio.to_thread(
            get, f"http://127.0.0.1:{guarded.port}/orrery/data?tenant={T}")
        assert status == 403 and b"loopback" in body
        assert (await asyncio.to_thread(get, f"http://127.0.0.1:{guarded.port}/metrics"))[0] == 200
    finally:
        guarded.stop()


async def test_json_access_log_has_the_call_and_no_content(observed: MemoryServer) -> None:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    access = logging.getLogger("celestial_memory.access_log")
    access.addHandler(handler)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{observed.port}") as ch:
            stub = pb_grpc.MemoryServiceStub(ch)
            await stub.Store(pb.StoreRequest(tenant=T, content=SECRET_CONTENT),
                             metadata=(("x-request-id", "req-42"),
                                       ("authorization", "Bearer cm_not_a_real_key_0123")))
            await stub.Recall(pb.RecallRequest(tenant=T, query="machine code"))
    finally:
        access.removeHandler(handler)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    store = next(x for x in lines if x["method"] == "Store")
    assert store["request_id"] == "req-42" and store["tenant"] == T and store["status"] == "OK"
    assert store["duration_ms"] > 0 and store["level"] == "INFO"
    recall = next(x for x in lines if x["method"] == "Recall")
    assert len(recall["request_id"]) == 16  # made here when the caller sends none
    text = out.getvalue()
    for secret in ("espresso", "quokka", "machine code", "cm_not_a_real_key"):
        assert secret not in text


async def test_traces_an_rpc_and_its_stages(observed: MemoryServer) -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    spans = InMemorySpanExporter()
    telemetry.configure("", exporter=spans)
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{observed.port}") as ch:
            stub = pb_grpc.MemoryServiceStub(ch)
            await stub.Store(pb.StoreRequest(tenant=T, content="traced memory"))
            await stub.Recall(pb.RecallRequest(tenant=T, query="traced"))
    finally:
        telemetry.disable()
    done = {s.name: s for s in spans.get_finished_spans()}
    rpc_span = done["celestial.v1.MemoryService/Recall"]
    assert rpc_span.attributes["rpc.grpc.status_code"] == "OK"
    for stage in ("candidates", "rescoring", "payloads", "reinforcement"):
        child = done[f"recall.{stage}"]
        assert child.parent is not None and child.parent.span_id == rpc_span.context.span_id
    assert "celestial.v1.MemoryService/Store" in done
    assert rpc_span.parent is None  # no traceparent sent: a trace of its own
    # A caller's W3C traceparent makes the RPC's span a child of the caller's.
    spans.clear()
    telemetry.configure("", exporter=spans)
    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{observed.port}") as ch:
            await pb_grpc.MemoryServiceStub(ch).Stats(
                pb.StatsRequest(tenant=T),
                metadata=(("traceparent", f"00-{trace_id}-{parent_id}-01"),))
    finally:
        telemetry.disable()
    (stats_span,) = [s for s in spans.get_finished_spans() if s.name.endswith("/Stats")]
    assert f"{stats_span.context.trace_id:032x}" == trace_id
    assert stats_span.parent is not None and f"{stats_span.parent.span_id:016x}" == parent_id
    # Off again: no spans.
    with telemetry.span("nothing") as s:
        assert s is None


async def test_the_interceptors_wrap_a_methods_handler_once(
    server: MemoryServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every interceptor reuses its wrapped handler from call to call (api/grpc/wrapping.py):
    counted at each layer's wrapping function, a second and third Stats wrap nothing anew."""
    from celestial_memory.api.grpc import wrapping

    wraps: list[str] = []
    real_get = wrapping.WrappedHandlers.get

    def counting(self: wrapping.WrappedHandlers, method: str, handler: Any, wrap: Any) -> Any:
        def counted(m: str, h: Any) -> Any:
            wraps.append(m)
            return wrap(m, h)
        return real_get(self, method, handler, counted)

    monkeypatch.setattr(wrapping.WrappedHandlers, "get", counting)
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as ch:
        stub = pb_grpc.MemoryServiceStub(ch)
        await stub.Stats(pb.StatsRequest(tenant=T))
        first = len(wraps)
        await stub.Stats(pb.StatsRequest(tenant=T))
        await stub.Stats(pb.StatsRequest(tenant=T))
    assert first == 4  # observer, decode guard, authenticator, call limit (not a stream)
    assert len(wraps) == first and set(wraps) == {"/celestial.v1.MemoryService/Stats"}
