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
import struct
import sys
from typing import BinaryIO

from google.protobuf import descriptor_pool, json_format, message_factory
from google.protobuf.message import Message

MODULE = "celestial_memory.api.connect.json_worker"
PARSE, PRINT = 1, 2
_JOB = struct.Struct(">BII")  # the job, its message's full name's length, its data's length
_ANSWER = struct.Struct(">BI")  # 0 done (data follows) or 1 refused (the reason follows)


def _message_class(full_name: str) -> type[Message]:
    import celestial_client.v1.memory_pb2  # noqa: F401  # registers the contract's messages
    descriptor = descriptor_pool.Default().FindMessageTypeByName(full_name)
    return message_factory.GetMessageClass(descriptor)


def json_to_binary(full_name: str, data: bytes) -> bytes | str:
    """A JSON request as binary protobuf, or the parser's complaint."""
    message = _message_class(full_name)()
    try:
        json_format.Parse(data, message, ignore_unknown_fields=False)
    except (json_format.ParseError, ValueError, TypeError, RecursionError) as exc:
        return str(exc)
    return message.SerializeToString()


def binary_to_json(full_name: str, data: bytes) -> bytes:
    """A response in binary protobuf as JSON text."""
    return json_format.MessageToJson(_message_class(full_name).FromString(data)).encode()


def convert(job: int, full_name: str, data: bytes) -> bytes | str:
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
            out = convert(job, name.decode(), data)
        except Exception as exc:  # an answer, never a dead worker
            out = f"{type(exc).__name__}: {exc}"
        refused = isinstance(out, str)
        payload = out.encode() if isinstance(out, str) else out
        answers.write(_ANSWER.pack(int(refused), len(payload)) + payload)
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

    async def run(self, job: int, full_name: str, data: bytes) -> bytes | str:
        """The job's answer: bytes, or the reason it was refused."""
        assert self._process.stdin is not None and self._process.stdout is not None
        name = full_name.encode()
        try:
            self._process.stdin.write(_JOB.pack(job, len(name), len(data)) + name + data)
            await self._process.stdin.drain()
            refused, size = _ANSWER.unpack(await self._process.stdout.readexactly(_ANSWER.size))
            payload = await self._process.stdout.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError) as exc:
            raise WorkerGone(str(exc)) from None
        return payload.decode() if refused else payload

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
