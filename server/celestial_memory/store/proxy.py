"""A client wrapper that passes each method call through ``_call``: the one shape behind the
remote engine's serialising (local mode), retrying and circuit-breaking wrappers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class MethodProxy:
    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._client, name)
        if not callable(target):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._call(name, target, args, kwargs)

        return call

    def _call(self, name: str, target: Callable[..., Any], args: tuple[Any, ...],
              kwargs: dict[str, Any]) -> Any:
        raise NotImplementedError
