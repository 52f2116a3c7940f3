"""Client streams (StoreBatch, Import) that go quiet end instead of holding a slot forever."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TypeVar

from celestial_memory.errors import DeadlineExceeded

T = TypeVar("T")


async def items_until_idle(requests: AsyncIterator[T], method: str, idle_s: float
                           ) -> AsyncIterator[T]:
    """The stream's items, ending it with DEADLINE_EXCEEDED once it sends nothing for
    ``idle_s`` (only the wait for the next item counts, not the work done between items)."""
    items = aiter(requests)
    while True:
        try:
            async with asyncio.timeout(idle_s):
                item = await anext(items)
        except StopAsyncIteration:
            return
        except TimeoutError:
            raise DeadlineExceeded(f"{method} sent nothing for {idle_s:g} s") from None
        yield item
