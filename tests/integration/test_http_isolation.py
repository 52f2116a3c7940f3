"""The HTTP port cannot make other callers wait on its work: a call without a valid key is
refused from its head, before its body is read; large JSON is converted in worker processes;
a request of absurd size is refused before any conversion; a client's framing error is logged
as the client's."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import httpx
import pytest
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from celestial_memory.access.keys import create_key
from celestial_memory.api.connect.conversion import MAX_VALUES, Converter, Encoded
from celestial_memory.api.grpc.converters import MAX_LABELS, MAX_LISTED
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.clock import ManualClock
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from google.protobuf import json_format

from tests.integration.conftest import running_server

SERVICE = "/celestial.v1.MemoryService"


class Keyed:
    def __init__(self, srv: MemoryServer, write: str, read: str) -> None:
        self.srv, self.write, self.read = srv, write, read


@pytest.fixture(params=["process", "thread"])
async def keyed(request: pytest.FixtureRequest, tmp_path: Path,
                embedder: SentenceTransformerEmbedder,
                clock: ManualClock) -> AsyncIterator[Keyed]:
    keys = tmp_path / "keys.json"
    write = create_key(keys, "a-write", "write", ["a"])[1]
    read = create_key(keys, "a-read", "read", ["a"])[1]
    async with running_server(tmp_path / "data", embedder, clock, api_keys_file=keys,
                              http_address="127.0.0.1:0",
                              http_conversion=request.param) as srv:
        yield Keyed(srv, write, read)


def _head_only(port: int, method: str, content_type: str, length: int,
               headers: str = "") -> bytes:
    """A request head announcing ``length`` bytes of body, and no body at all: the answer
    comes back only if the server did not need the body to give it."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall((f"POST {SERVICE}/{method} HTTP/1.1\r\nhost: localhost\r\n"
                      f"content-type: {content_type}\r\ncontent-length: {length}\r\n"
                      f"{headers}\r\n").encode())
        answer = b""
        while b"\r\n\r\n" not in answer or not _complete(answer):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
        return answer


def _complete(answer: bytes) -> bool:
    head, _, body = answer.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


def _body(answer: bytes) -> bytes:
    return answer.partition(b"\r\n\r\n")[2]


async def test_a_call_without_a_valid_key_is_refused_before_its_body_is_read(
        keyed: Keyed) -> None:
    port = keyed.srv.http_port
    none = await asyncio.to_thread(_head_only, port, "Store", "application/json", 4_000_000)
    assert none.startswith(b"HTTP/1.1 401"), none[:200]
    assert json.loads(_body(none))["code"] == "unauthenticated"
    wrong = await asyncio.to_thread(_head_only, port, "Store", "application/json", 4_000_000,
                                    "authorization: Bearer not-a-key\r\n")
    assert json.loads(_body(wrong))["code"] == "unauthenticated"
    # A key without the method's role: refused from the head too.
    reader = await asyncio.to_thread(_head_only, port, "Store", "application/json", 4_000_000,
                                     f"x-api-key: {keyed.read}\r\n")
    assert reader.startswith(b"HTTP/1.1 403"), reader[:200]
    # A stream's refusal is its end message, as Connect sends a stream's error.
    stream = await asyncio.to_thread(_head_only, port, "StoreBatch",
                                     "application/connect+json", 4_000_000)
    assert stream.startswith(b"HTTP/1.1 200"), stream[:200]
    end = _body(stream)
    assert end[0] == 2
    assert json.loads(end[5:5 + struct.unpack(">I", end[1:5])[0]])["error"]["code"] == \
        "unauthenticated"
    # The port goes on serving, and a keyed call is admitted once (its rate taken once).
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as h:
        ok = await h.post(f"{SERVICE}/Store", json={"tenant": "a", "content": "kept"},
                          headers={"x-api-key": keyed.write})
        assert ok.status_code == 200, ok.text


async def test_large_json_is_converted_off_the_loop_and_means_what_it_says(
        keyed: Keyed) -> None:
    dim = 384
    vector = [((i * 37) % 101) / 101 - 0.5 for i in range(dim)]
    headers = {"x-api-key": keyed.write}
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{keyed.srv.http_port}",
                                 timeout=60) as h:
        stored = await h.post(f"{SERVICE}/Store", headers=headers, json={
            "tenant": "a", "content": "a memory with its own vector", "vector": vector,
            "tags": [f"t{i}" for i in range(8)]})
        assert stored.status_code == 200, stored.text
        memory_id = stored.json()["memory"]["id"]
        assert stored.json()["memory"]["tags"] == [f"t{i}" for i in range(8)]
        # Bad JSON past the inline size is refused as bad JSON is.
        bad = await h.post(f"{SERVICE}/Store", headers={**headers,
                                                        "content-type": "application/json"},
                           content=json.dumps({"tenant": "a", "content": "x",
                                               "vector": vector, "nosuchfield": 1}).encode())
        assert bad.status_code == 400 and bad.json()["code"] == "invalid_argument"
        assert "nosuchfield" in bad.json()["message"]
        huge = await h.post(f"{SERVICE}/Store", headers={**headers,
                                                         "content-type": "application/json"},
                            content=json.dumps({"tenant": "a", "content": "x",
                                                "tags": ["t"] * (MAX_VALUES + 1)}).encode())
        assert huge.status_code == 429 and huge.json()["code"] == "resource_exhausted"
        assert "application/proto" in huge.json()["message"]
        # An Export over Connect JSON (its items printed by the workers) says what gRPC says.
        envelope = json.dumps({"tenant": "a"}).encode()
        exported = await h.post(
            f"{SERVICE}/Export", content=struct.pack(">BI", 0, len(envelope)) + envelope,
            headers={**headers, "content-type": "application/connect+json"})
        assert exported.status_code == 200
        items, data = [], exported.content
        while data:
            flags, size = struct.unpack(">BI", data[:5])
            if not flags & 2:
                items.append(json.loads(data[5:5 + size]))
            data = data[5 + size:]
    [item] = [i for i in items if i.get("memory", {}).get("id") == memory_id]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{keyed.srv.port}") as channel:
        got = [e async for e in pb_grpc.MemoryServiceStub(channel).Export(
            pb.ExportRequest(tenant="a"), metadata=(("x-api-key", keyed.write),))
            if e.memory.id == memory_id]
    assert len(item["vector"]) == dim
    assert item["vector"] == pytest.approx(list(got[0].vector), abs=1e-6)


async def test_absurd_repeated_fields_are_refused_before_they_are_converted(
        tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock) -> None:
    async with (running_server(tmp_path, embedder, clock) as srv,
                grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}",
                                          options=[("grpc.max_send_message_length", 16 << 20)])
                as channel):
        stub = pb_grpc.MemoryServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as tags:
            await stub.Store(pb.StoreRequest(tenant="a", content="x",
                                             tags=["t"] * (MAX_LABELS + 1)))
        assert tags.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert f"more than {MAX_LABELS} values" in (tags.value.details() or "")
        with pytest.raises(grpc.aio.AioRpcError) as vector:
            await stub.Recall(pb.RecallRequest(tenant="a", query_vector=[0.5] * (MAX_LISTED + 1)))
        assert vector.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "query_vector" in (vector.value.details() or "")


async def test_a_compressed_flag_without_compression_is_logged_as_the_clients_error(
        tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="celestial_memory.access_log")
    envelope = json.dumps({"tenant": "a", "content": "x"}).encode()
    framed = struct.pack(">BI", 1, len(envelope)) + envelope  # flagged compressed: it is not
    async with (running_server(tmp_path, embedder, clock, http_address="127.0.0.1:0") as srv,
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{srv.http_port}",
                                  timeout=60) as h):
        for method, encoding in [("StoreBatch", None), ("Export", None),
                                 ("StoreBatch", "identity")]:
            headers = {"content-type": "application/connect+json"}
            if encoding:
                headers["connect-content-encoding"] = encoding
            answer = await h.post(f"{SERVICE}/{method}", content=framed, headers=headers)
            data = answer.content
            end = json.loads(data[5:5 + struct.unpack(">I", data[1:5])[0]])
            assert end["error"]["code"] == "internal"  # what the Connect spec prescribes
    lines = [r.getMessage() for r in caplog.records if r.name == "celestial_memory.access_log"]
    framing = [line for line in lines if line.startswith(("StoreBatch", "Export"))]
    assert len(framing) == 3, lines
    assert all(" INVALID_ARGUMENT " in line for line in framing), framing


async def test_a_dead_conversion_worker_is_replaced_and_none_outlives_its_converter() -> None:
    converter = Converter("process", workers=1)
    try:
        message = pb.ExportedMemory(vector=[0.25] * 512)
        printed = await converter.print(message)
        assert isinstance(printed, Encoded)
        assert json.loads(printed.data)["vector"] == [0.25] * 512
        worker = converter._idle.get_nowait()  # the one worker, idle after its job
        assert worker is not None
        converter._idle.put_nowait(worker)
        worker._process.kill()
        await worker._process.wait()
        parsed = await converter.parse(json.dumps({"content": "y", "tags": ["a"] * 300}).encode(),
                                       pb.StoreRequest())
        assert parsed.content == "y" and list(parsed.tags) == ["a"] * 300
        bad = json.dumps({"content": "y", "tags": ["a"] * 300, "nosuch": 1}).encode()
        with pytest.raises(ConnectError) as refused:
            await converter.parse(bad, pb.StoreRequest())
        assert refused.value.code == Code.INVALID_ARGUMENT and "nosuch" in refused.value.message
        assert len(_workers_of(os.getpid())) == 1  # the one that replaced the dead one
    finally:
        await converter.close()
    assert _workers_of(os.getpid()) == []


async def test_many_nearly_empty_messages_are_printed_off_the_loop() -> None:
    """JSON prints every field, zero ones too: 204 memories holding only an id are 8 KB of
    binary (inline by size) but about 116 KB of JSON and 8 ms of printing, so the count of
    nested messages sends them to a worker; a small answer is still printed where it is."""
    converter = Converter("process", workers=1)
    try:
        many = pb.ListResponse(memories=[pb.Memory(id=f"{i:036d}") for i in range(204)])
        assert many.ByteSize() <= 8192
        printed = await converter.print(many)
        assert isinstance(printed, Encoded)
        assert json.loads(printed.data) == json.loads(json_format.MessageToJson(
            many, always_print_fields_with_no_presence=True))
        assert json.loads(printed.data)["memories"][0]["pinned"] is False  # zeros printed
        stats = pb.StatsResponse(zones=[pb.ZoneStats(zone=pb.ZONE_CORE)], total=0)
        assert await converter.print(stats) is stats
    finally:
        await converter.close()


def _workers_of(parent: int) -> list[int]:
    """The JSON conversion workers running as children of ``parent`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and b"json_worker" in command:
            found.append(int(entry.name))
    return found
