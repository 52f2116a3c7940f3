"""JSON conversion off the loop that serves every caller.

protobuf's JSON parser and printer are Python walking every value: a 4 MB body of numbers is
seconds of work, and an Export's memories (two 384-number vectors each) are milliseconds apiece.
Done on the event loop that also serves the gRPC port, that work stalled every caller. Here:

- a message small enough to convert in well under a millisecond (``INLINE_VALUES`` JSON values
  or ``INLINE_BYTES`` of binary) is converted where it is, as before: the hop would cost more;
- a larger one is converted in worker processes (``CELESTIAL_HTTP_CONVERSION=process``, the
  default; ``thread`` and ``loop`` are kept for comparison, docs/benchmarks.md), which hand back
  binary protobuf or JSON text, both cheap to take on the loop;
- a JSON request of more than ``MAX_VALUES`` values is refused before any conversion: no
  message of the contract needs that many, and the work it would cost is the caller's only.

Connect decodes a request synchronously inside its own handling, so a large JSON request is
*deferred*: the codec answers an empty message and keeps the bytes (``Deferred``), and the
transport (transport.py) converts them, awaiting the worker, before the servicer sees the
request. A large response is converted first and handed to the codec as ``Encoded`` text.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Literal, TypeVar

from connectrpc.code import Code
from connectrpc.errors import ConnectError
from google.protobuf import descriptor_pool, json_format, message_factory
from google.protobuf.message import Message

log = logging.getLogger(__name__)

INLINE_VALUES = 256  # a JSON request with at most this many values parses in about 1 ms
INLINE_BYTES = 2048  # a response of at most this many bytes prints in about 1 ms
MAX_VALUES = 131_072  # no message of the contract needs more; converting this many takes ~0.5 s
M = TypeVar("M", bound=Message)
Where = Literal["process", "thread", "loop"]


def json_values(data: bytes | bytearray) -> int:
    """At least the number of values in a JSON text, counted at C speed: every value after the
    first follows a comma or a colon (commas inside strings count too, erring toward caution)."""
    return data.count(b",") + data.count(b":") + 1


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


def _message_class(full_name: str) -> type[Message]:
    import celestial_client.v1.memory_pb2  # noqa: F401  # registers the contract's messages
    descriptor = descriptor_pool.Default().FindMessageTypeByName(full_name)
    return message_factory.GetMessageClass(descriptor)


def json_to_binary(full_name: str, data: bytes) -> bytes | str:
    """A JSON request as binary protobuf, or the parser's complaint (a worker's job)."""
    message = _message_class(full_name)()
    try:
        json_format.Parse(data, message, ignore_unknown_fields=False)
    except (json_format.ParseError, ValueError, TypeError, RecursionError) as exc:
        return str(exc)
    return message.SerializeToString()


def binary_to_json(full_name: str, data: bytes) -> bytes:
    """A response in binary protobuf as JSON text (a worker's job)."""
    return json_format.MessageToJson(_message_class(full_name).FromString(data)).encode()


def _worker_start(server_pid: int) -> None:
    """A worker's start: the contract loaded, and a watch that ends the worker once its server
    is gone (killed with -9, a worker would otherwise live on, holding its memory)."""
    _message_class("celestial.v1.StoreRequest")

    def watch() -> None:
        while os.getppid() == server_pid:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="server-watch", daemon=True).start()


class Converter:
    """Where the HTTP port converts large JSON (module docstring); one per HTTP server."""

    def __init__(self, where: Where, workers: int | None = None) -> None:
        self.where = where
        self._workers = workers or max(1, (os.cpu_count() or 2) // 2)
        self._pool: concurrent.futures.Executor | None = None
        # Calls waiting for a worker wait here, on the loop, holding no worker's queue.
        self._slots = asyncio.Semaphore(self._workers * 2)

    def inline_request(self, data: bytes | bytearray) -> bool:
        """Whether a JSON request is converted where it is; one over ``MAX_VALUES`` is
        refused."""
        values = json_values(data)
        if values > MAX_VALUES:
            raise ConnectError(Code.RESOURCE_EXHAUSTED, (
                f"a JSON message may hold at most {MAX_VALUES} values, this one about {values}; "
                "send fewer, or binary protobuf (application/proto)"))
        return self.where == "loop" or values <= INLINE_VALUES

    async def parse(self, data: bytes, message: M) -> M:
        """``message`` filled from the JSON ``data``, converted away from the loop."""
        out = await self._run(json_to_binary, message.DESCRIPTOR.full_name, bytes(data))
        if isinstance(out, str):
            raise ConnectError(Code.INVALID_ARGUMENT, f"unmarshal message: {out}")
        message.MergeFromString(out)
        return message

    async def print(self, message: Message) -> Message | Encoded:
        """``message``, or its JSON when printing it would cost the loop (module docstring)."""
        if self.where == "loop" or message.ByteSize() <= INLINE_BYTES:
            return message
        return Encoded(await self._run(binary_to_json, message.DESCRIPTOR.full_name,
                                       message.SerializeToString()))

    async def _run(self, job: Callable[[str, bytes], Any], name: str, data: bytes) -> Any:
        async with self._slots:
            loop = asyncio.get_running_loop()
            try:
                return await loop.run_in_executor(self._executor(), job, name, data)
            except BrokenProcessPool:  # a worker died (killed, out of memory): a new pool
                log.warning("a JSON conversion worker died; starting new ones")
                self._pool = None
                return await loop.run_in_executor(self._executor(), job, name, data)

    def _executor(self) -> concurrent.futures.Executor:
        if self._pool is None:
            if self.where == "process":
                # spawn: a fork would copy the gRPC server's threads and locks mid-flight.
                self._pool = concurrent.futures.ProcessPoolExecutor(
                    self._workers, mp_context=multiprocessing.get_context("spawn"),
                    initializer=_worker_start, initargs=(os.getpid(),))
            else:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    self._workers, thread_name_prefix="json-conversion")
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
