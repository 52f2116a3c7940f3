"""The API key a call presents, read the same way whatever carries it: gRPC metadata or HTTP
headers (``authorization: Bearer <key>`` or ``x-api-key``)."""

from __future__ import annotations

from collections.abc import Iterable

from celestial_memory.errors import Unauthenticated


def credential(metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
    """The API key the call presents; None for none. Two different ones are refused."""
    found: set[str] = set()
    for name, value in metadata or ():
        text = (value.decode(errors="replace") if isinstance(value, bytes) else value).strip()
        if name == "authorization":
            scheme, _, key = text.partition(" ")
            if scheme.lower() != "bearer" or not key.strip():
                raise Unauthenticated("authorization must be 'Bearer <API key>'")
            found.add(key.strip())
        elif name == "x-api-key":
            found.add(text)
    if len(found) > 1:
        raise Unauthenticated("the call presents more than one API key")
    return found.pop() if found else None
