"""The embedded store opens a data folder in one process at a time: a second opening names the
folder and says that another server holds it, instead of the engine's WAL lock error."""

from __future__ import annotations

from pathlib import Path

import pytest
from celestial_memory.errors import StoreUnavailable
from celestial_memory.store import open_edge


def test_a_folder_in_use_is_named_with_its_holder(tmp_path: Path) -> None:
    held = open_edge(tmp_path / "memories", 8)
    try:
        with pytest.raises(StoreUnavailable) as caught:
            open_edge(tmp_path / "memories", 8)
    finally:
        held.close()
    message = str(caught.value)
    assert message.startswith(f"the data folder {tmp_path} is in use by another Celestial server")
    assert "WouldBlock" not in message
    assert "WouldBlock" in str(caught.value.__cause__)  # the engine's own words stay as the cause


def test_the_folder_opens_again_once_its_holder_closed(tmp_path: Path) -> None:
    open_edge(tmp_path / "memories", 8).close()
    open_edge(tmp_path / "memories", 8).close()
