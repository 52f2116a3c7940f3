"""``celestial eval locomo --policy``: a conversation replayed through Observe beside storing
every turn, in one report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from celestial_memory.clock import ManualClock
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder

from tests.integration.conftest import running_server
from tests.integration.test_cli_json import Cli


async def test_a_replay_through_the_policy_reports_skips_evidence_and_recall(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock,
    capsys: pytest.CaptureFixture[str],
) -> None:
    conversation = {
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bo!"},
            {"speaker": "Bo", "dia_id": "D1:2", "text": "Hey Ann, good to see you."},
            {"speaker": "Ann", "dia_id": "D1:3", "text": "I adopted a grey cat called Miso."},
            {"speaker": "Bo", "dia_id": "D1:4", "text": "My train to Porto leaves at noon."},
            {"speaker": "Ann", "dia_id": "D1:5", "text": "Thanks!"},
        ],
        "qa": [{"question": "What is the name of Ann's cat?", "evidence": ["D1:3"],
                "category": 4}],
    }
    data = tmp_path / "conv.json"
    data.write_text(json.dumps(conversation))
    # No exploration: the bandit's own choice, not a draw, decides the two facts.
    async with running_server(tmp_path / "data", embedder, clock, admin_clock=True,
                              policy_exploration=0.0) as srv:
        report = await Cli(srv, capsys).json("eval", "locomo", str(data), "--k", "1",
                                             "--policy")
    assert report["policy"] is True and report["turns"] == 5 and report["questions"] == 1
    # The greetings and the thanks are skipped by rule (read past the speaker's label); the
    # fact the question needs is kept.
    assert report["decisions"]["SKIP"] == 3 and report["skip_rate"] == 0.6
    assert report["evidence_kept"] == 1.0
    assert report["questions_retrieve"] == 1.0
    assert report["settings"]["every turn"]["R@1"] == 1.0
    assert report["settings"]["policy"]["R@1"] == 1.0
