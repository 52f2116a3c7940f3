"""docs/configuration.md must be what `make docs-config` generates from the settings now."""

from __future__ import annotations

from pathlib import Path

import pytest
from celestial_memory.config import Settings
from celestial_memory.ops import config_reference


def test_configuration_page_is_current() -> None:
    committed = config_reference.PAGE.read_text(encoding="utf-8")
    assert committed == config_reference.render(), \
        "docs/configuration.md is stale: run `make docs-config`"


def test_every_setting_is_described_once() -> None:
    names = [row[0] for row in config_reference.rows()]
    assert names == list(Settings.model_fields)
    undescribed = [name for name, _, _, _, description in config_reference.rows() if not description]
    assert not undescribed, f"settings without a description in config.py: {undescribed}"


def test_rows_show_type_bounds_default_and_variable() -> None:
    by_name = {row[0]: row for row in config_reference.rows()}
    assert by_name["address"][1:4] == ("CELESTIAL_ADDRESS", "str", "`localhost:50051`")
    assert by_name["backend"][2] == "edge \\| qdrant"
    assert by_name["min_relevance"][2:4] == ("float ≥ 0, ≤ 1", "`0.2`")
    assert by_name["zone_capacities"][3] == "`[20,100,1000,0,0]`"
    assert by_name["qdrant_api_key"][2:4] == ("secret", "unset")
    assert by_name["reinforce_flush_ms"][2] == "float ≥ 0, ≤ 100"


def test_check_mode_reports_a_stale_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "configuration.md"
    assert config_reference.main(["--output", str(page), "--check"]) == 1
    assert "stale" in capsys.readouterr().err
    assert config_reference.main(["--output", str(page)]) == 0
    assert config_reference.main(["--output", str(page), "--check"]) == 0
