"""What ``celestial --json`` prints without a server: a response as the contract's JSON mapping
(zero fields present, in the contract's order), the pages of one read joined into one response,
and the text's one score per memory."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from celestial_client._core.contract_json import to_dict
from celestial_client.cli.output import as_json, show_memory
from celestial_client.cli.recording import joined
from celestial_client.types import Memory, ScoreBreakdown, Zone
from celestial_client.v1 import memory_pb2 as pb


def test_a_response_prints_every_field_in_the_contracts_order() -> None:
    stats = pb.StatsResponse(zones=[pb.ZoneStats(zone=pb.ZONE_CORE)], total=3,
                             embedding_model="m", dimension=384)
    doc = to_dict(stats)
    assert list(doc) == [f.json_name for f in pb.StatsResponse.DESCRIPTOR.fields]
    assert doc["zones"] == [{"zone": "ZONE_CORE", "count": "0", "capacity": "0"}]  # zeros there
    assert doc["total"] == "3" and doc["archived"] == "0"  # int64: strings
    assert json.loads(as_json(stats)) == doc
    # A message field that is not set stays out (it has presence); a set one is there.
    memory = to_dict(pb.Memory(id="a", created_at={"seconds": 1}))
    assert "nextMove" not in memory and memory["createdAt"] == "1970-01-01T00:00:01Z"
    assert memory["recallCount"] == "0" and memory["tags"] == [] and memory["metadata"] == {}


def test_pages_of_one_read_are_one_response() -> None:
    first = pb.ListResponse(memories=[pb.Memory(id="a"), pb.Memory(id="b")], next_page_token="t")
    last = pb.ListResponse(memories=[pb.Memory(id="c")])
    both = joined([first, last])
    assert [m.id for m in both.memories] == ["a", "b", "c"]
    assert both.next_page_token == ""  # the last page's: the end
    assert joined([first]) is first


def test_the_text_shows_one_score_the_one_as_of_the_answer() -> None:
    at = datetime(2026, 11, 22, 9, 30, tzinfo=UTC)
    m = Memory(id="a", tenant="t", content="c", zone=Zone.INNER, score=0.36503,
               importance=0.8, recall_count=1, created_at=at, last_recalled_at=at,
               breakdown=ScoreBreakdown(0.1, -0.0000000077, 0.8, 0.5, 0.36424))
    text = show_memory(m)
    assert "score 0.364" in text and "I 0.364" in text and "0.365" not in text
    assert "F 0.000" in text  # rounded first: never -0.000
