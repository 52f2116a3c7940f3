"""API keys decide the tenant and the role: two tenants' keys and each role against every RPC,
in every direction; no key, a bad, revoked or expired key; a key file reloaded while serving;
rate limits; the audit log; and a server that will not expose itself without keys."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from celestial.v1 import memory_pb2 as pb
from celestial.v1 import memory_pb2_grpc as pb_grpc
from celestial_memory.access.keys import create_key, revoke_key
from celestial_memory.clock import ManualClock
from celestial_memory.embedding import SentenceTransformerEmbedder
from celestial_memory.errors import InvalidArgument
from celestial_memory.grpc_api.server import MemoryServer, check_exposure
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status

from tests.integration.conftest import running_server

Stub = pb_grpc.MemoryServiceStub
DENIED = {grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.NOT_FOUND}


class Keys:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.a_read = create_key(path, "a-read", "read", ["a"])[1]
        self.a_write = create_key(path, "a-write", "write", ["a"])[1]
        self.b_write = create_key(path, "b-write", "write", ["b"])[1]
        self.admin = create_key(path, "ops", "admin", ["*"])[1]
        self.expired = create_key(path, "old", "write", ["a"], expires_at=time.time() - 1)[1]
        record, self.revoked = create_key(path, "gone", "write", ["a"])
        revoke_key(path, record.id)


@pytest.fixture
def keys(tmp_path: Path) -> Keys:
    return Keys(tmp_path / "keys.json")


@pytest.fixture
async def secured(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock, keys: Keys
) -> AsyncIterator[MemoryServer]:
    async with running_server(tmp_path / "data", embedder, clock, api_keys_file=keys.path,
                              api_keys_reload_s=0.1, admin_clock=True) as srv:
        yield srv


@pytest.fixture
async def stub(secured: MemoryServer) -> AsyncIterator[Stub]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{secured.port}") as ch:
        yield Stub(ch)


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
        "Get": lambda: stub.Get(pb.GetRequest(tenant=tenant, id=memory_id), metadata=md),
        "Update": lambda: stub.Update(
            pb.UpdateRequest(tenant=tenant, id=memory_id, importance=0.9), metadata=md),
        "Delete": lambda: stub.Delete(pb.DeleteRequest(tenant=tenant, id=memory_id), metadata=md),
        "DeleteByFilter": lambda: stub.DeleteByFilter(
            pb.DeleteByFilterRequest(tenant=tenant, filter=pb.RecallFilter(tags_any=["zz"])),
            metadata=md),
        "Rebalance": lambda: stub.Rebalance(
            pb.RebalanceRequest(tenant=tenant, dry_run=True), metadata=md),
        "Recent": lambda: stub.Recent(pb.RecentRequest(tenant=tenant), metadata=md),
        "SetClock": lambda: stub.SetClock(
            pb.SetClockRequest(now={"seconds": 1_700_000_000}), metadata=md),
        "Ledger": lambda: stub.Ledger(pb.LedgerRequest(tenant=tenant), metadata=md),
        "Stats": lambda: stub.Stats(pb.StatsRequest(tenant=tenant), metadata=md),
        "Export": export,
        "Import": lambda: stub.Import(iter([record]), metadata=md),
    }


METHODS = set(pb.DESCRIPTOR.services_by_name["MemoryService"].methods_by_name)


async def _seed(stub: Stub, keys: Keys) -> str:
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
    "read": {"RecallRead", "Get", "Recent", "Stats", "Export", "Ledger"},
    "write": {"RecallRead", "Get", "Recent", "Stats", "Export", "Ledger", "Store", "StoreBatch",
              "Recall", "Update", "Import", "Delete"},
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
                "Get", "Update"} else grpc.StatusCode.OK
            assert code == expected, (tenant, name, code)


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


async def test_a_key_over_its_rate_is_told_when_to_retry(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock, keys: Keys
) -> None:
    async with (
        running_server(tmp_path / "d", embedder, clock, api_keys_file=keys.path,
                       rate_per_key=1.0, rate_burst=3) as srv,
        grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as ch,
    ):
        stub = Stub(ch)
        for _ in range(3):
            await stub.Stats(pb.StatsRequest(), metadata=auth(keys.a_read))
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Stats(pb.StatsRequest(), metadata=auth(keys.a_read))
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        status = rpc_status.from_call(err.value)  # type: ignore[arg-type]
        retry = error_details_pb2.RetryInfo()
        assert status is not None and status.details[0].Unpack(retry)
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
