"""Bounds at the edges a hostile caller reaches first: the MCP HTTP server's Host and Origin
checks on any loopback address, undecodable bytes to every service the gRPC port serves, the
tenant's length and characters, and tenant names on the open /metrics."""

from __future__ import annotations

import asyncio
import hashlib
import io
import logging
import socket
import sys
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.clock import ManualClock
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2
from grpc_status import rpc_status

from tests.integration.conftest import running_server
from tests.processes import running

CELESTIAL = str(Path(sys.executable).parent / "celestial")
UNDECODABLE = b"\xff\xff\xff"  # a tag whose varint never ends


@pytest.fixture
async def channel(server: MemoryServer) -> AsyncIterator[grpc.aio.Channel]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as ch:
        yield ch


def bad_fields(err: grpc.aio.AioRpcError) -> list[str]:
    """The fields a refusal's BadRequest detail names."""
    status = rpc_status.from_call(err)  # type: ignore[arg-type]
    assert status is not None
    out: list[str] = []
    for d in status.details:
        if d.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            d.Unpack(bad)
            out += [v.field for v in bad.field_violations]
    return out


# --- MCP over HTTP on a loopback address other than 127.0.0.1 -------------------------------

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "edge-test", "version": "0"}}}


async def _post_initialize(url: str, headers: dict[str, str]) -> int:
    import httpx  # with the mcp extra

    async with httpx.AsyncClient(trust_env=False, timeout=30) as http:
        r = await http.post(url, json=INITIALIZE, headers={
            "Accept": "application/json, text/event-stream", **headers})
        return r.status_code


async def test_mcp_http_on_another_loopback_address_refuses_rebound_hosts_and_origins(
    server: MemoryServer,
) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    host = "127.0.0.2"  # Linux routes the whole of 127.0.0.0/8 to the loopback interface
    with socket.socket() as s:
        s.bind((host, 0))
        port = s.getsockname()[1]
    proc = await asyncio.create_subprocess_exec(
        CELESTIAL, "--target", f"127.0.0.1:{server.port}", "--tenant", "mcp-edge", "mcp",
        "--transport", "http", "--host", host, "--port", str(port),
        stderr=asyncio.subprocess.PIPE)
    url = f"http://{host}:{port}/mcp"
    async with running(proc):
        for _ in range(200):  # until it listens
            try:
                _, w = await asyncio.open_connection(host, port)
                w.close()
                break
            except OSError:
                await asyncio.sleep(0.1)
        async with Client(url, read_timeout_seconds=60) as mcp:  # Host: 127.0.0.2:<port>
            saved = await mcp.call_tool("memory_save", {"content": "The vault code is 4711"})
            assert not saved.is_error, saved.content
            found = await mcp.call_tool("memory_search", {"query": "vault code"})
            assert "4711" in found.content[0].text

        # A page on evil.example whose name now resolves to 127.0.0.2 (DNS rebinding).
        assert await _post_initialize(url, {"Host": f"evil.example:{port}"}) == 421
        assert await _post_initialize(url, {"Host": "evil.example"}) == 421
        assert await _post_initialize(url, {"Host": f"{host}:{port + 1}"}) == 421
        # A page elsewhere posting to the loopback address itself.
        assert await _post_initialize(url, {"Origin": "http://evil.example"}) == 403
        assert await _post_initialize(url, {"Host": f"localhost:{port}"}) == 200
        assert await _post_initialize(
            url, {"Host": f"{host}:{port}", "Origin": "http://localhost:3000"}) == 200


# --- undecodable bytes to reflection and health ---------------------------------------------

REFLECTION = ("grpc.reflection.v1alpha.ServerReflection", "grpc.reflection.v1.ServerReflection")


@pytest.mark.parametrize("service", REFLECTION)
async def test_undecodable_bytes_to_reflection_answer_invalid_argument(
    channel: grpc.aio.Channel, service: str,
) -> None:
    call = channel.stream_stream(f"/{service}/ServerReflectionInfo")  # bytes go as they are
    with pytest.raises(grpc.aio.AioRpcError) as err:
        [r async for r in call(iter([UNDECODABLE]), timeout=30)]
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    message = err.value.details() or ""
    assert "_Undecodable" not in message and "attribute" not in message
    assert "not a valid protobuf message" in message

    # A stream answers what came before the item that does not parse, then refuses.
    good = reflection_pb2.ServerReflectionRequest(list_services="").SerializeToString()
    answers: list[bytes] = []
    with pytest.raises(grpc.aio.AioRpcError) as err:
        async for r in call(iter([good, UNDECODABLE, good]), timeout=30):
            answers.append(r)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert len(answers) == 1
    listed = reflection_pb2.ServerReflectionResponse.FromString(answers[0])
    assert "celestial.v1.MemoryService" in {s.name for s in listed.list_services_response.service}


async def test_undecodable_bytes_to_health_answer_invalid_argument(
    channel: grpc.aio.Channel,
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await channel.unary_unary("/grpc.health.v1.Health/Check")(UNDECODABLE, timeout=30)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.aio.AioRpcError) as err:
        [r async for r in channel.unary_stream("/grpc.health.v1.Health/Watch")(
            UNDECODABLE, timeout=30)]
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    ok = await channel.unary_unary("/grpc.health.v1.Health/Check")(
        health_pb2.HealthCheckRequest().SerializeToString(), timeout=30)
    assert health_pb2.HealthCheckResponse.FromString(ok).status == (
        health_pb2.HealthCheckResponse.SERVING)


# --- the tenant's length and characters -----------------------------------------------------

async def test_a_megabyte_tenant_is_refused_before_anything_is_stored_or_logged(
    server: MemoryServer, channel: grpc.aio.Channel,
) -> None:
    stub = pb_grpc.MemoryServiceStub(channel)
    before = await stub.Stats(pb.StatsRequest())
    huge = "u" * 1_000_000
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    access = logging.getLogger("celestial_memory.access_log")
    access.addHandler(handler)
    try:
        for call in (stub.Store(pb.StoreRequest(tenant=huge, content="a fact worth keeping")),
                     stub.Recall(pb.RecallRequest(tenant=huge, query="fact")),
                     stub.Stats(pb.StatsRequest(tenant=huge))):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await call
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert bad_fields(err.value) == ["tenant"]
            assert len(err.value.details() or "") < 200
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.StoreBatch(iter([pb.StoreRequest(tenant=huge, content="batched fact")]))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        access.removeHandler(handler)
    after = await stub.Stats(pb.StatsRequest())
    assert after.total == before.total
    assert all(len(t) <= 128 for t in await asyncio.to_thread(server.service.tenants))
    lines = out.getvalue().splitlines()
    assert len(lines) >= 4 and max(len(line) for line in lines) < 2048


async def test_tenant_names_at_the_bound_and_in_any_script_are_kept_longer_or_blank_refused(
    server: MemoryServer, channel: grpc.aio.Channel,
) -> None:
    stub = pb_grpc.MemoryServiceStub(channel)
    forged = "a\nRecall OK admin 1.0 ms"  # kept (ids and the store take it), but logged quoted
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(message)s"))  # the text format's message
    access = logging.getLogger("celestial_memory.access_log")
    access.addHandler(handler)
    try:
        for tenant in ("t" * 128, "회사 팀", "a/b c.d-e_f", forged):
            r = await stub.Store(pb.StoreRequest(tenant=tenant, content="kept under it"))
            assert r.created
            assert (await stub.Stats(pb.StatsRequest(tenant=tenant))).total == 1
    finally:
        access.removeHandler(handler)
    lines = out.getvalue().splitlines()
    assert len(lines) == 8  # one line per call: the line break did not make another
    assert any("회사 팀" in line for line in lines)
    assert not any(line.startswith("Recall") for line in lines)
    for tenant in ("t" * 129, "   ", "\t"):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Store(pb.StoreRequest(tenant=tenant, content="never stored"))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, repr(tenant)
        assert bad_fields(err.value) == ["tenant"]
    assert "never stored" not in {
        m.content for t in await asyncio.to_thread(server.service.tenants)
        for page in server.service.transfer.export_pages(t) for m in page}


# --- tenant names on /metrics ---------------------------------------------------------------

def _metrics(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()


@pytest.mark.parametrize("hide", [True, False])
async def test_metrics_label_tenants_by_a_hash_when_told(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock, hide: bool,
) -> None:
    tenant = "acme-secret-project"
    hashed = "t-" + hashlib.sha256(tenant.encode()).hexdigest()[:12]
    async with running_server(tmp_path, embedder, clock, metrics_address="127.0.0.1:0",
                              metrics_zone_refresh_s=0, metrics_hide_tenants=hide) as srv:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as ch:
            await pb_grpc.MemoryServiceStub(ch).Store(
                pb.StoreRequest(tenant=tenant, content="quarterly numbers are in"))
        assert srv.ops is not None
        text = await asyncio.to_thread(_metrics, srv.ops.port)
    zone_lines = [line for line in text.splitlines() if line.startswith("celestial_zone_memories{")]
    assert zone_lines
    if hide:
        assert tenant not in text
        assert f'tenant="{hashed}"' in text
    else:
        assert f'tenant="{tenant}"' in text and hashed not in text
