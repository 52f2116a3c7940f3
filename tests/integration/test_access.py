"""API keys decide the tenant and the role: two tenants' keys and each role against every RPC,
in every direction; no key, a bad, revoked or expired key; a key file reloaded while serving;
rate limits; the audit log; and a server that will not expose itself without keys."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from celestial_memory.access.keys import create_key, revoke_key
from celestial_memory.api.grpc.server import MemoryServer, check_exposure
from celestial_memory.clock import ManualClock
from celestial_memory.domain.operations import operation_name
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder
from celestial_memory.errors import InvalidArgument
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status

from tests.integration.conftest import TRANSPORTS, running_server, stub_over
from tests.scripted_model import ScriptedModel

Stub = pb_grpc.MemoryServiceStub
DENIED = {grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.NOT_FOUND}


class Keys:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.a_read = create_key(path, "a-read", "read", ["a"])[1]
        self.a_write = create_key(path, "a-write", "write", ["a"])[1]
        self.b_write = create_key(path, "b-write", "write", ["b"])[1]
        self.admin = create_key(path, "ops", "admin", ["*"])[1]
        self.expired = create_key(path, "old", "write", ["a"], expires_at=time.time() - 1,
                                  now=time.time() - 3600)[1]
        record, self.revoked = create_key(path, "gone", "write", ["a"])
        revoke_key(path, record.id)


@pytest.fixture
def keys(tmp_path: Path) -> Keys:
    return Keys(tmp_path / "keys.json")


@pytest.fixture
async def secured(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock, keys: Keys
) -> AsyncIterator[MemoryServer]:
    # A model, so that Reflect passes its precondition (its tenants' memories name no entity
    # twice: a dry run then asks the model nothing).
    model = ScriptedModel(lambda body: '{"entities": []}')
    async with running_server(tmp_path / "data", embedder, clock, api_keys_file=keys.path,
                              api_keys_reload_s=0.1, admin_clock=True, llm_base_url=model.url,
                              llm_model="scripted", http_address="127.0.0.1:0") as srv:
        yield srv
    model.close()


@pytest.fixture(params=TRANSPORTS)
async def stub(secured: MemoryServer, request: pytest.FixtureRequest) -> AsyncIterator[Stub]:
    """Each test runs over gRPC and again over Connect JSON: the same keys decide the same."""
    async with stub_over(request.param, secured) as stub:
        yield stub


def auth(key: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {key}"),)


async def code_of(call: Any) -> grpc.StatusCode:
    try:
        reply = await call
        if hasattr(reply, "__aiter__"):
            [_ async for _ in reply]
    except grpc.aio.AioRpcError as err:
        return err.code()
    return grpc.StatusCode.OK


def every_rpc(stub: Stub, tenant: str, memory_id: str, md: Any) -> dict[str, Callable[[], Any]]:
    """One call of each method of the service, naming ``tenant``."""

    async def export() -> list[Any]:
        return [e async for e in stub.Export(pb.ExportRequest(tenant=tenant), metadata=md)]

    seeded = operation_name(tenant, SEEDED_REFLECTION)  # _seed started it in tenant a

    async def watch() -> list[Any]:
        return [o async for o in stub.WatchOperation(
            pb.WatchOperationRequest(tenant=tenant, name=seeded), metadata=md)]

    record = pb.ExportedMemory(tenant=tenant, memory=pb.Memory(
        id=f"00000000-0000-4000-8000-{sum(map(ord, tenant)):012d}", content="imported", importance=0.5,
        zone=pb.ZONE_OUTER), created_at_s=1_700_000_000.0,
        vector=[0.05] * 384)
    return {
        "Store": lambda: stub.Store(pb.StoreRequest(tenant=tenant, content="x"), metadata=md),
        "StoreBatch": lambda: stub.StoreBatch(
            iter([pb.StoreRequest(tenant=tenant, content="x")]), metadata=md),
        "Recall": lambda: stub.Recall(pb.RecallRequest(tenant=tenant, query="boat"), metadata=md),
        "RecallRead": lambda: stub.Recall(
            pb.RecallRequest(tenant=tenant, query="boat", no_reinforce=True), metadata=md),
        "Context": lambda: stub.Context(pb.ContextRequest(
            recall=pb.RecallRequest(tenant=tenant, query="boat"), max_tokens=100), metadata=md),
        "ContextRead": lambda: stub.Context(pb.ContextRequest(
            recall=pb.RecallRequest(tenant=tenant, query="boat", no_reinforce=True),
            max_tokens=100), metadata=md),
        "Get": lambda: stub.Get(pb.GetRequest(tenant=tenant, id=memory_id), metadata=md),
        "Update": lambda: stub.Update(
            pb.UpdateRequest(tenant=tenant, id=memory_id, importance=0.9), metadata=md),
        "Restore": lambda: stub.Restore(pb.RestoreRequest(tenant=tenant, id=memory_id),
                                        metadata=md),
        # Before Delete, which removes the memory they name.
        "Relate": lambda: stub.Relate(pb.RelateRequest(
            tenant=tenant, from_id=memory_id, to_id=SECOND, relation="about"), metadata=md),
        "Unrelate": lambda: stub.Unrelate(pb.UnrelateRequest(
            tenant=tenant, from_id=memory_id, to_id=SECOND), metadata=md),
        "Related": lambda: stub.Related(pb.RelatedRequest(tenant=tenant, id=memory_id),
                                        metadata=md),
        "Entities": lambda: stub.Entities(pb.EntitiesRequest(tenant=tenant), metadata=md),
        "Feedback": lambda: stub.Feedback(pb.FeedbackRequest(
            tenant=tenant, id=memory_id, verdict=pb.VERDICT_HELPFUL), metadata=md),
        "ObserveRead": lambda: stub.Observe(pb.ObserveRequest(
            tenant=tenant, text="where is the boat?", dry_run=True), metadata=md),
        "Observe": lambda: stub.Observe(pb.ObserveRequest(tenant=tenant, text="hello there"),
                                        metadata=md),
        "GetPolicy": lambda: stub.GetPolicy(pb.GetPolicyRequest(tenant=tenant), metadata=md),
        "ResetPolicy": lambda: stub.ResetPolicy(pb.ResetPolicyRequest(tenant=tenant),
                                                metadata=md),
        "Reflect": lambda: stub.Reflect(pb.ReflectRequest(tenant=tenant, dry_run=True),
                                        metadata=md),
        "StartReflection": lambda: stub.StartReflection(pb.StartReflectionRequest(
            reflection=pb.ReflectRequest(tenant=tenant, dry_run=True)), metadata=md),
        "GetOperation": lambda: stub.GetOperation(
            pb.GetOperationRequest(tenant=tenant, name=seeded), metadata=md),
        "WatchOperation": watch,
        "CancelOperation": lambda: stub.CancelOperation(
            pb.CancelOperationRequest(tenant=tenant, name=seeded), metadata=md),
        "ListOperations": lambda: stub.ListOperations(
            pb.ListOperationsRequest(tenant=tenant), metadata=md),
        "Delete": lambda: stub.Delete(pb.DeleteRequest(tenant=tenant, id=memory_id), metadata=md),
        "DeleteByFilter": lambda: stub.DeleteByFilter(
            pb.DeleteByFilterRequest(tenant=tenant, filter=pb.RecallFilter(tags_any=["zz"])),
            metadata=md),
        "Rebalance": lambda: stub.Rebalance(
            pb.RebalanceRequest(tenant=tenant, dry_run=True), metadata=md),
        "Consolidate": lambda: stub.Consolidate(
            pb.ConsolidateRequest(tenant=tenant, dry_run=True), metadata=md),
        "Recent": lambda: stub.Recent(pb.RecentRequest(tenant=tenant), metadata=md),
        "List": lambda: stub.List(pb.ListRequest(tenant=tenant), metadata=md),
        "SetClock": lambda: stub.SetClock(
            pb.SetClockRequest(now={"seconds": 1_700_000_000}), metadata=md),
        "GetConfig": lambda: stub.GetConfig(pb.GetConfigRequest(), metadata=md),
        "Ledger": lambda: stub.Ledger(pb.LedgerRequest(tenant=tenant), metadata=md),
        "Stats": lambda: stub.Stats(pb.StatsRequest(tenant=tenant), metadata=md),
        "Export": export,
        "Import": lambda: stub.Import(iter([record]), metadata=md),
    }


METHODS = set(pb.DESCRIPTOR.services_by_name["MemoryService"].methods_by_name)


# A second memory of tenant a, for relations.
SECOND = "00000000-0000-4000-8000-0000000000b2"


# The request id of a reflection _seed starts in tenant a (every_rpc reads its operation).
SEEDED_REFLECTION = "seed"


async def _seed(stub: Stub, keys: Keys) -> str:
    await stub.Store(pb.StoreRequest(content="the harbour", id=SECOND), metadata=auth(keys.a_write))
    await stub.StartReflection(pb.StartReflectionRequest(
        reflection=pb.ReflectRequest(dry_run=True), request_id=SEEDED_REFLECTION),
        metadata=auth(keys.a_write))
    reply = await stub.Store(pb.StoreRequest(content="the boat is blue"), metadata=auth(keys.a_write))
    assert reply.memory.tenant == "a"  # the key decided the tenant
    return str(reply.memory.id)


async def test_every_method_is_covered(stub: Stub) -> None:
    calls = every_rpc(stub, "a", "x", ())
    assert {name.removesuffix("Read") for name in calls} == METHODS


@pytest.mark.parametrize("md", [
    (), (("authorization", "Bearer"),), (("authorization", "Bearer cm_nothing_here"),),
    (("authorization", "Basic dXNlcjpwYXNz"),), (("x-api-key", "garbage"),),
], ids=["none", "empty", "unknown", "basic", "garbage"])
async def test_no_valid_key_is_unauthenticated_for_every_method(
    stub: Stub, secured: MemoryServer, md: Any
) -> None:
    for name, call in every_rpc(stub, "a", "x", md).items():
        assert await code_of(call()) == grpc.StatusCode.UNAUTHENTICATED, name
    async with grpc.aio.insecure_channel(f"127.0.0.1:{secured.port}") as ch:
        reply = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest())
        assert reply.status == health_pb2.HealthCheckResponse.SERVING  # probes need no key


async def test_revoked_and_expired_keys_are_unauthenticated(stub: Stub, keys: Keys) -> None:
    for key in (keys.revoked, keys.expired):
        for name, call in every_rpc(stub, "a", "x", auth(key)).items():
            assert await code_of(call()) == grpc.StatusCode.UNAUTHENTICATED, name


async def test_another_tenants_key_gets_nothing_in_any_direction(stub: Stub, keys: Keys) -> None:
    mid = await _seed(stub, keys)
    for key, other in ((keys.b_write, "a"), (keys.a_write, "b"), (keys.a_read, "b")):
        for name, call in every_rpc(stub, other, mid, auth(key)).items():
            assert await code_of(call()) in DENIED, (name, other)
    # Naming no tenant, b's key works in b, where a's memory does not exist.
    for name in ("Get", "Update"):
        call = every_rpc(stub, "", mid, auth(keys.b_write))[name]
        assert await code_of(call()) == grpc.StatusCode.NOT_FOUND, name
    gone = await stub.Delete(pb.DeleteRequest(id=mid), metadata=auth(keys.b_write))
    assert not gone.deleted  # as for an id that exists nowhere
    b_stats = await stub.Stats(pb.StatsRequest(), metadata=auth(keys.b_write))
    assert b_stats.total == 0
    found = await stub.Recall(pb.RecallRequest(query="boat"), metadata=auth(keys.b_write))
    assert list(found.results) == []
    # a's memory is untouched.
    got = await stub.Get(pb.GetRequest(id=mid), metadata=auth(keys.a_read))
    assert got.memory.content == "the boat is blue" and got.memory.importance != 0.9


ROLE_ALLOWS = {
    "read": {"RecallRead", "ContextRead", "Get", "Recent", "List", "Stats", "Export", "Ledger",
             "Related", "Entities", "GetOperation", "WatchOperation", "ListOperations",
             "ObserveRead", "GetPolicy"},
    "write": {"RecallRead", "ContextRead", "Get", "Recent", "List", "Stats", "Export", "Ledger",
              "Related", "Entities", "Store", "StoreBatch", "Recall", "Context", "Update",
              "Import", "Delete", "Restore", "Relate", "Unrelate", "Feedback", "Reflect",
              "GetOperation", "WatchOperation", "ListOperations", "StartReflection",
              "CancelOperation", "ObserveRead", "GetPolicy", "Observe", "ResetPolicy"},
}


@pytest.mark.parametrize("role", ["read", "write"])
async def test_each_role_allows_its_methods_and_no_more(stub: Stub, keys: Keys, role: str) -> None:
    mid = await _seed(stub, keys)
    key = keys.a_read if role == "read" else keys.a_write
    for name, call in every_rpc(stub, "a", mid, auth(key)).items():
        code = await code_of(call())
        if name in ROLE_ALLOWS[role]:
            assert code == grpc.StatusCode.OK, (name, code)
        else:
            assert code == grpc.StatusCode.PERMISSION_DENIED, (name, code)


async def test_an_admin_key_reaches_every_tenant_and_every_method(stub: Stub, keys: Keys) -> None:
    mid = await _seed(stub, keys)
    for tenant in ("a", "b"):
        calls = every_rpc(stub, tenant, mid, auth(keys.admin))
        for name, call in calls.items():
            code = await code_of(call())
            expected = grpc.StatusCode.NOT_FOUND if tenant == "b" and name in {
                "Get", "Update", "Restore", "Relate", "Unrelate", "Related", "Feedback",
                "GetOperation", "WatchOperation", "CancelOperation",  # a's reflection
            } else grpc.StatusCode.OK
            assert code == expected, (tenant, name, code)


async def test_only_an_admin_key_deletes_an_immutable_memory(stub: Stub, keys: Keys) -> None:
    kept = await stub.Store(pb.StoreRequest(content="the will is in the safe", immutable=True),
                            metadata=auth(keys.a_write))
    mid = kept.memory.id
    assert kept.memory.immutable
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Delete(pb.DeleteRequest(id=mid), metadata=auth(keys.a_write))
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "admin" in (err.value.details() or "")
    # A read key may not even try; a write key may still vote on it (no content changes).
    assert await code_of(stub.Feedback(pb.FeedbackRequest(id=mid, verdict=pb.VERDICT_HELPFUL),
                                       metadata=auth(keys.a_read))) == grpc.StatusCode.PERMISSION_DENIED
    voted = await stub.Feedback(pb.FeedbackRequest(id=mid, verdict=pb.VERDICT_HELPFUL),
                                metadata=auth(keys.a_write))
    assert voted.memory.importance > voted.importance_before
    # The right to erasure stays with the admin.
    gone = await stub.Delete(pb.DeleteRequest(tenant="a", id=mid), metadata=auth(keys.admin))
    assert gone.deleted
    assert await code_of(stub.Get(pb.GetRequest(id=mid), metadata=auth(keys.a_read))
                         ) == grpc.StatusCode.NOT_FOUND


async def test_a_new_key_works_and_a_revoked_one_stops_without_a_restart(
    stub: Stub, keys: Keys
) -> None:
    failures: list[grpc.StatusCode] = []
    stop = asyncio.Event()

    async def steady() -> None:  # calls with an existing key go on while the file changes
        while not stop.is_set():
            code = await code_of(stub.Stats(pb.StatsRequest(), metadata=auth(keys.a_read)))
            if code != grpc.StatusCode.OK:
                failures.append(code)

    task = asyncio.create_task(steady())
    record, fresh = create_key(keys.path, "new", "write", ["c"])
    await _eventually(lambda: stub.Stats(pb.StatsRequest(), metadata=auth(fresh)),
                      grpc.StatusCode.OK)
    revoke_key(keys.path, record.id)
    await _eventually(lambda: stub.Stats(pb.StatsRequest(), metadata=auth(fresh)),
                      grpc.StatusCode.UNAUTHENTICATED)
    stop.set()
    await task
    assert failures == []


async def _eventually(call: Callable[[], Any], code: grpc.StatusCode, within_s: float = 5) -> None:
    start = time.monotonic()
    while (got := await code_of(call())) != code:
        assert time.monotonic() - start < within_s, f"still {got}"
        await asyncio.sleep(0.05)


async def test_denials_and_admin_calls_are_audited_without_secrets(
    stub: Stub, keys: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="celestial_memory.audit")
    await code_of(stub.Stats(pb.StatsRequest(), metadata=auth("cm_0000_nothing")))
    await code_of(stub.Rebalance(pb.RebalanceRequest(tenant="a"), metadata=auth(keys.a_write)))
    await code_of(stub.Rebalance(pb.RebalanceRequest(tenant="a", dry_run=True),
                                 metadata=auth(keys.admin)))
    ledger = await stub.Ledger(pb.LedgerRequest(tenant="a"), metadata=auth(keys.a_read))
    assert [(e.method, e.key_id, e.tenant) for e in ledger.admin_events] == [
        ("Rebalance", keys.admin.split("_")[1], "a")]  # the admin call, not the refused one
    lines = [r.getMessage() for r in caplog.records if r.name == "celestial_memory.audit"]
    assert any('"event": "denied"' in line and "UNAUTHENTICATED" in line for line in lines)
    assert any('"event": "denied"' in line and "PERMISSION_DENIED" in line for line in lines)
    assert any('"event": "admin"' in line and '"method": "Rebalance"' in line for line in lines)
    everything = caplog.text
    for key in (keys.a_write, keys.admin, keys.a_read, "cm_0000_nothing"):
        assert key.split("_", 2)[2] not in everything


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_key_over_its_rate_is_told_when_to_retry(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock, keys: Keys,
    transport: str,
) -> None:
    async with (
        running_server(tmp_path / "d", embedder, clock, api_keys_file=keys.path,
                       rate_per_key=1.0, rate_burst=3, http_address="127.0.0.1:0") as srv,
        stub_over(transport, srv) as stub,
    ):
        for _ in range(3):
            await stub.Stats(pb.StatsRequest(), metadata=auth(keys.a_read))
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Stats(pb.StatsRequest(), metadata=auth(keys.a_read))
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        status = rpc_status.from_call(err.value)  # type: ignore[arg-type]
        retry = error_details_pb2.RetryInfo()
        assert status is not None and any(d.Unpack(retry) for d in status.details)
        assert 0 < retry.retry_delay.ToNanoseconds() <= 1e9
        # Another key has its own bucket.
        await stub.Stats(pb.StatsRequest(), metadata=auth(keys.b_write))


def test_without_keys_only_a_loopback_address_is_served() -> None:
    for address in ("localhost:50051", "127.0.0.1:0", "[::1]:50051"):
        check_exposure(address, keys=False, insecure=False)
    for address in ("0.0.0.0:50051", "[::]:50051", "10.1.2.3:50051", ":50051"):
        with pytest.raises(InvalidArgument, match="no API keys"):
            check_exposure(address, keys=False, insecure=False)
        check_exposure(address, keys=False, insecure=True)
        check_exposure(address, keys=True, insecure=False)


def test_keys_are_managed_from_the_command_line_and_never_stored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from celestial_client.cli import main

    path = str(tmp_path / "keys.json")
    assert main(["keys", "--file", path, "create", "--name", "billing", "--role", "write",
                 "--tenant", "acme", "--expires-days", "30"]) == 0
    out = capsys.readouterr().out
    key = out.strip().splitlines()[-1]
    key_id = key.split("_")[1]
    assert key.startswith("cm_") and key_id in out
    stored = Path(path).read_text()
    assert key not in stored and key.split("_", 2)[2] not in stored
    assert oct(Path(path).stat().st_mode & 0o777) == "0o600"
    assert main(["keys", "--file", path, "list"]) == 0
    listing = capsys.readouterr().out
    assert key_id in listing and "active" in listing and "acme" in listing
    assert main(["keys", "--file", path, "revoke", key_id]) == 0
    assert main(["keys", "--file", path, "list"]) == 0
    assert "revoked" in capsys.readouterr().out
    assert main(["keys", "--file", path, "revoke", "nosuchid"]) == 2
    assert main(["keys", "--file", path, "create", "--name", "x", "--role", "read"]) == 2


async def test_without_a_key_only_health_check_is_open(
    stub: Stub, secured: MemoryServer, keys: Keys
) -> None:
    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    async with grpc.aio.insecure_channel(f"127.0.0.1:{secured.port}") as ch:
        health = health_pb2_grpc.HealthStub(ch)
        assert (await health.Check(health_pb2.HealthCheckRequest())).status == \
            health_pb2.HealthCheckResponse.SERVING
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        for md in ((), auth(keys.a_read)):
            watch = health.Watch(health_pb2.HealthCheckRequest(), metadata=md, timeout=3)
            reflect = reflection_pb2_grpc.ServerReflectionStub(ch).ServerReflectionInfo(
                iter([request]), metadata=md, timeout=3)
            if md:  # with a key both work (Watch is a coroutine handler, not a generator)
                first = await watch.read()
                assert first.status == health_pb2.HealthCheckResponse.SERVING
                watch.cancel()
                reply = await reflect.read()
                assert "celestial.v1.MemoryService" in str(reply.list_services_response)
            else:  # no one without a key holds a stream open
                for call in (watch, reflect):
                    with pytest.raises(grpc.aio.AioRpcError) as err:
                        await call.read()
                    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_every_refusal_is_audited_with_the_key_id_and_admin_calls_with_their_tenant(
    stub: Stub, keys: Keys, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="celestial_memory.audit")
    a_admin = create_key(keys.path, "a-ops", "admin", ["a"])[1]
    await _eventually(lambda: stub.Stats(pb.StatsRequest(), metadata=auth(a_admin)),
                      grpc.StatusCode.OK)
    caplog.clear()
    b_recall = stub.Recall(pb.RecallRequest(tenant="b", query="x"), metadata=auth(keys.a_read))
    assert await code_of(b_recall) == grpc.StatusCode.PERMISSION_DENIED  # tenant refusal
    reinforcing = stub.Recall(pb.RecallRequest(query="x"), metadata=auth(keys.a_read))
    assert await code_of(reinforcing) == grpc.StatusCode.PERMISSION_DENIED  # role, in handler
    wipe_b = stub.DeleteByFilter(pb.DeleteByFilterRequest(
        tenant="b", filter=pb.RecallFilter(tags_any=["x"])), metadata=auth(a_admin))
    assert await code_of(wipe_b) == grpc.StatusCode.PERMISSION_DENIED
    clock = stub.SetClock(pb.SetClockRequest(now={"seconds": 1_700_000_000}),
                          metadata=auth(a_admin))
    assert await code_of(clock) == grpc.StatusCode.PERMISSION_DENIED  # every tenant's clock
    wipe_a = stub.DeleteByFilter(pb.DeleteByFilterRequest(
        tenant="a", filter=pb.RecallFilter(tags_any=["x"])), metadata=auth(a_admin))
    assert await code_of(wipe_a) == grpc.StatusCode.OK
    events = [json.loads(r.getMessage()) for r in caplog.records
              if r.name == "celestial_memory.audit"]
    denied = [e for e in events if e["event"] == "denied"]
    a_read_id, a_admin_id = keys.a_read.split("_")[1], a_admin.split("_")[1]
    assert [(e["method"], e["key_id"]) for e in denied] == [
        ("Recall", a_read_id), ("Recall", a_read_id), ("DeleteByFilter", a_admin_id),
        ("SetClock", a_admin_id)]
    admin = [e for e in events if e["event"] == "admin"]
    assert [(e["method"], e["tenant"], e["key_id"]) for e in admin] == [
        ("DeleteByFilter", "a", a_admin_id)]


async def test_an_import_may_not_mix_tenants(stub: Stub, keys: Keys) -> None:
    records = [pb.ExportedMemory(tenant=t, created_at_s=1_700_000_000.0, vector=[0.05] * 384,
                                 memory=pb.Memory(id=f"00000000-0000-4000-8000-00000000000{i}",
                                                  content="x", importance=0.5,
                                                  zone=pb.ZONE_OUTER))
               for i, t in enumerate(["a", "b"])]
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Import(iter(records), metadata=auth(keys.admin))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "memories[1].tenant" in (err.value.details() or "")
    for t in ("a", "b"):
        assert (await stub.Stats(pb.StatsRequest(tenant=t), metadata=auth(keys.admin))).total == 0


async def test_conflicting_or_malformed_credentials_are_refused(stub: Stub, keys: Keys) -> None:
    for md in ((("authorization", f"Bearer {keys.a_read}"), ("x-api-key", keys.b_write)),
               (("authorization", f"Bearer {keys.a_read}"), ("authorization", "Bearer other")),
               (("authorization", f"Token {keys.a_read}"),)):
        assert await code_of(stub.Stats(pb.StatsRequest(), metadata=md)) == \
            grpc.StatusCode.UNAUTHENTICATED
    same_twice = (("authorization", f"Bearer {keys.a_read}"), ("x-api-key", keys.a_read))
    assert await code_of(stub.Stats(pb.StatsRequest(), metadata=same_twice)) == \
        grpc.StatusCode.OK


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_failed_attempts_are_rate_limited_too(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock, keys: Keys,
    transport: str,
) -> None:
    async with (
        running_server(tmp_path / "d", embedder, clock, api_keys_file=keys.path,
                       rate_per_key=0.5, rate_burst=3, http_address="127.0.0.1:0") as srv,
        stub_over(transport, srv) as stub,
    ):
        codes = [await code_of(stub.Stats(pb.StatsRequest(), metadata=auth("cm_00_zz")))
                 for _ in range(5)]
        assert codes[:3] == [grpc.StatusCode.UNAUTHENTICATED] * 3
        assert codes[3:] == [grpc.StatusCode.RESOURCE_EXHAUSTED] * 2


def test_the_command_line_refuses_keys_that_would_not_mean_what_they_say(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from celestial_client.cli import main

    path = str(tmp_path / "keys.json")
    base = ["keys", "--file", path, "create", "--name", "x", "--role", "read"]
    assert main([*base, "--tenant", "a", "--expires-days", "0"]) == 2  # not "never expires"
    assert main([*base, "--tenant", "a", "--expires-days", "-1"]) == 2
    assert main([*base, "--tenant", ""]) == 2
    assert not Path(path).exists()


def test_refilled_rate_buckets_are_forgotten() -> None:
    from celestial_memory.access import rate

    now = [0.0]
    limiter = rate.RateLimiter(rate=1.0, burst=2, clock=lambda: now[0])
    for i in range(rate.MAX_BUCKETS):
        limiter.take(f"address {i}")
    now[0] = 10.0  # every bucket has refilled
    limiter.take("one more")
    assert len(limiter._buckets) == 1
