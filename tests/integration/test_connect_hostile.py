"""The HTTP port under requests no client library would send: each is a clear 4xx (a Connect
error where the request reached Connect), never a 5xx, and the server stays healthy; request
heads trickled to hold connections open are closed."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import httpx
import pytest
from celestial_memory.api.connect import guards
from celestial_memory.api.connect import server as connect_server
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.clock import ManualClock
from celestial_memory.domain.requests import NewMemory
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.integration.conftest import running_server
from tests.processes import finished
from tests.rss import peak_rss_growth

STORE = "/celestial.v1.MemoryService/Store"
JSON = {"content-type": "application/json"}
ALLOWED = "https://app.example"


@pytest.fixture
async def http(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> AsyncIterator[tuple[MemoryServer, httpx.AsyncClient]]:
    async with (running_server(tmp_path, embedder, clock, http_address="127.0.0.1:0",
                               http_cors_origins=[ALLOWED]) as srv,
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{srv.http_port}",
                                  timeout=60) as h):
        yield srv, h
        async with grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as ch:
            health = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest())
        assert health.status == health_pb2.HealthCheckResponse.SERVING


async def test_bad_bodies_are_refused_with_connect_errors(
    http: tuple[MemoryServer, httpx.AsyncClient],
) -> None:
    _, h = http
    cases = {
        "unknown field": (json.dumps({"content": "x", "contnet": "typo"}), JSON),
        "wrong type": (json.dumps({"content": 42}), JSON),
        "not JSON": ("{\"content\": ", JSON),
        "a JSON list": ("[1, 2]", JSON),
        "bad UTF-8": (b"{\"content\": \"\xff\xfe\"}", JSON),
    }
    for name, (body, headers) in cases.items():
        resp = await h.post(STORE, content=body, headers=headers)
        assert resp.status_code == 400, (name, resp.status_code, resp.text)
        assert resp.json()["code"] == "invalid_argument", name
    big = await h.post(STORE, content=b'{"content": "' + b"a" * (64 << 20) + b'"}', headers=JSON)
    assert 400 <= big.status_code < 500 and big.json()["code"] == "resource_exhausted"


async def test_wrong_content_types_and_methods_are_4xx(
    http: tuple[MemoryServer, httpx.AsyncClient],
) -> None:
    _, h = http
    body = json.dumps({"content": "hello"})
    for headers in ({}, {"content-type": "text/plain"}, {"content-type": "application/xml"}):
        resp = await h.post(STORE, content=body, headers=headers)
        assert resp.status_code == 415, (headers, resp.status_code)
        # Each refusal says what to send instead, as a Connect error (curl shows it).
        assert resp.json()["code"] == "invalid_argument"
        assert "send Content-Type: application/json" in resp.json()["message"]
    assert "none was sent" in (await h.post(STORE, content=body)).json()["message"]
    got = await h.get(STORE)
    assert got.status_code == 405 and got.headers["allow"] == "POST"
    assert got.json() == {"code": "invalid_argument", "message": "a method takes POST with "
                          "Content-Type: application/json, not GET"}
    nothing = await h.post("/celestial.v1.MemoryService/Nothing", content=body, headers=JSON)
    assert nothing.status_code == 404 and nothing.json()["code"] == "unimplemented"
    assert "no method 'Nothing'" in nothing.json()["message"]
    elsewhere = await h.get("/elsewhere%1b%5B2J")
    assert elsewhere.status_code == 404 and elsewhere.json()["code"] == "not_found"
    assert "the explorer is at /explorer/" in elsewhere.json()["message"]
    assert "\x1b" not in elsewhere.text  # escaped, not sent to the caller's terminal
    explorer = await h.post("/explorer/", content=body, headers=JSON)
    assert explorer.status_code == 405 and "GET" in explorer.json()["message"]
    assert explorer.json()["message"].endswith("not POST")
    assert (await h.head("/elsewhere")).content == b""  # a HEAD answer stays bodiless
    grpc_kind = await h.post(STORE, content=b"", headers={"content-type": "application/grpc"})
    assert grpc_kind.status_code == 415 and "gRPC port" in grpc_kind.json()["message"]


async def test_cors_answers_only_the_origins_it_is_told(
    http: tuple[MemoryServer, httpx.AsyncClient],
) -> None:
    _, h = http
    asks = {"access-control-request-method": "POST",
            "access-control-request-headers": "content-type,authorization"}
    foreign = await h.options(STORE, headers={"origin": "https://evil.example", **asks})
    assert foreign.status_code == 400
    assert "access-control-allow-origin" not in foreign.headers
    allowed = await h.options(STORE, headers={"origin": ALLOWED, **asks})
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == ALLOWED
    # A simple request from a foreign origin runs (no preflight), but its answer carries no
    # allow-origin header, so the browser keeps it from the page.
    simple = await h.post(STORE, content=json.dumps({"content": "from a page"}),
                          headers={**JSON, "origin": "https://evil.example"})
    assert "access-control-allow-origin" not in simple.headers


async def test_huge_heads_are_refused_and_pipelined_requests_answered(
    http: tuple[MemoryServer, httpx.AsyncClient],
) -> None:
    srv, _ = http

    def raw(payload: bytes) -> bytes:
        """What the port answers to ``payload`` until it closes the connection; one it reset
        while the payload was still being sent answers what was read before."""
        out = b""
        with socket.create_connection(("127.0.0.1", srv.http_port), timeout=30) as s:
            try:
                s.sendall(payload)
                while chunk := s.recv(65536):
                    out += chunk
            except (ConnectionResetError, BrokenPipeError):
                pass
        return out

    huge = (b"POST " + STORE.encode() + b" HTTP/1.1\r\nhost: x\r\nx-big: " + b"a" * (1 << 20)
            + b"\r\nconnection: close\r\n\r\n")
    answer = await asyncio.to_thread(raw, huge)
    # Refused: a 4xx status line, or the connection closed before the head was read whole.
    assert not answer or answer.split(b" ", 2)[1].startswith(b"4"), answer[:200]
    body = json.dumps({"tenant": "p", "content": "pipelined"}).encode()

    def request(last: bool) -> bytes:
        return (b"POST " + STORE.encode() + b" HTTP/1.1\r\nhost: 127.0.0.1\r\n"
                b"content-type: application/json\r\ncontent-length: " + str(len(body)).encode()
                + (b"\r\nconnection: close" if last else b"") + b"\r\n\r\n" + body)

    # Three requests in one write, the last asking the server to close after it.
    answers = await asyncio.to_thread(raw, request(False) * 2 + request(True))
    assert answers.count(b"HTTP/1.1 200") == 3, answers[:500]


async def test_stalled_request_heads_are_closed_and_the_port_keeps_answering(
    http: tuple[MemoryServer, httpx.AsyncClient], monkeypatch: pytest.MonkeyPatch,
) -> None:
    srv, h = http
    monkeypatch.setattr(guards, "HEAD_TIMEOUT_S", 0.5)

    def stall() -> bytes:
        """Half a request line, then nothing: what the port does with the connection."""
        with socket.create_connection(("127.0.0.1", srv.http_port), timeout=60) as s:
            s.sendall(b"POST " + STORE.encode()[:12])
            try:
                return s.recv(100)  # b"" once the server closes it
            except ConnectionResetError:
                return b""

    stalled = [asyncio.to_thread(stall) for _ in range(20)]
    ok = await h.post(STORE, content=json.dumps({"content": "still answering"}), headers=JSON)
    assert ok.status_code == 200
    assert await asyncio.gather(*stalled) == [b""] * 20  # closed, not left open


async def test_bad_stream_items_gRPC_content_types_and_foreign_hosts_are_4xx(
    http: tuple[MemoryServer, httpx.AsyncClient],
) -> None:
    _, h = http
    stream = {"content-type": "application/connect+json"}
    envelopes = {
        "declares 4 GB": b"\x00\xff\xff\xff\xff{}",
        "truncated": b"\x00\x00\x00\x00\x16{\"content\": \"x\"}",
        "bad JSON": b"\x00\x00\x00\x00\x05{oops",
    }
    for name, body in envelopes.items():
        resp = await h.post("/celestial.v1.MemoryService/StoreBatch", content=body,
                            headers=stream)
        # A stream's answer is enveloped: flags, a 4-byte length, then the end message.
        end = json.loads(resp.content[5:5 + int.from_bytes(resp.content[1:5], "big")])
        assert end["error"]["code"] in ("invalid_argument", "resource_exhausted"), (name, end)
    grpc_kind = await h.post(STORE, content=b"\x00\x00\x00\x00\x00",
                             headers={"content-type": "application/grpc"})
    assert grpc_kind.status_code == 415
    rebound = await h.post(STORE, content=json.dumps({"content": "x"}),
                           headers={**JSON, "host": "attacker.example:8080"})
    assert rebound.status_code == 400


def test_the_port_socket_says_it_is_tcp_so_answers_go_out_at_once() -> None:
    # asyncio turns Nagle off (TCP_NODELAY) only on sockets created as IPPROTO_TCP; without it
    # a keep-alive client waited 40 ms a call on its own delayed ACK.
    sock = connect_server._listening("127.0.0.1:0")
    try:
        assert sock.proto == socket.IPPROTO_TCP
    finally:
        sock.close()


def _slow_body(port: int, path: str, kind: bytes, first: bytes, length: int) -> bytes:
    """A whole head, the first bytes of the body it announces, then nothing: the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: "
                  + kind + b"\r\ncontent-length: " + str(length).encode() + b"\r\n\r\n" + first)
        answer = b""
        while chunk := s.recv(4096):
            answer += chunk
        return answer  # all of it: the server closed the connection


async def test_slow_bodies_get_408_and_the_port_keeps_answering(
    http: tuple[MemoryServer, httpx.AsyncClient], monkeypatch: pytest.MonkeyPatch,
) -> None:
    srv, h = http
    monkeypatch.setattr(guards, "BODY_TIMEOUT_S", 0.5)
    before = srv.service.stats("default").total
    unary = [asyncio.to_thread(_slow_body, srv.http_port, STORE, b"application/json",
                               b'{"content": "slo', 1000) for _ in range(20)]
    ok = await h.post(STORE, content=json.dumps({"content": "still answering"}), headers=JSON)
    assert ok.status_code == 200
    for answer in await asyncio.gather(*unary):
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408"), answer[:300]
        assert json.loads(body)["code"] == "deadline_exceeded"
    # Nothing of a refused body was stored: only the answered Store.
    assert srv.service.stats("default").total == before + 1


def _unchunked(body: bytes) -> bytes:
    out = b""
    while body:
        size, _, rest = body.partition(b"\r\n")
        n = int(size, 16)
        if n == 0:
            return out
        out, body = out + rest[:n], rest[n + 2:]
    return out


async def test_a_stalled_client_stream_ends_at_the_stream_idle_bound(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One whole item, then a pause inside the second envelope: the call ends with
    deadline_exceeded once the stream has sent nothing for ``stream_idle_s`` (the servicer's
    bound answers first; the HTTP port's own is its backstop), nothing of it is stored, and the
    connection is closed."""
    monkeypatch.setattr(guards, "HEAD_TIMEOUT_S", 1.0)
    item = json.dumps({"content": "streamed then stalled"}).encode()
    envelope = b"\x00" + len(item).to_bytes(4, "big") + item
    async with running_server(tmp_path, embedder, clock, http_address="127.0.0.1:0",
                              stream_idle_s=0.5) as srv:
        answers = await asyncio.gather(*(asyncio.to_thread(
            _slow_body, srv.http_port, "/celestial.v1.MemoryService/StoreBatch",
            b"application/connect+json", envelope + b"\x00\x00", 10_000) for _ in range(5)))
        for answer in answers:
            head, _, body = answer.partition(b"\r\n\r\n")
            if head.startswith(b"HTTP/1.1 408"):
                code = json.loads(body)["code"]
            else:  # the servicer's answer: one end-of-stream envelope, chunked
                assert head.startswith(b"HTTP/1.1 200"), answer[:300]
                body = _unchunked(body)
                assert body[0] & 0x02, body[:100]
                code = json.loads(body[5:5 + int.from_bytes(body[1:5], "big")])["error"]["code"]
            assert code == "deadline_exceeded", answer[:300]
        assert srv.service.stats("default").total == 0


LOAD = f"""
import asyncio, sys, httpx
body = b'{{"content": "' + b"a" * (16 << 20) + b'"}}'
async def one(url):
    async with httpx.AsyncClient(base_url=url, timeout=120) as c:
        try:
            return (await c.post("{STORE}", content=body,
                                 headers={{"content-type": "application/json"}})).status_code
        except httpx.TransportError:
            return 0  # the server may close once it has refused, before all was sent
async def main():
    print(*await asyncio.gather(*(one(sys.argv[1]) for _ in range(64))))
asyncio.run(main())
"""


async def test_many_connections_with_large_bodies_keep_memory_bounded(
    http: tuple[MemoryServer, httpx.AsyncClient],
) -> None:
    """Sixty-four callers at once (another process), each sending 16 MiB to a port that reads at
    most the message limit (4 MiB) of each: every one is refused, and the server grows by far
    less than what was sent (1 GiB)."""
    srv, _ = http
    with peak_rss_growth() as growth:
        load = await asyncio.create_subprocess_exec(
            sys.executable, "-c", LOAD, f"http://127.0.0.1:{srv.http_port}",
            stdout=asyncio.subprocess.PIPE)
        # Generous: the load takes seconds, and its callers' own timeouts are 120 s.
        out, _ = await finished(load, 240)
    codes = [int(c) for c in out.split()]
    assert len(codes) == 64 and all(code in (0, 429) for code in codes), codes
    assert codes.count(429) >= 32, codes  # refused with an answer, not only cut off
    assert growth[0] < 640 << 20, f"grew by {growth[0] >> 20} MiB"


def _idle(port: int, source: str = "127.0.0.1") -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def _call_from(port: int, source: str) -> bytes:
    """One Store from ``source`` (any 127.x address is this machine), its answer's first line."""
    with _idle(port, source) as s:
        body = json.dumps({"content": f"from {source}"}).encode()
        s.sendall(b"POST " + STORE.encode() + b" HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: "
                  b"application/json\r\nconnection: close\r\ncontent-length: "
                  + str(len(body)).encode() + b"\r\n\r\n" + body)
        s.settimeout(60)
        answer = b""
        while chunk := s.recv(4096):
            answer += chunk
        return answer.split(b"\r\n", 1)[0]


async def test_idle_connections_from_one_address_fill_only_its_own_share(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock,
) -> None:
    async with running_server(tmp_path, embedder, clock, http_address="127.0.0.1:0",
                              http_max_connections=40,
                              http_max_connections_per_address=8) as srv:
        port = srv.http_port
        held = [_idle(port) for _ in range(8)]
        try:
            assert await asyncio.to_thread(_call_from, port, "127.0.0.1") == (
                b"HTTP/1.1 503 Service Unavailable")
            assert await asyncio.to_thread(_call_from, port, "127.0.0.2") == b"HTTP/1.1 200 OK"
        finally:
            for s in held:
                s.close()
        # Closed connections give their places back (the server sees the close soon after).
        for _ in range(100):
            if (first := await asyncio.to_thread(_call_from, port, "127.0.0.1")).endswith(b"OK"):
                break
            await asyncio.sleep(0.05)
        assert first == b"HTTP/1.1 200 OK"


async def test_a_time_past_the_years_json_holds_is_held_at_their_end(
    http: tuple[MemoryServer, httpx.AsyncClient],
) -> None:
    """A memory created at the end of 9999 moves zones hours later, past what a Timestamp (and
    JSON) can write: every answer naming it still reads."""
    _, h = http
    stored = await h.post(STORE, json={"tenant": "far", "content": "far future",
                                       "createdAt": "9999-12-31T23:59:59Z"})
    assert stored.status_code == 200, stored.text
    assert stored.json()["memory"]["nextMove"]["at"] == "9999-12-31T23:59:59Z"
    for method, body in (("List", {"tenant": "far"}), ("Recent", {"tenant": "far"}),
                         ("Recall", {"tenant": "far", "query": "future", "noReinforce": True})):
        answer = await h.post(f"/celestial.v1.MemoryService/{method}", json=body)
        assert answer.status_code == 200, (method, answer.text)


async def test_forwarded_headers_do_not_name_the_peer(
    http: tuple[MemoryServer, httpx.AsyncClient], caplog: pytest.LogCaptureFixture,
) -> None:
    _, h = http
    with caplog.at_level(logging.INFO):
        await h.post(STORE, json={"content": "who sent this"},
                     headers={"x-forwarded-for": "6.6.6.6", "forwarded": "for=6.6.6.6"})
    assert not [r for r in caplog.records if "6.6.6.6" in r.getMessage()
                or "6.6.6.6" in str(getattr(r, "peer", ""))]


async def test_a_client_that_stops_reading_an_export_does_not_hold_the_shutdown(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock,
) -> None:
    cm = running_server(tmp_path, embedder, clock, http_address="127.0.0.1:0", grace_seconds=1)
    srv = await cm.__aenter__()
    try:
        await asyncio.to_thread(srv.service.store_batch, "bulk", [
            NewMemory(content=f"memory {i} " + "x" * 4000) for i in range(300)])
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", srv.http_port))
        body = json.dumps({"tenant": "bulk"}).encode()
        s.sendall(b"POST /celestial.v1.MemoryService/Export HTTP/1.1\r\nhost: 127.0.0.1\r\n"
                  b"content-type: application/connect+json\r\ncontent-length: "
                  + str(5 + len(body)).encode() + b"\r\n\r\n\x00"
                  + len(body).to_bytes(4, "big") + body)
        await asyncio.sleep(1)  # the answer fills the socket's buffers; nothing reads it
    finally:
        # Without a bound the stop waited on that client for as long as it kept the socket.
        await asyncio.wait_for(cm.__aexit__(None, None, None), timeout=120)
        s.close()


async def test_insecure_no_auth_serves_every_host_name(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock,
) -> None:
    """Loopback without keys keeps foreign host names out (DNS rebinding); a server told to
    serve everyone without keys (--insecure-no-auth) keeps none out."""
    async with (running_server(tmp_path, embedder, clock, http_address="127.0.0.1:0",
                               insecure_no_auth=True) as srv,
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{srv.http_port}") as h):
        answer = await h.post(STORE, json={"content": "x"}, headers={"host": "memory.lan:8080"})
        assert answer.status_code == 200, answer.text
