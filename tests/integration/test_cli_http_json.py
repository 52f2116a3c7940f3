"""One JSON: ``celestial --json`` prints the document the HTTP port answers for the same call
(the contract's JSON mapping: camelCase, enums by name, 64-bit integers as strings, times with
a Z, zero fields present), compared whole for Store, Recall, Get and Stats."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from celestial_memory.clock import ManualClock
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder

from tests.integration.conftest import running_server
from tests.integration.test_cli_json import Cli

TEXT = "Caroline moved to Lisbon in June; the conference hotel is on Avenida da Liberdade"


async def _http(h: httpx.AsyncClient, method: str, body: dict[str, Any]) -> Any:
    r = await h.post(f"/celestial.v1.MemoryService/{method}", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def _but(document: dict[str, Any], *names: str) -> dict[str, Any]:
    return {k: v for k, v in document.items() if k not in names}


async def test_cli_json_is_the_http_document(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock,
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with (running_server(tmp_path, embedder, clock, http_address="127.0.0.1:0") as srv,
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{srv.http_port}") as h):
        cli = Cli(srv, capsys)

        # Store: the same memory stored in two tenants at the same instant; only the id and
        # the tenant may differ.
        stored = await cli.json("--tenant", "cli", "store", TEXT, "--tag", "travel",
                                "--importance", "0.6")
        over_http = await _http(h, "Store", {"tenant": "http", "content": TEXT,
                                             "tags": ["travel"], "importance": 0.6})
        assert _but(stored, "memory") == _but(over_http, "memory")  # created, mergedInto
        assert _but(stored["memory"], "id", "tenant") == _but(over_http["memory"], "id", "tenant")
        assert stored["memory"]["zone"] == "ZONE_OUTER"
        assert stored["memory"]["recallCount"] == "0"  # int64: a string
        assert stored["memory"]["createdAt"].endswith("Z")
        assert stored["memory"]["pinned"] is False and stored["memory"]["sessionId"] == ""
        renamed = {**stored["memory"], "id": over_http["memory"]["id"], "tenant": "http"}
        # The same fields in the same order too.
        assert json.dumps({**stored, "memory": renamed}) == json.dumps(over_http)

        memory_id = stored["memory"]["id"]
        clock.advance(3600.0)
        assert await cli.json("--tenant", "cli", "get", memory_id) == await _http(
            h, "Get", {"tenant": "cli", "id": memory_id})

        # Recall without reinforcement changes nothing, so both answers are of one state.
        found = await cli.json("--tenant", "cli", "recall", "Where is the hotel?",
                               "--no-reinforce", "--limit", "3")
        assert found == await _http(h, "Recall", {"tenant": "cli", "query": "Where is the hotel?",
                                                  "limit": 3, "noReinforce": True})
        assert [r["memory"]["id"] for r in found["results"]] == [memory_id]
        assert found["results"][0]["foundIn"] == "ZONE_OUTER"

        stats = await cli.json("--tenant", "cli", "stats")
        assert stats == await _http(h, "Stats", {"tenant": "cli"})
        core = next(z for z in stats["zones"] if z["zone"] == "ZONE_CORE")
        assert core["count"] == "0"  # a zero field is there, not left out
