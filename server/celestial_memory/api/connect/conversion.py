"""JSON conversion off the loop that serves every caller.

protobuf's JSON parser and printer are Python walking every value: a 4 MB body of numbers is
seconds of work, and an Export's memories (two 384-number vectors each) are milliseconds apiece.
Done on the event loop that also serves the gRPC port, that work stalled every caller. Here:

- a message small enough to convert in about a millisecond (``INLINE_VALUES`` JSON values, or
  a few KiB of binary) is converted where it is, as before: the hop would cost more;
- a larger one is converted in worker processes (json_worker.py;
  ``CELESTIAL_HTTP_CONVERSION=process``, the default; ``thread`` and ``loop`` are kept for
  comparison, docs/benchmarks.md), which hand back binary protobuf or JSON text, both cheap to
  take on the loop;
- a JSON request of more than ``MAX_VALUES`` values is refused before any conversion: no
  message of the contract needs that many, and the work it would cost is the caller's only.
  Counting is cheap but not free (a few milliseconds for 4 MB), so a large body is counted by
  the worker too.

Connect decodes a request synchronously inside its own handling, so a large JSON request is
*deferred*: the codec answers an empty message and keeps the bytes (``Deferred``), and the
transport (transport.py) converts them, awaiting the worker, before the servicer sees the
request. A large response is converted first and handed to the codec as ``Encoded`` text.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import logging
import os
from typing import Literal, TypeVar

from celestial_memory.api.connect.json_worker import (
    DONE,
    MAX_VALUES,
    PARSE,
    PRINT,
    TOO_MANY,
    Answer,
    Worker,
    WorkerGone,
    convert,
    json_values,
)
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

log = logging.getLogger(__name__)

INLINE_VALUES = 256  # a JSON request with at most this many values parses in about 1 ms
# A response of at most this many bytes prints in about a millisecond: text prints at about
# 0.1 µs a byte, numbers (vectors) at nearly 1 µs a byte of binary.
INLINE_TEXT_BYTES, INLINE_NUMBER_BYTES = 8192, 1024
# JSON prints every field, zero ones too (json_worker.py): a message with many nearly empty
# parts (memories holding only an id) is small in binary and large in JSON, so a response with
# more nested messages than this goes to a worker whatever its size (about 0.04 ms each).
INLINE_MESSAGES = 24
SCAN_BYTES = 65_536  # a larger JSON request is counted by the worker, not on the loop
M = TypeVar("M", bound=Message)
Where = Literal["process", "thread", "loop"]


class Encoded:
    """A response message already printed as JSON, which the codec passes through."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


class Deferred:
    """The JSON requests of one call that the codec left for the transport to convert: the
    empty message it answered, by identity, with the bytes it held."""

    def __init__(self) -> None:
        self._held: dict[int, tuple[Message, bytes]] = {}

    def hold(self, message: Message, data: bytes) -> None:
        self._held[id(message)] = (message, data)

    def take(self, message: Message) -> bytes | None:
        held = self._held.pop(id(message), None)
        return None if held is None or held[0] is not message else held[1]


# Set by the transport for each call; the codec leaves large requests in it.
DEFERRED: contextvars.ContextVar[Deferred | None] = contextvars.ContextVar("deferred", default=None)


def _too_many(values: int) -> ConnectError:
    return ConnectError(Code.RESOURCE_EXHAUSTED, (
        f"a JSON message may hold at most {MAX_VALUES} values, this one about {values}; "
        "send fewer, or binary protobuf (application/proto)"))


def _nested(message: Message, most: int) -> int:
    """How many messages ``message`` holds, counted until more than ``most`` (ListFields is
    the C library's: a bounded walk costs microseconds)."""
    count, todo = 0, [message]
    while todo and count <= most:
        for f, value in todo.pop().ListFields():
            if f.message_type is None or f.message_type.GetOptions().map_entry:
                continue
            inner = list(value) if f.is_repeated else [value]
            count += len(inner)
            todo.extend(inner)
    return count


@functools.cache
def _inline_bytes(descriptor: Descriptor) -> int:
    """How large a message of this type prints in about a millisecond: less when it may hold
    repeated numbers, which print slowest."""
    seen: set[str] = set()

    def numbers(d: Descriptor) -> bool:
        if d.full_name in seen:
            return False
        seen.add(d.full_name)
        return any((f.is_repeated
                   and f.type in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE))
                   or (f.message_type is not None and numbers(f.message_type))
                   for f in d.fields)

    return INLINE_NUMBER_BYTES if numbers(descriptor) else INLINE_TEXT_BYTES


class Converter:
    """Where the HTTP port converts large JSON (module docstring); one per HTTP server."""

    def __init__(self, where: Where, workers: int | None = None) -> None:
        self.where = where
        self._workers = workers or max(1, (os.cpu_count() or 2) // 2)
        # Idle workers, and None for each worker not started yet (or lost): a call takes one.
        self._idle: asyncio.Queue[Worker | None] = asyncio.Queue()
        for _ in range(self._workers):
            self._idle.put_nowait(None)
        self._threads: concurrent.futures.ThreadPoolExecutor | None = None

    def inline_request(self, data: bytes | bytearray) -> bool:
        """Whether a JSON request is converted where it is; one over ``MAX_VALUES`` is
        refused."""
        if self.where != "loop" and len(data) > SCAN_BYTES:
            return False  # counted by the worker
        if (values := json_values(data)) > MAX_VALUES:
            raise _too_many(values)
        return self.where == "loop" or values <= INLINE_VALUES

    async def parse(self, data: bytes, message: M) -> M:
        """``message`` filled from the JSON ``data``, converted away from the loop."""
        status, out = await self._run(PARSE, message.DESCRIPTOR.full_name, bytes(data))
        if status == TOO_MANY:
            raise _too_many(int(out))
        if status != DONE:
            raise ConnectError(Code.INVALID_ARGUMENT, f"unmarshal message: {out.decode()}")
        message.MergeFromString(out)
        return message

    async def print(self, message: Message) -> Message | Encoded:
        """``message``, or its JSON when printing it would cost the loop (module docstring)."""
        if self.where == "loop" or (message.ByteSize() <= _inline_bytes(message.DESCRIPTOR)
                                    and _nested(message, INLINE_MESSAGES) <= INLINE_MESSAGES):
            return message
        status, out = await self._run(PRINT, message.DESCRIPTOR.full_name,
                                      message.SerializeToString())
        if status != DONE:
            raise RuntimeError(f"printing a {message.DESCRIPTOR.full_name} as JSON: "
                               f"{out.decode()}")
        return Encoded(out)

    async def _run(self, job: int, name: str, data: bytes) -> Answer:
        if self.where == "thread":
            if self._threads is None:
                self._threads = concurrent.futures.ThreadPoolExecutor(
                    self._workers, thread_name_prefix="json-conversion")
            return await asyncio.get_running_loop().run_in_executor(
                self._threads, convert, job, name, data)
        for attempt in (1, 2):
            worker = await self._take()
            try:
                out = await worker.run(job, name, data)
            except WorkerGone as gone:
                self._idle.put_nowait(None)
                log.warning("a JSON conversion worker died (%s); starting another", gone)
                if attempt == 2:
                    raise
                continue
            except BaseException:
                # Cancelled mid-job (its caller went away): the pipe is mid-answer, so the
                # worker cannot take another job.
                self._idle.put_nowait(None)
                await asyncio.shield(worker.stop())
                raise
            self._idle.put_nowait(worker)
            return out
        raise AssertionError("unreachable")

    async def _take(self) -> Worker:
        """An idle worker, or a new one in the place of one not started or lost."""
        worker = await self._idle.get()
        if worker is not None:
            return worker
        try:
            return await Worker.start()
        except BaseException:
            self._idle.put_nowait(None)
            raise

    async def close(self) -> None:
        """Ends the workers (each also ends by itself once this process is gone)."""
        idle = []
        while not self._idle.empty():
            if (worker := self._idle.get_nowait()) is not None:
                idle.append(worker)
        await asyncio.gather(*(w.stop() for w in idle), return_exceptions=True)
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)
            self._threads = None
