"""grpcurl, as a caller with no .proto file would use it: reflection describes the service and
health, and the JSON it prints for Stats parses under strict rules (Node's JSON.parse, and no
NaN or infinities, which Go's encoding/json refuses)."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path

import pytest
from celestial_memory.api.grpc.server import MemoryServer

from tests.processes import finished

GRPCURL = shutil.which("grpcurl") or str(Path(sys.executable).parent / "grpcurl")

pytestmark = pytest.mark.skipif(not Path(GRPCURL).exists(), reason="grpcurl is not installed")


async def grpcurl(*args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        GRPCURL, "-plaintext", *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT)
    out, _ = await finished(proc, 60)
    assert proc.returncode == 0, out.decode()
    return out.decode()


async def test_describe_works_for_the_service_and_health(server: MemoryServer) -> None:
    target = f"127.0.0.1:{server.port}"
    listed = await grpcurl(target, "list")
    assert {"celestial.v1.MemoryService", "grpc.health.v1.Health"} <= set(listed.split())
    service = await grpcurl(target, "describe", "celestial.v1.MemoryService")
    assert "rpc List ( .celestial.v1.ListRequest ) returns ( .celestial.v1.ListResponse );" in service
    health = await grpcurl(target, "describe", "grpc.health.v1.Health")
    assert "rpc Check" in health
    message = await grpcurl(target, "describe", "celestial.v1.StatsResponse")
    assert "storage_backend" in message


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
async def test_stats_json_parses_strictly(server: MemoryServer) -> None:
    target = f"127.0.0.1:{server.port}"
    await grpcurl("-d", '{"tenant": "j", "content": "hello", "requestId": "h"}', target,
                  "celestial.v1.MemoryService/Store")
    text = await grpcurl("-d", '{"tenant": "j"}', target, "celestial.v1.MemoryService/Stats")
    stats = json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in {text}"))
    assert [z["zone"] for z in stats["zones"]][-1] == "ZONE_CLOUD"
    assert "minScore" not in stats["zones"][-1] and stats["total"] == "1"
    proc = await asyncio.create_subprocess_exec(
        "node", "-e", "const s = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "if (s.zones.some(z => z.minScore === null)) process.exit(3);"
        "console.log(s.zones.length)",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    out, _ = await finished(proc, 60, text.encode())
    assert proc.returncode == 0 and out.decode().strip() == "5"
