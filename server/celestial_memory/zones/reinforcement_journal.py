"""An append-only journal of reinforcements waiting to be written, so writing them behind loses
nothing when the process dies.

A recall appends the reinforced fields of what it returns (one JSON line, written whole) before
it answers; the queue writes them to the store later and drops the journal files it has written.
A ``write`` without ``fsync`` survives the process, not the machine: the embedded engine's own
write-ahead log gives the same (it syncs on flush and close, not per update), so the journal
keeps the guarantee a write-through gives on that engine.

Each server process journals under its own token and holds an exclusive ``flock`` on
``<token>.lock`` while it lives. At start, the journals whose lock can be taken belong to
processes that are gone: they are read back (a torn last line is skipped), merged (the latest
state of each memory wins) and handed to the caller to write, then removed. So two processes
sharing a data directory never replay each other's live journal.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

Fields = dict[str, Any]
Recovered = dict[str, dict[str, Fields]]  # tenant -> id -> latest fields


class ReinforcementJournal:
    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._dir = directory
        self._token = uuid.uuid4().hex
        self._lock_fd = os.open(directory / f"{self._token}.lock", os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        self._seq = 0
        self._fd = self._open_segment(0)
        self._segments: list[Path] = [self._segment_path(0)]
        self._dirty = False  # anything appended to the current segment

    def _segment_path(self, seq: int) -> Path:
        return self._dir / f"{self._token}-{seq:08d}.jsonl"

    def _open_segment(self, seq: int) -> int:
        return os.open(self._segment_path(seq), os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600)

    def append(self, tenant: str, updates: Sequence[tuple[str, Fields]]) -> None:
        """One line for one recall's reinforcements, written whole before the recall answers (a
        crash leaves at most a torn last line); an error here fails the recall."""
        data = (json.dumps({"t": tenant, "u": updates}, separators=(",", ":")) + "\n").encode()
        self._dirty = True
        while data:  # a short write (a full disk) goes on where it stopped, or raises
            data = data[os.write(self._fd, data):]

    def rotate(self) -> list[Path]:
        """Start a new segment; returns every segment up to now, which the caller removes
        (``release``) once their contents are written to the store. The new segment is opened
        before anything changes, so a failure leaves the journal as it was; an empty current
        segment is kept rather than replaced."""
        if not self._dirty:
            done, self._segments = self._segments[:-1], self._segments[-1:]
            return done
        fd = self._open_segment(self._seq + 1)
        os.close(self._fd)
        self._seq, self._fd, self._dirty = self._seq + 1, fd, False
        done, self._segments = self._segments, [self._segment_path(self._seq)]
        return done

    def keep(self, segments: Sequence[Path]) -> None:
        """Segments whose contents went back to the queue (a failed write): kept until a later
        rotation hands them out again."""
        self._segments = [*segments, *self._segments]

    @staticmethod
    def release(segments: Sequence[Path]) -> None:
        for path in segments:
            path.unlink(missing_ok=True)

    def close(self) -> None:
        """Close and remove the journal, once everything in it reached the store (a journal
        never closed, as a failed last flush leaves it, is replayed by the next start)."""
        os.close(self._fd)
        self.release(self._segments)
        (self._dir / f"{self._token}.lock").unlink(missing_ok=True)
        os.close(self._lock_fd)

    # -- recovery ----------------------------------------------------------------------------

    @staticmethod
    def recover(directory: Path) -> tuple[Recovered, list[Path]]:
        """What journals of processes that are gone hold (the latest fields of each memory), and
        their files, to remove once that is written."""
        found: Recovered = {}
        files: list[Path] = []
        if not directory.is_dir():
            return found, files
        for lock in sorted(directory.glob("*.lock")):
            with _lock_if_free(lock) as free:
                if not free:
                    continue  # a live process's journal
                segments = sorted(directory.glob(f"{lock.stem}-*.jsonl"))
                for path in segments:
                    for tenant, updates in _read(path):
                        bucket = found.setdefault(tenant, {})
                        for mid, fields in updates:
                            bucket[mid] = fields
                files += [*segments, lock]
        return found, files


@contextlib.contextmanager
def _lock_if_free(path: Path) -> Iterator[bool]:
    fd = os.open(path, os.O_RDWR)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _read(path: Path) -> Iterator[tuple[str, list[tuple[str, Fields]]]]:
    with path.open("rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                entry = json.loads(raw)
                yield str(entry["t"]), [(str(i), dict(fields)) for i, fields in entry["u"]]
            except (ValueError, KeyError, TypeError):
                # A torn write is the last line of its segment; anything else is worth a warning.
                log.warning("skipping an unreadable line %d of the reinforcement journal %s",
                            n, path)
