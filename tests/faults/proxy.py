"""A TCP proxy with faults, for tests: it forwards to an upstream, or refuses connections,
accepts and stays silent, or answers with garbage. It runs on its own thread and event loop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from typing import Literal

Mode = Literal["forward", "refuse", "stall", "garbage"]


class FaultProxy:
    def __init__(self, upstream: tuple[str, int] | None = None, mode: Mode = "forward") -> None:
        self.upstream, self.mode = upstream, mode
        self._loop = asyncio.new_event_loop()
        self._open: set[asyncio.StreamWriter] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop).result()
        self.port: int = self._server.sockets[0].getsockname()[1]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def set(self, mode: Mode) -> None:
        """Switch modes; connections already open are cut, so the change is seen at once."""
        self.mode = mode
        asyncio.run_coroutine_threadsafe(self._cut(), self._loop).result()

    async def _cut(self) -> None:
        for w in list(self._open):
            w.close()
        self._open.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.mode == "refuse" or (self.mode == "forward" and self.upstream is None):
            writer.close()
            return
        self._open.add(writer)
        try:
            if self.mode == "stall":
                while await reader.read(65536):
                    pass
            elif self.mode == "garbage":
                await reader.read(65536)
                writer.write(os.urandom(4096))
                await writer.drain()
                await reader.read(65536)
            else:
                assert self.upstream is not None
                up_r, up_w = await asyncio.open_connection(*self.upstream)
                self._open.add(up_w)
                await asyncio.gather(_pipe(reader, up_w), _pipe(up_r, writer))
        except (ConnectionError, OSError):
            pass
        finally:
            self._open.discard(writer)
            writer.close()

    def close(self) -> None:
        async def stop() -> None:
            self._server.close()
            await self._cut()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, OSError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    writer.close()
