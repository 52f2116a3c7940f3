"""The contract over Connect on the HTTP port: JSON as curl sends it, the same answers as gRPC,
the same errors with the same ErrorInfo reasons, the same keys and roles, and the server
stream (Export) over Connect streaming."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from celestial_client.v1.memory_connect import MemoryServiceClient
from celestial_memory.access.keys import create_key
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.clock import ManualClock
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.observability.metrics import REGISTRY
from google.protobuf import json_format
from google.rpc import error_details_pb2

from tests.integration.conftest import running_server

SERVICE = "/celestial.v1.MemoryService"
JSON = {"content-type": "application/json"}


@pytest.fixture
async def http(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> AsyncIterator[tuple[MemoryServer, httpx.AsyncClient]]:
    async with (running_server(tmp_path, embedder, clock, http_address="127.0.0.1:0") as srv,
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{srv.http_port}") as h):
        yield srv, h


async def post(h: httpx.AsyncClient, method: str, body: dict[str, Any],
               headers: dict[str, str] | None = None) -> httpx.Response:
    return await h.post(f"{SERVICE}/{method}", content=json.dumps(body),
                        headers={**JSON, **(headers or {})})


def reason(resp: httpx.Response) -> str:
    """The ErrorInfo reason of a Connect error answer."""
    for d in resp.json().get("details", []):
        if d["type"] == "google.rpc.ErrorInfo":
            value = d["value"] + "=" * (-len(d["value"]) % 4)
            return error_details_pb2.ErrorInfo.FromString(base64.b64decode(value)).reason
    raise AssertionError(f"no ErrorInfo in {resp.text}")


async def test_store_and_recall_as_curl_sends_them_and_the_same_answers_as_grpc(
    http: tuple[MemoryServer, httpx.AsyncClient],
) -> None:
    srv, h = http
    stored = await post(h, "Store", {"tenant": "t", "content": "the blue heron nests by the lake"})
    assert stored.status_code == 200, stored.text
    memory = stored.json()["memory"]
    assert memory["content"] == "the blue heron nests by the lake" and memory["zone"]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as ch:
        stub = pb_grpc.MemoryServiceStub(ch)
        tax = await stub.Store(pb.StoreRequest(tenant="t", content="Alice files the tax forms "
                                               "in April", session_id="s1"))
        await stub.Relate(pb.RelateRequest(tenant="t", from_id=memory["id"],
                                           to_id=tax.memory.id, relation="before"))
        recall = pb.RecallRequest(tenant="t", query="where do herons nest", limit=5,
                                  no_reinforce=True)
        for method, request in (
            ("Get", pb.GetRequest(tenant="t", id=memory["id"])),
            ("Recall", recall),
            ("Context", pb.ContextRequest(recall=recall, max_tokens=200, neighbours=True)),
            ("Stats", pb.StatsRequest(tenant="t")),
            ("List", pb.ListRequest(tenant="t", page_size=10)),
            ("Recent", pb.RecentRequest(tenant="t")),
            ("Ledger", pb.LedgerRequest(tenant="t", memory_id=memory["id"])),
            ("Related", pb.RelatedRequest(tenant="t", id=tax.memory.id, depth=2)),
            ("Entities", pb.EntitiesRequest(tenant="t")),
        ):
            over_grpc = await getattr(stub, method)(request)
            over_http = await post(h, method, json_format.MessageToDict(request))
            assert over_http.status_code == 200, over_http.text
            # Every field, zero ones too (a script need not know that a missing count is 0).
            assert over_http.json() == json_format.MessageToDict(
                over_grpc, always_print_fields_with_no_presence=True), method
    recalled = (await post(h, "Recall", {"tenant": "t", "query": "herons"})).json()
    assert recalled["results"][0]["memory"]["id"] == memory["id"]
    zones = (await post(h, "Stats", {"tenant": "t"})).json()["zones"]
    assert zones[0]["zone"] == "ZONE_CORE" and zones[0]["count"] == "0"
    assert all("count" in z and "capacity" in z for z in zones)
    turn = (await post(h, "Observe", {"tenant": "t", "text": "What do herons eat?",
                                      "dryRun": True})).json()
    assert turn["decision"]["trace"]["phase"] == 0  # the retrieve rules' phase, not left out


async def test_errors_carry_the_grpc_codes_and_reasons(
    http: tuple[MemoryServer, httpx.AsyncClient],
) -> None:
    _, h = http
    empty = await post(h, "Store", {"tenant": "t", "content": "  "})
    assert (empty.status_code, empty.json()["code"]) == (400, "invalid_argument")
    assert reason(empty) == "INVALID_ARGUMENT" and "content" in empty.json()["message"]
    missing = await post(h, "Get", {"tenant": "t", "id": "00000000-0000-4000-8000-000000000000"})
    assert (missing.status_code, missing.json()["code"], reason(missing)) == (
        404, "not_found", "NOT_FOUND")
    wrong_type = await post(h, "Recall", {"tenant": "t", "limit": "many"})
    assert wrong_type.status_code == 400 and wrong_type.json()["code"] == "invalid_argument"
    not_json = await h.post(f"{SERVICE}/Store", content=b"{not json", headers=JSON)
    assert not_json.status_code == 400 and not_json.json()["code"] == "invalid_argument"
    unknown = await post(h, "NoSuchMethod", {})
    assert unknown.status_code == 404


async def test_keys_and_roles_decide_over_http_as_over_grpc(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock,
) -> None:
    keys = tmp_path / "keys.json"
    read = create_key(keys, "a-read", "read", ["a"])[1]
    write = create_key(keys, "a-write", "write", ["a"])[1]
    async with (running_server(tmp_path / "data", embedder, clock, api_keys_file=keys,
                               http_address="127.0.0.1:0") as srv,
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{srv.http_port}") as h):
        body = {"tenant": "a", "content": "a memory of tenant a"}
        none = await post(h, "Store", body)
        assert (none.status_code, none.json()["code"], reason(none)) == (
            401, "unauthenticated", "UNAUTHENTICATED")
        bad = await post(h, "Store", body, {"authorization": "Bearer not-a-key"})
        assert bad.json()["code"] == "unauthenticated"
        reader = await post(h, "Store", body, {"authorization": f"Bearer {read}"})
        assert (reader.status_code, reason(reader)) == (403, "PERMISSION_DENIED")
        ok = await post(h, "Store", body, {"authorization": f"Bearer {write}"})
        assert ok.status_code == 200, ok.text
        other = await post(h, "Recall", {"tenant": "b", "query": "memory"},
                           {"x-api-key": read})
        assert other.json()["code"] in ("permission_denied", "not_found")
        mine = await post(h, "Recall", {"tenant": "a", "query": "memory", "noReinforce": True},
                          {"x-api-key": read})
        assert [r["memory"]["id"] for r in mine.json()["results"]] == [
            ok.json()["memory"]["id"]]


async def test_export_streams_over_connect(
    http: tuple[MemoryServer, httpx.AsyncClient],
) -> None:
    srv, h = http
    for i in range(3):
        await post(h, "Store", {"tenant": "s", "content": f"streamed memory {i}"})
    async with MemoryServiceClient(f"http://127.0.0.1:{srv.http_port}") as client:
        got = [m async for m in client.export(pb.ExportRequest(tenant="s"))]
    assert sorted(e.memory.content for e in got) == [f"streamed memory {i}" for i in range(3)]


async def test_connect_timeout_ms_is_the_calls_deadline(
    http: tuple[MemoryServer, httpx.AsyncClient],
) -> None:
    _, h = http
    body = {"tenant": "d", "query": "a question that needs an encode"}
    gone = await post(h, "Recall", body, {"connect-timeout-ms": "1"})
    assert (gone.status_code, gone.json()["code"]) == (504, "deadline_exceeded")
    for garbage in ("-5", "soon", "1.5"):
        bad = await post(h, "Recall", body, {"connect-timeout-ms": garbage})
        assert (bad.status_code, bad.json()["code"]) == (400, "invalid_argument"), garbage
    ample = await post(h, "Recall", body, {"connect-timeout-ms": "60000"})
    assert ample.status_code == 200


async def test_the_explorer_is_served_with_its_own_scripts_only(
    http: tuple[MemoryServer, httpx.AsyncClient],
) -> None:
    _, h = http
    moved = await h.get("/explorer?tenant=a&q=the%20boat")
    assert moved.status_code == 308 and moved.headers["location"] == "/explorer/?tenant=a&q=the%20boat"
    page = await h.get("/explorer/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"
    assert '<script src="/explorer/explorer.js"' in page.text and "<script>" not in page.text
    for name, kind in (("explorer.js", "text/javascript"), ("explorer.css", "text/css")):
        asset = await h.get(f"/explorer/{name}")
        assert asset.status_code == 200 and asset.headers["content-type"].startswith(kind), name
    assert (await h.get("/explorer/../../etc/passwd")).status_code == 404
    assert (await h.post("/explorer/", content=b"x")).status_code == 405


async def test_every_http_call_leaves_one_access_line_refusals_before_a_method_too(
    http: tuple[MemoryServer, httpx.AsyncClient], caplog: pytest.LogCaptureFixture,
) -> None:
    """A call that reaches a method is logged by the interceptors, as on the gRPC port; one
    refused before (a body Connect cannot read, a wrong content type, an unknown path) is logged
    by the HTTP port, with the same fields, and counted in the method's metric series."""
    _, h = http

    def handled(code: str) -> float:
        return REGISTRY.get_sample_value("grpc_server_handled_total", {
            "grpc_type": "unary", "grpc_service": "celestial.v1.MemoryService",
            "grpc_method": "Store", "grpc_code": code}) or 0.0

    before = handled("INVALID_ARGUMENT")
    with caplog.at_level(logging.INFO, logger="celestial_memory.access_log"):
        ok = await post(h, "Store", {"tenant": "t", "content": "logged once"},
                        {"x-request-id": "req-ok"})
        null = await h.post(f"{SERVICE}/Store", content=b"null",
                            headers={**JSON, "x-request-id": "req-null"})
        unknown = await post(h, "Store", {"content": "x", "contnet": "typo"})
        text = await h.post(f"{SERVICE}/Store", content=b"{}", headers={"content-type": "text/plain"})
        nowhere = await h.post("/celestial.v1.MemoryService/Nope%1b%5B2J", content=b"{}", headers=JSON)
        # A server stream asked with no request at all: its error is in the stream's end.
        empty = await h.post(f"{SERVICE}/Export", content=b"",
                             headers={"content-type": "application/connect+json"})
    assert ok.status_code == 200
    assert null.status_code == 400 and "one JSON object" in null.json()["message"]
    assert unknown.status_code == 400 and "contnet" in unknown.json()["message"]
    assert (text.status_code, nowhere.status_code) == (415, 404)
    lines = [(r.method, r.status, r.request_id)  # type: ignore[attr-defined]
             for r in caplog.records if r.name == "celestial_memory.access_log"]
    assert lines[0] == ("Store", "OK", "req-ok")
    assert lines[1] == ("Store", "INVALID_ARGUMENT", "req-null")
    assert empty.status_code == 200 and empty.content[0] & 0x02
    assert [line[:2] for line in lines[2:]] == [
        ("Store", "INVALID_ARGUMENT"), ("Store", "INVALID_ARGUMENT"), ("?", "UNIMPLEMENTED"),
        ("Export", "UNIMPLEMENTED")]
    assert all("\x1b" not in r.getMessage() for r in caplog.records)
    assert handled("INVALID_ARGUMENT") == before + 3  # the wrong content type too


async def test_the_start_up_log_names_the_explorer_and_the_model_but_no_key(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="celestial_memory"):
        async with running_server(tmp_path, embedder, clock, http_address="127.0.0.1:0",
                                  llm_base_url="http://me:hunter2@127.0.0.1:9/v1?key=hunter2",
                                  llm_model="m", llm_api_key="sk-hunter2") as srv:
            lines = [r.getMessage() for r in caplog.records]
            async with httpx.AsyncClient() as h:
                explorer = f"http://127.0.0.1:{srv.http_port}/explorer/"
                assert (await h.get(explorer)).status_code == 200
    assert any(line.endswith(f"the explorer: {explorer}") for line in lines)
    assert "model endpoint http://127.0.0.1:9/v1, model m, with an API key: asked for " \
           "reflection" in lines
    assert not any("hunter2" in line for line in lines)
