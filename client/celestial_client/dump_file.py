"""The export file: ExportedMemory messages, each written as a varint length and its bytes.

Binary protobuf keeps vectors and times exact. A file cut short by a crash ends in at most one
partial record; ``read`` stops before it and ``last_complete`` tells where to resume.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from celestial.v1 import memory_pb2 as pb
from google.protobuf.internal.decoder import _DecodeVarint  # type: ignore[attr-defined]
from google.protobuf.internal.encoder import _VarintBytes  # type: ignore[attr-defined]


def write(out: BinaryIO, records: Iterable[pb.ExportedMemory]) -> Iterator[pb.ExportedMemory]:
    """Write each record and flush it before yielding it, so a yielded record is on disk."""
    for r in records:
        data = r.SerializeToString()
        out.write(_VarintBytes(len(data)) + data)
        out.flush()
        yield r


def _records(path: Path) -> Iterator[tuple[int, pb.ExportedMemory]]:
    """(end offset, record) for every complete record."""
    buf = path.read_bytes()
    pos = 0
    while pos < len(buf):
        try:
            size, start = _DecodeVarint(buf, pos)
        except IndexError:
            return
        if start + size > len(buf):
            return
        rec = pb.ExportedMemory()
        rec.ParseFromString(buf[start:start + size])
        pos = start + size
        yield pos, rec


def read(path: Path) -> Iterator[pb.ExportedMemory]:
    for _, rec in _records(path):
        yield rec


def last_complete(path: Path) -> tuple[int, int, str]:
    """(records, byte length of the complete part, last memory id) of an export file."""
    count, end, last = 0, 0, ""
    if path.exists():
        for pos, rec in _records(path):
            count, end, last = count + 1, pos, rec.memory.id
    return count, end, last
