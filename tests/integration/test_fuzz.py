"""Fuzzing every method: hypothesis builds request messages from the proto's descriptors (hostile
strings, extreme and non-finite numbers, long lists, every zone value), and random bytes go in as
the message of every method. Nothing may answer INTERNAL or UNKNOWN, hang, or crash the server;
a rejected request writes nothing; the memories there before are intact afterwards.

The HTTP port gets the same: the fuzzed messages as Connect JSON, random JSON documents, and
random bytes under each content type; nothing there may answer a 5xx.

    make fuzz      (a longer run: FUZZ_EXAMPLES examples per method, default 300)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from celestial_client.v1 import memory_pb2 as pb
from celestial_memory.api.grpc.server import MemoryServer
from celestial_memory.clock import ManualClock
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.integration.conftest import running_server
from tests.scripted_model import ScriptedModel

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "25"))
OUTCOMES: Counter[tuple[str, str]] = Counter()  # (method, status) of every fuzzed call
SERVICE = pb.DESCRIPTOR.services_by_name["MemoryService"]
BAD = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.DEADLINE_EXCEEDED}
KEEP = "keep"
TENANTS = st.sampled_from(["", "fuzz", "fuzz", KEEP, "x" * 300, "a/b", "\x00", "u" * 100_000])
# Shapes a hostile tester found answers too large with: long runs the model's tokenizer makes
# one unknown token of, at the content limit (32,768 characters; 3 or 4 bytes each).
LONG_HANGUL = "".join(chr(0xAC00 + (i * 7919) % 11172) for i in range(32_768))
LONG_SHAPES = [LONG_HANGUL, "😀" * 32_768, "😃" * 32_768]

texts = st.one_of(
    st.sampled_from(["boat", "Alice drinks tea", "fuzz"]),  # valid often enough to get through
    st.text(max_size=40), st.sampled_from(["", " ", "\x00", "😀" * 50, "a" * 70_000, "$.a[0]",
                                          "00000000-0000-4000-8000-000000000000", "*"]),
    st.sampled_from(LONG_SHAPES),
)
floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                   st.sampled_from([0.0, 1.0, -1.0, 1e300, -1e300, 0.5]))
ints = st.one_of(st.integers(0, 20), st.integers(-(2**31), 2**31 - 1),
                 st.sampled_from([0, 1, -1, 2**31 - 1]))
uints = st.one_of(st.integers(0, 20), st.integers(0, 2**32 - 1), st.sampled_from([0, 1, 10_001]))
longs = st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from([0, -1, 2**63 - 1]))
SCALARS: dict[int, Any] = {
    FieldDescriptor.TYPE_STRING: texts, FieldDescriptor.TYPE_BYTES: st.binary(max_size=64),
    FieldDescriptor.TYPE_DOUBLE: floats, FieldDescriptor.TYPE_FLOAT: floats.map(
        lambda x: max(min(x, 3e38), -3e38) if x == x else x),
    FieldDescriptor.TYPE_BOOL: st.booleans(), FieldDescriptor.TYPE_INT32: ints,
    FieldDescriptor.TYPE_UINT32: uints, FieldDescriptor.TYPE_INT64: longs,
    FieldDescriptor.TYPE_UINT64: st.integers(0, 2**64 - 1),
}


def _value(field: FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return st.deferred(lambda: messages(field.message_type, depth + 1))
    if field.type == FieldDescriptor.TYPE_ENUM:
        return st.sampled_from([v.number for v in field.enum_type.values] + [99, -1])
    return SCALARS[field.type]


@st.composite
def _message(draw: st.DrawFn, descriptor: Descriptor, depth: int) -> Any:
    msg = pb_class(descriptor)()
    for field in descriptor.fields:
        if depth > 2 or not draw(st.booleans()):
            continue
        if field.name == "tenant":
            setattr(msg, field.name, draw(TENANTS))
            continue
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            key_f = field.message_type.fields_by_name["key"]
            val_f = field.message_type.fields_by_name["value"]
            entries = draw(st.dictionaries(_value(key_f, depth), _value(val_f, depth), max_size=5))
            target = getattr(msg, field.name)
            for k, v in entries.items():
                if val_f.type == FieldDescriptor.TYPE_MESSAGE:
                    target[k].CopyFrom(v)
                else:
                    target[k] = v
        elif field.is_repeated:
            size = draw(st.sampled_from([1, 3, 384, 385])) if field.name.endswith("vector") \
                else draw(st.integers(0, 5))
            items = draw(st.lists(_value(field, depth), min_size=size, max_size=size))
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                getattr(msg, field.name).extend(items)
            else:
                getattr(msg, field.name)[:] = items
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            getattr(msg, field.name).CopyFrom(draw(_value(field, depth)))
        else:
            with contextlib.suppress(ValueError, TypeError):  # e.g. an out-of-range enum
                setattr(msg, field.name, draw(_value(field, depth)))
    return msg


def messages(descriptor: Descriptor, depth: int = 0) -> st.SearchStrategy[Any]:
    return _message(descriptor, depth)


ID_A, ID_B = "00000000-0000-4000-8000-00000000000a", "00000000-0000-4000-8000-00000000000b"
# Valid requests to mutate: random messages alone rarely get past validation, so half of the
# examples are one of these with one or two fields replaced by hostile values.
VALID: dict[str, Any] = {
    "StoreRequest": pb.StoreRequest(tenant="fuzz", content="the boat is blue", importance=0.5),
    "RecallRequest": pb.RecallRequest(tenant="fuzz", query="boat", limit=5),
    "UpdateRequest": pb.UpdateRequest(tenant="fuzz", id="00000000-0000-4000-8000-000000000000",
                                      importance=0.5),
    # Between two memories the harness stores under these ids: relations, walks, entities.
    "RelateRequest": pb.RelateRequest(tenant="fuzz", from_id=ID_A, to_id=ID_B, relation="about"),
    "UnrelateRequest": pb.UnrelateRequest(tenant="fuzz", from_id=ID_A, to_id=ID_B),
    "RelatedRequest": pb.RelatedRequest(tenant="fuzz", id=ID_A, depth=2),
    "EntitiesRequest": pb.EntitiesRequest(tenant="fuzz", entity="name:alice"),
    "FeedbackRequest": pb.FeedbackRequest(tenant="fuzz", id=ID_A, verdict=pb.VERDICT_HELPFUL),
    "ReflectRequest": pb.ReflectRequest(tenant="fuzz", dry_run=True),
    "ContextRequest": pb.ContextRequest(recall=pb.RecallRequest(tenant="fuzz", query="Alice",
                                                                expand=2), max_tokens=500,
                                        neighbours=True),
    # An import record holding a relation and an entity: mutated, hostile ones of both.
    "ExportedMemory": pb.ExportedMemory(
        tenant="fuzz", vector=[1.0] + [0.0] * 383, memory=pb.Memory(
            id="00000000-0000-4000-8000-0000000000c1", content="imported note on Alice",
            zone=pb.ZONE_OUTER, importance=0.5, entities=["name:alice"],
            relations=[pb.Relation(id=ID_A, relation="about", weight=0.5, made_by="caller",
                                   outgoing=True)])),
}


def reflections(body: dict[str, Any]) -> str:
    """The harness's model: for each entity a summary and an insight made of its first memory
    as sent (hostile text included), resting on that memory."""
    user = body["messages"][1]["content"]
    groups = re.split(r"^Entity \d+: .*$", user, flags=re.M)[1:]
    return json.dumps({"entities": [
        {"n": n, "summary": g.strip()[:600],
         "insights": [{"text": "insight: " + g.strip()[:600], "sources": [1]}]}
        for n, g in enumerate(groups, 1)]})


@st.composite
def _mutated(draw: st.DrawFn, descriptor: Descriptor) -> Any:
    msg = type(VALID[descriptor.name])()
    msg.CopyFrom(VALID[descriptor.name])
    hostile = draw(_message(descriptor, 0))
    names = [f.name for f in descriptor.fields]
    for name in draw(st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True)):
        msg.ClearField(name)
        field = descriptor.fields_by_name[name]
        if field.is_repeated or field.message_type is not None:
            if field.is_repeated:
                getattr(msg, name).MergeFrom(getattr(hostile, name))
            elif hostile.HasField(name):
                getattr(msg, name).CopyFrom(getattr(hostile, name))
        else:
            setattr(msg, name, getattr(hostile, name))
    return msg


def requests(descriptor: Descriptor) -> st.SearchStrategy[Any]:
    if descriptor.name in VALID:
        return st.one_of(_mutated(descriptor), _message(descriptor, 0))
    return _message(descriptor, 0)


def pb_class(descriptor: Descriptor) -> Any:
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(descriptor)


class Harness:
    """A server on its own thread and loop, and a blocking channel to it."""

    def __init__(self, tmp: Path, embedder: SentenceTransformerEmbedder) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        # A scripted model, so that Reflect gets past its precondition and writes.
        self.model = ScriptedModel(reflections)
        self._cm = running_server(tmp, embedder, ManualClock(1_700_000_000.0), admin_clock=True,
                                  llm_base_url=self.model.url, llm_model="scripted",
                                  http_address="127.0.0.1:0")
        self.server: MemoryServer = asyncio.run_coroutine_threadsafe(
            self._cm.__aenter__(), self.loop).result()
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.server.port}")
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{self.server.http_port}", timeout=30)
        self.kept: list[tuple[str, str, float]] = []  # KEEP's memories before the fuzzing

    def close(self) -> None:
        self.channel.close()
        self.http.close()
        asyncio.run_coroutine_threadsafe(self._cm.__aexit__(None, None, None), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.model.close()

    def total(self) -> int:
        svc = self.server.service
        return sum(svc.stats(t).total for t in svc.tenants())

    def call(self, method: Any, payload: bytes) -> grpc.StatusCode:
        """``payload`` as the request (one message, or one item of a stream)."""
        path = f"/{SERVICE.full_name}/{method.name}"
        ident = lambda b: b  # noqa: E731
        try:
            if method.client_streaming:
                self.channel.stream_unary(path, ident, ident)(iter([payload]), timeout=30)
            elif method.server_streaming:
                list(self.channel.unary_stream(path, ident, ident)(payload, timeout=30))
            else:
                self.channel.unary_unary(path, ident, ident)(payload, timeout=30)
        except grpc.RpcError as err:
            return err.code()  # type: ignore[no-any-return]
        finally:
            self.settle()
        return grpc.StatusCode.OK

    def settle(self) -> None:
        """Wait for the reflections a call started, which write off its path, so that what
        changed after a call is that call's doing (a bound, not a timing claim)."""
        for _ in range(2400):
            if not self.server.service.reflection._live:
                return
            time.sleep(0.05)
        raise AssertionError("a started reflection never ended")

    def http_call(self, method: Any, body: bytes, kind: str) -> tuple[int, str]:
        """``body`` posted to the method on the HTTP port: the HTTP status and the Connect
        code (``ok`` for a success); a stream's code is in its end message."""
        reply = self.http.post(f"/{SERVICE.full_name}/{method.name}", content=body,
                               headers={"content-type": kind})
        self.settle()
        if reply.status_code != 200:
            code = reply.json().get("code", "") if "json" in reply.headers.get(
                "content-type", "") else ""
            return reply.status_code, code
        if kind.startswith("application/connect+"):
            data = reply.content
            while len(data) >= 5:  # envelopes: flags, a 4-byte length, the message
                size = int.from_bytes(data[1:5], "big")
                if data[0] & 0x02:
                    return 200, json.loads(data[5:5 + size]).get("error", {}).get("code", "ok")
                data = data[5 + size:]
            raise AssertionError(f"{method.name}: a stream answer without its end: {reply.content[:200]!r}")
        return 200, "ok"


@pytest.fixture(scope="module")
def harness(
    tmp_path_factory: pytest.TempPathFactory, embedder: SentenceTransformerEmbedder
) -> Iterator[Harness]:
    h = Harness(tmp_path_factory.mktemp("fuzz"), embedder)
    for text in ("the boat is blue", "the meeting is on Tuesday", "Alice drinks espresso"):
        h.call(SERVICE.methods_by_name["Store"],
               pb.StoreRequest(tenant=KEEP, content=text, importance=0.5).SerializeToString())
    h.kept = _keep_snapshot(h)
    # The fuzzed tenant holds what made answers too large before: a memory fifteen long
    # repeats were merged into, and long memories the fuzzed Recalls, Lists and Exports meet.
    store = SERVICE.methods_by_name["Store"]
    for _ in range(15):
        assert h.call(store, pb.StoreRequest(tenant="fuzz", content="😀" * 32_768,
                                             context="😃" * 32_768).SerializeToString()).name == "OK"
    for mid, text in ((ID_A, "Alice drinks espresso in Busan"), (ID_B, "Alice met Bob")):
        assert h.call(store, pb.StoreRequest(tenant="fuzz", id=mid, content=text,
                                             session_id="s").SerializeToString()).name == "OK"
    for i in range(8):
        assert h.call(store, pb.StoreRequest(
            tenant="fuzz", content=LONG_HANGUL[i:] + LONG_HANGUL[:i]).SerializeToString()).name == "OK"
    yield h
    h.close()


def _keep_snapshot(h: Harness) -> list[tuple[str, str, float]]:
    svc = h.server.service
    return sorted((m.id, m.content, m.importance)
                  for page in svc.transfer.export_pages(KEEP) for m in page)


# Methods that may legitimately delete or change what they name: kept off the KEEP tenant.
DESTRUCTIVE = {"Delete", "DeleteByFilter", "Update", "Import", "Rebalance", "Restore",
               "Consolidate", "Feedback"}
# Methods whose random requests may write legitimately; the rest must never change the count.
WRITERS = {"Store", "StoreBatch", "Import", "Delete", "DeleteByFilter", "Update", "Recall",
           "Rebalance", "SetClock", "Restore", "Consolidate", "Reflect", "StartReflection",
           "Observe"}  # a turn saved or skipped into the archive


@pytest.mark.parametrize("method", list(SERVICE.methods), ids=lambda m: m.name)
def test_random_messages_never_break_the_server(harness: Harness, method: Any) -> None:
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(requests(method.input_type))
    def run(msg: Any) -> None:
        if method.name in DESTRUCTIVE and msg.tenant == KEEP:
            msg.tenant = "fuzz"  # these may legitimately change what they name
        before = harness.total()
        code = harness.call(method, msg.SerializeToString())
        OUTCOMES[(method.name, code.name)] += 1
        assert code not in BAD, (method.name, code, str(msg)[:300])
        if code != grpc.StatusCode.OK or method.name not in WRITERS:
            assert harness.total() == before, (method.name, code, "a rejected request wrote")

    run()


@pytest.mark.parametrize("method", list(SERVICE.methods), ids=lambda m: m.name)
def test_random_bytes_as_any_message_never_break_the_server(harness: Harness, method: Any) -> None:
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.binary(max_size=512))
    def run(payload: bytes) -> None:
        keep = _keep_snapshot(harness)
        before = harness.total()
        code = harness.call(method, payload)
        assert code not in BAD, (method.name, code, payload[:64])
        if code != grpc.StatusCode.OK:
            assert harness.total() == before
        if method.name in DESTRUCTIVE:
            assert _keep_snapshot(harness) == keep or code == grpc.StatusCode.OK

    run()


# Shapes a hostile tester put into the graph: ids that are no UUIDs, entity ids without a kind,
# with a huge key or a terminal escape, relation names and makers of the wrong form; weights out
# of [0, 1]; more relations than a memory may hold.
GRAPH_SHAPES = st.sampled_from(["not-a-uuid", "nokind", "name:" + "k" * 50_000, "name:\x1b[2J",
                                "name:", "Bad Name", "\x1b]52;c;cHduZWQ=\x07", "", ID_B])
WEIGHTS = st.sampled_from([float("nan"), float("inf"), -5.0, 50.0, 1e300, 0.5])


@st.composite
def _hostile_graph(draw: st.DrawFn, name: str) -> Any:
    msg = type(VALID[name])()
    msg.CopyFrom(VALID[name])
    if name == "ExportedMemory":
        rel = msg.memory.relations[0]
        setattr(rel, draw(st.sampled_from(["id", "relation", "made_by"])), draw(GRAPH_SHAPES))
        rel.weight = draw(WEIGHTS)
        if draw(st.booleans()):
            msg.memory.entities[:] = [draw(GRAPH_SHAPES)]
        if draw(st.booleans()):
            msg.memory.relations.extend(
                pb.Relation(id=f"00000000-0000-4000-8000-{i:012d}", relation="about", weight=1.0,
                            made_by="caller", outgoing=True) for i in range(1, 300))
        return msg
    fields = {"RelateRequest": ["from_id", "to_id", "relation"], "UnrelateRequest":
              ["from_id", "to_id", "relation"], "RelatedRequest": ["id", "relations"],
              "EntitiesRequest": ["entity"]}[name]
    field = draw(st.sampled_from(fields))
    if field == "relations":
        msg.relations[:] = [draw(GRAPH_SHAPES)]
    else:
        setattr(msg, field, draw(GRAPH_SHAPES))
    if name == "RelateRequest":
        msg.weight = draw(WEIGHTS)
    return msg


@pytest.mark.parametrize("method", ["Relate", "Unrelate", "Related", "Entities", "Import"])
def test_hostile_graph_shapes_are_refused_cleanly(harness: Harness, method: str) -> None:
    m = SERVICE.methods_by_name[method]

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(_hostile_graph(m.input_type.name))
    def run(msg: Any) -> None:
        code = harness.call(m, msg.SerializeToString())
        OUTCOMES[(method, code.name)] += 1
        assert code not in BAD, (method, code, str(msg)[:300])

    run()


def test_every_graph_read_answers_after_the_fuzz(harness: Harness) -> None:
    """Whatever the fuzzed Imports, Relates and Stores left in the tenant, every read that
    follows relations answers without INTERNAL or UNKNOWN."""
    calls = [("Related", pb.RelatedRequest(tenant="fuzz", id=mid, depth=d))
             for mid in (ID_A, ID_B) for d in (1, 2, 3)]
    calls += [("Recall", pb.RecallRequest(tenant="fuzz", query=q, expand=e, limit=20))
              for q in ("Alice", "imported note", "boat") for e in (1, 2)]
    calls += [("Context", pb.ContextRequest(recall=pb.RecallRequest(tenant="fuzz", query="Alice",
                                                                    expand=2),
                                            max_tokens=2000, neighbours=True)),
              ("Entities", pb.EntitiesRequest(tenant="fuzz")),
              ("Export", pb.ExportRequest(tenant="fuzz"))]
    for name, msg in calls:
        code = harness.call(SERVICE.methods_by_name[name], msg.SerializeToString())
        assert code == grpc.StatusCode.OK, (name, code)


# What must never come back from the HTTP port: a 5xx, or a Connect code of a server fault.
HTTP_BAD = {"internal", "unknown", "deadline_exceeded", "data_loss"}
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                max_size=4), max_leaves=12)


def _envelope(data: bytes) -> bytes:
    return b"\x00" + len(data).to_bytes(4, "big") + data


def _http_kind(method: Any) -> str:
    streams = method.client_streaming or method.server_streaming
    return "application/connect+json" if streams else "application/json"


def _check_http(harness: Harness, method: Any, body: bytes, kind: str) -> None:
    before = harness.total()
    status, code = harness.http_call(method, body, kind)
    OUTCOMES[(f"http {method.name}", code or str(status))] += 1
    assert status < 500 and code not in HTTP_BAD, (method.name, status, code, body[:300])
    if code != "ok" or method.name not in WRITERS:  # a refused request wrote nothing
        assert harness.total() == before, (method.name, status, code, "a rejected request wrote")


@pytest.mark.parametrize("method", list(SERVICE.methods), ids=lambda m: m.name)
def test_random_messages_as_json_never_break_the_http_port(harness: Harness, method: Any) -> None:
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(requests(method.input_type))
    def run(msg: Any) -> None:
        if method.name in DESTRUCTIVE and msg.tenant == KEEP:
            msg.tenant = "fuzz"
        try:
            body = json_format.MessageToJson(msg).encode()
        except json_format.SerializeToJsonError:
            return  # a value JSON cannot carry (a Timestamp out of range): the other tests send it
        kind = _http_kind(method)
        _check_http(harness, method, _envelope(body) if "connect+" in kind else body, kind)

    run()


@pytest.mark.parametrize("method", list(SERVICE.methods), ids=lambda m: m.name)
def test_random_json_and_bytes_never_break_the_http_port(harness: Harness, method: Any) -> None:
    """Documents of any shape, often naming the method's own fields with values of the wrong
    type, and raw bytes under each content type the port knows."""
    fields = [f.json_name for f in method.input_type.fields] or ["x"]
    documents = st.one_of(
        JSON_VALUES, st.dictionaries(st.sampled_from(fields), JSON_VALUES, max_size=4))
    kinds = st.sampled_from(["application/json", "application/proto", "application/connect+json",
                             "application/connect+proto", "text/plain", ""])

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(st.one_of(documents.map(lambda d: json.dumps(d).encode()), st.binary(max_size=512)),
           kinds, st.booleans())
    def run(body: bytes, kind: str, enveloped: bool) -> None:
        if method.name in DESTRUCTIVE:  # these may legitimately change what they name
            body = body.replace(KEEP.encode(), b"fuzz")
        _check_http(harness, method, _envelope(body) if enveloped else body, kind)

    run()


def test_the_fuzz_reached_the_service(harness: Harness) -> None:
    """Random messages were both accepted and refused (a harness whose every call failed to
    decode, or passed, would prove nothing); the counts are printed for the closing report."""
    print("\n".join(f"{m:<16}{c:<22}{n}" for (m, c), n in sorted(OUTCOMES.items())))
    accepted = {m for (m, c), n in OUTCOMES.items() if c == "OK"}
    refused = {m for (m, c), n in OUTCOMES.items() if c == "INVALID_ARGUMENT"}
    assert {"Store", "Recall", "Stats", "Recent", "Export", "Ledger", "Relate", "Related",
            "Entities", "Feedback", "Reflect"} <= accepted
    assert harness.model.requests  # a fuzzed Reflect got as far as the model
    assert {"Store", "StoreBatch", "Recall", "Update", "Import", "Feedback"} <= refused
    # And the HTTP port's fuzz got through Connect's decoding as well as being refused by it.
    assert {f"http {m}" for m in ("Store", "Recall", "Stats", "Export", "Related")} <= accepted_http(
        "ok")
    assert {f"http {m}" for m in ("Store", "StoreBatch", "Recall", "Import")} <= accepted_http(
        "invalid_argument")


def accepted_http(code: str) -> set[str]:
    return {m for (m, c), n in OUTCOMES.items() if c == code and m.startswith("http ")}


def test_the_memories_there_before_are_intact(harness: Harness) -> None:
    # Random Stores may add to KEEP; the three memories stored first must be there unchanged.
    assert set(harness.kept) <= set(_keep_snapshot(harness))
    assert sorted(c for _, c, _ in harness.kept) == sorted(
        ["the boat is blue", "the meeting is on Tuesday", "Alice drinks espresso"])
