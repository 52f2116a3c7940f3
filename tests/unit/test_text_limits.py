"""A text over its limit is refused naming the setting that raises the limit, and the name is
the environment variable the settings really read."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from celestial_memory.config import Settings
from celestial_memory.domain import validation
from celestial_memory.errors import InvalidArgument


@pytest.mark.parametrize(("check", "setting"), [
    (validation.content, "max_content_chars"), (validation.context, "max_context_chars")])
def test_too_long_names_the_setting(check: Callable[[str, Settings], str], setting: str,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    env = validation.setting_env(setting)
    assert env == f"CELESTIAL_{setting.upper()}"
    monkeypatch.setenv(env, "10")
    s = Settings()
    assert getattr(s, setting) == 10  # the variable named is the one that sets it
    assert check("x" * 10, s) == "x" * 10
    with pytest.raises(InvalidArgument) as caught:
        check("x" * 11, s)
    assert caught.value.problem == f"must be at most 10 characters, got 11 ({env} raises it)"
