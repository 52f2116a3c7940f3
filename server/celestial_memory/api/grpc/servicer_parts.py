"""What the servicer's mixins (graph_rpcs, feedback_rpcs, reflect_rpcs, transfer_rpcs,
policy_rpcs) use of ``MemoryServicer``: declared once here, defined there, where they come
first in the method order."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import grpc
from celestial_client.v1 import memory_pb2 as pb
from celestial_memory.memory.service import MemoryService

T = TypeVar("T")
Context = grpc.aio.ServicerContext[Any, Any]


class ServicerParts:
    _service: MemoryService

    def _tenant(self, requested: str) -> str:
        raise NotImplementedError

    async def _run(self, context: Context, fn: Callable[..., T], *args: Any,
                   cancellable: bool = False) -> T:
        raise NotImplementedError

    def _memory(self, m: Any, at: float | None = None) -> pb.Memory:
        raise NotImplementedError

    def _page_budget(self) -> int:
        raise NotImplementedError

    def _client_stream(self, method: str, requests: AsyncIterator[T], context: Context,
                       ) -> contextlib.AbstractAsyncContextManager[AsyncIterator[T]]:
        raise NotImplementedError
