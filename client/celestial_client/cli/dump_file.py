"""The export file: ExportedMemory messages, each written as a varint length and its bytes.

Binary protobuf keeps vectors and times exact. A file cut short by a crash ends in at most one
partial record; ``read`` stops before it and ``last_complete`` tells where to resume. Files are
streamed, never loaded whole: an export of a million memories is gigabytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from google.protobuf.internal.decoder import _DecodeVarint  # type: ignore[attr-defined]
from google.protobuf.internal.encoder import _VarintBytes  # type: ignore[attr-defined]

from celestial_client._core.convert import exported, exported_record
from celestial_client.types import ExportedMemory
from celestial_client.v1 import memory_pb2 as pb


def write(out: BinaryIO, records: Iterable[ExportedMemory]) -> Iterator[ExportedMemory]:
    """Write each record and flush it before yielding it, so a yielded record is on disk."""
    for r in records:
        data = r.record or exported_record(r).SerializeToString()
        out.write(_VarintBytes(len(data)) + data)
        out.flush()
        yield r


def _frames(f: BinaryIO) -> Iterator[tuple[int, int]]:
    """(start, size) of every complete record, read from ``f`` without loading the file: the
    caller reads or skips each record's bytes before asking for the next."""
    total = f.seek(0, 2)
    pos = f.seek(0)
    while pos < total:
        head = f.read(10)  # a varint length takes at most 10 bytes
        try:
            size, used = _DecodeVarint(head, 0)
        except IndexError:
            return
        start = pos + used
        if start + size > total:
            return
        f.seek(start)
        yield start, size
        pos = f.seek(start + size)


def _records(path: Path) -> Iterator[tuple[int, pb.ExportedMemory]]:
    """(end offset, record) for every complete record, streamed."""
    with path.open("rb") as f:
        for start, size in _frames(f):
            rec = pb.ExportedMemory()
            rec.ParseFromString(f.read(size))
            yield start + size, rec


def read(path: Path) -> Iterator[ExportedMemory]:
    for _, rec in _records(path):
        yield exported(rec)


def last_complete(path: Path) -> tuple[int, int, str]:
    """(records, byte length of the complete part, last memory id) of an export file. Only the
    last record is parsed; the others are skipped by their lengths."""
    if not path.exists():
        return 0, 0, ""
    count, last = 0, (0, 0)
    with path.open("rb") as f:
        for frame in _frames(f):
            count, last = count + 1, frame
        if not count:
            return 0, 0, ""
        f.seek(last[0])
        rec = pb.ExportedMemory()
        rec.ParseFromString(f.read(last[1]))
    return count, last[0] + last[1], rec.memory.id
