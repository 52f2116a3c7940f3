"""API keys: a file of hashed keys, each with a role, tenants and an optional expiry, read again
when it changes (no restart), and the commands that manage it (``celestial keys``).

A key is ``cm_<id>_<secret>``: the id finds its record, the secret is 256 random bits. The file
keeps a salted SHA-256 of each key, never the key; a fast hash is enough for secrets this long (a
slow one such as scrypt protects guessable passwords, and would cost every call milliseconds).
Hashes are compared in constant time. The file is replaced atomically on every change.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from celestial_memory.access.roles import Principal, Role
from celestial_memory.errors import InvalidArgument, Unauthenticated

log = logging.getLogger(__name__)
PREFIX = "cm"
ALL = "*"


@dataclass(slots=True)
class KeyRecord:
    id: str
    name: str
    role: str  # read, write, admin or peer
    tenants: list[str]  # ["*"]: every tenant
    salt: str
    sha256: str
    created_at: float
    expires_at: float | None = None
    revoked_at: float | None = None
    subject: str | None = None  # a client certificate's common name that stands for this key

    def principal(self) -> Principal:
        tenants = None if ALL in self.tenants else frozenset(self.tenants)
        return Principal(self.id, Role[self.role.upper()], tenants)

    def matches(self, key: str) -> bool:
        digest = hashlib.sha256(bytes.fromhex(self.salt) + key.encode()).hexdigest()
        return hmac.compare_digest(digest, self.sha256)

    def state(self, now: float) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and now >= self.expires_at:
            return "expired"
        return "active"


def read_keys(path: Path) -> dict[str, KeyRecord]:
    """The records in ``path`` by id; an absent file holds none."""
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    records = [KeyRecord(**r) for r in data.get("keys", [])]
    for r in records:
        Role[r.role.upper()]  # an unknown role is an error in the file, not a silent default
    return {r.id: r for r in records}


def write_keys(path: Path, records: Sequence[KeyRecord]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"version": 1, "keys": [asdict(r) for r in records]}, indent=2)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def create_key(
    path: Path, name: str, role: str, tenants: Sequence[str], expires_at: float | None = None,
    now: float | None = None, subject: str | None = None,
) -> tuple[KeyRecord, str]:
    """Add a key to the file; returns its record and the key itself (shown once, kept nowhere)."""
    if role.upper() not in Role.__members__:
        raise InvalidArgument("role", f"must be read, write, admin or peer, got {role!r}")
    if role.lower() == "peer" and not tenants:
        tenants = [ALL]  # a peer key reaches no tenant's data: ExchangePolicy names none
    if not tenants or any(not t.strip() for t in tenants):
        raise InvalidArgument("tenants", "name at least one tenant, or * for every tenant")
    now = time.time() if now is None else now
    if expires_at is not None and expires_at <= now:
        raise InvalidArgument("expires_at", "must be in the future")
    records = read_keys(path)
    key_id = secrets.token_hex(6)
    key = f"{PREFIX}_{key_id}_{secrets.token_urlsafe(32)}"
    salt = secrets.token_bytes(16)
    record = KeyRecord(
        id=key_id, name=name, role=role.lower(), tenants=list(tenants), salt=salt.hex(),
        sha256=hashlib.sha256(salt + key.encode()).hexdigest(),
        created_at=now, expires_at=expires_at, subject=subject,
    )
    write_keys(path, [*records.values(), record])
    return record, key


def revoke_key(path: Path, key_id: str, now: float | None = None) -> KeyRecord:
    records = read_keys(path)
    if key_id not in records:
        raise InvalidArgument("id", f"no key {key_id!r} in {path}")
    records[key_id].revoked_at = time.time() if now is None else now
    write_keys(path, list(records.values()))
    return records[key_id]


def iso(t: float | None) -> str:
    return "-" if t is None else datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class KeyRing:
    """The server's view of the key file: checked for changes at most every ``reload_s``
    seconds, so a new or revoked key takes effect without a restart. A file that cannot be read
    keeps the keys read before (and says so in the log), never opens the door."""

    def __init__(
        self, path: Path, reload_s: float = 1.0, clock: Callable[[], float] = time.time,
    ) -> None:
        self.path, self._reload_s, self._clock = path, reload_s, clock
        self._lock = threading.Lock()
        self._seen: tuple[int, int] | None = None
        self._checked = float("-inf")
        self._records: dict[str, KeyRecord] = {}
        self._refresh(force=True)

    def __len__(self) -> int:
        return len(self._records)

    def _refresh(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._checked < self._reload_s:
            return
        with self._lock:
            self._checked = now
            try:
                st = self.path.stat()
                seen = (st.st_mtime_ns, st.st_size)
                if seen == self._seen:
                    return
                self._records = read_keys(self.path)
                self._seen = seen
                log.info("API keys read from %s: %d active", self.path,
                         sum(r.state(self._clock()) == "active" for r in self._records.values()))
            except (OSError, ValueError, TypeError, KeyError) as exc:
                if force and self._seen is None:
                    raise InvalidArgument("api_keys_file", f"cannot read {self.path}: {exc}") \
                        from exc
                log.error("cannot read the API key file %s (%s); keeping the keys read before",
                          self.path, type(exc).__name__)

    def authenticate(self, key: str) -> Principal:
        self._refresh()
        parts = key.split("_", 2)
        record = self._records.get(parts[1]) if len(parts) == 3 and parts[0] == PREFIX else None
        if record is None or not record.matches(key):
            raise Unauthenticated("the API key is not valid")
        state = record.state(self._clock())
        if state != "active":
            raise Unauthenticated(f"the API key {record.id} is {state}")
        return record.principal()

    def for_subject(self, subject: str) -> Principal | None:
        """The active key a verified client certificate's common name stands for, if any."""
        self._refresh()
        now = self._clock()
        for record in self._records.values():
            if record.subject == subject and record.state(now) == "active":
                return record.principal()
        return None
