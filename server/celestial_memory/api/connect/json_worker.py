"""A JSON conversion worker: a process of its own that converts between JSON and binary
protobuf for the HTTP port (conversion.py), so that the work never runs under the interpreter
lock of the process serving calls.

    python -m celestial_memory.api.connect.json_worker

Jobs come on its standard input and answers go out on its standard output, one at a time, each
framed by a small header. It ends when its input closes: its server stopped, or died (a kill -9
closes the pipe too), so no worker outlives its server. A process started by hand rather than
by ``multiprocessing``: that would import the server's main module again in each worker, and
run the script of anyone who embeds the server without a ``__main__`` guard.
"""

from __future__ import annotations

import asyncio
import json
import struct
import sys
from typing import BinaryIO

from celestial_client._core import contract_json
from google.protobuf import descriptor_pool, json_format, message_factory
from google.protobuf.message import Message

MODULE = "celestial_memory.api.connect.json_worker"
PARSE, PRINT = 1, 2  # the jobs
DONE, INVALID, TOO_MANY = 0, 1, 2  # an answer's status: the data follows, or the reason
MAX_VALUES = 131_072  # no message of the contract needs more; converting this many takes ~0.5 s
_JOB = struct.Struct(">BII")  # the job, its message's full name's length, its data's length
_ANSWER = struct.Struct(">BI")  # the status, the length of what follows
Answer = tuple[int, bytes]


def json_values(data: bytes | bytearray) -> int:
    """At least the number of values in a JSON text, counted at C speed: every value after the
    first follows a comma or a colon (commas inside strings count too, erring toward caution)."""
    return data.count(b",") + data.count(b":") + 1


def _message_class(full_name: str) -> type[Message]:
    import celestial_client.v1.memory_pb2  # noqa: F401  # registers the contract's messages
    descriptor = descriptor_pool.Default().FindMessageTypeByName(full_name)
    return message_factory.GetMessageClass(descriptor)


def json_to_binary(full_name: str, data: bytes) -> Answer:
    """A JSON request as binary protobuf; or, refused, how many values it holds (``TOO_MANY``)
    or the parser's complaint (``INVALID``)."""
    if (values := json_values(data)) > MAX_VALUES:
        return TOO_MANY, str(values).encode()
    message = _message_class(full_name)()
    try:
        json_format.Parse(data, message, ignore_unknown_fields=False)
    except (json_format.ParseError, ValueError, TypeError, RecursionError) as exc:
        return INVALID, str(exc).encode()
    return DONE, message.SerializeToString()


def binary_to_json(full_name: str, data: bytes) -> Answer:
    """A response in binary protobuf as JSON text."""
    return DONE, to_json(_message_class(full_name).FromString(data))


def to_json(message: Message) -> bytes:
    """The contract's JSON mapping of ``message``, every field present, in the contract's order:
    the document ``celestial --json`` prints too (one function for both)."""
    return json.dumps(contract_json.to_dict(message), indent=2).encode()


def convert(job: int, full_name: str, data: bytes) -> Answer:
    return json_to_binary(full_name, data) if job == PARSE else binary_to_json(full_name, data)


def _read(stream: BinaryIO, size: int) -> bytes | None:
    data = stream.read(size)
    return data if len(data) == size else None


def serve(jobs: BinaryIO, answers: BinaryIO) -> None:
    """Answers jobs until ``jobs`` closes."""
    while (head := _read(jobs, _JOB.size)) is not None:
        job, name_size, size = _JOB.unpack(head)
        name, data = _read(jobs, name_size), _read(jobs, size)
        if name is None or data is None:
            return
        try:
            status, payload = convert(job, name.decode(), data)
        except Exception as exc:  # an answer, never a dead worker
            status, payload = INVALID, f"{type(exc).__name__}: {exc}".encode()
        answers.write(_ANSWER.pack(status, len(payload)) + payload)
        answers.flush()


class WorkerGone(Exception):
    """The worker died (killed, out of memory) before it answered."""


class Worker:
    """One worker process and the pipes to it, one job at a time."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process

    @classmethod
    async def start(cls) -> Worker:
        return cls(await asyncio.create_subprocess_exec(
            sys.executable, "-m", MODULE, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE))

    async def run(self, job: int, full_name: str, data: bytes) -> Answer:
        """The job's answer: its status, and the data or the reason it was refused."""
        assert self._process.stdin is not None and self._process.stdout is not None
        name = full_name.encode()
        try:
            self._process.stdin.write(_JOB.pack(job, len(name), len(data)) + name + data)
            await self._process.stdin.drain()
            status, size = _ANSWER.unpack(await self._process.stdout.readexactly(_ANSWER.size))
            payload = await self._process.stdout.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            raise WorkerGone(str(exc)) from None
        return status, payload

    async def stop(self) -> None:
        """Ends the worker: its input closed, and killed if it does not end at once."""
        if self._process.returncode is not None:
            return
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            await asyncio.wait_for(self._process.wait(), 2.0)
        except TimeoutError:
            self._process.kill()
            await self._process.wait()


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
