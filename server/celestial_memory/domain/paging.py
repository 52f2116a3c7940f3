"""Paging of lists (Recent, List, Ledger) by page_size and page_token, as AIP-158 describes.

A token holds a cursor per listed stream: the sort key of the last item sent, ``(time, id)``
for lists in time order (ties in id order, so that a burst of items with one time, e.g. one
rebalance's events, still pages) and the id for lists in id order. It also holds a fingerprint
of the request without its paging fields: a token works only with the request it came from.
Tokens are opaque to callers and checked when they come back (a forged cursor can only move
within the caller's own tenant, whose condition every read carries).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from celestial_memory.domain import validation as check
from celestial_memory.errors import InvalidArgument
from google.protobuf.message import Message

T = TypeVar("T")
# The sort key of the last item sent: (time, id) in time order, (None, id) in id order.
Cursor = tuple[float | None, str]
# Room in a message for everything but its listed items (the token, field tags, framing).
ENVELOPE_BYTES = 4096


@dataclass(frozen=True, slots=True)
class PageSize:
    default: int
    maximum: int

    def of(self, requested: int, legacy_limit: int = 0, legacy_max: int = 0) -> int:
        """The page size a request asks for: 0 is the default, more than the maximum is the
        maximum (AIP-158). A deprecated ``limit`` still counts when page_size is 0, within its
        old bound."""
        if requested < 0:
            raise InvalidArgument("page_size", f"must not be negative, got {requested}")
        if requested == 0 and legacy_limit:
            if not 0 < legacy_limit <= legacy_max:
                raise InvalidArgument("limit", f"must be 1 to {legacy_max}, got {legacy_limit}")
            return legacy_limit
        return min(requested or self.default, self.maximum)


def fingerprint(request: Message, tenant: str) -> str:
    """What a token is bound to: the request without page_size, page_token and the
    deprecated limit, and the caller's tenant as the server resolved it."""
    bare = type(request)()
    bare.CopyFrom(request)
    for name in ("page_size", "page_token", "limit"):
        if name in bare.DESCRIPTOR.fields_by_name:
            bare.ClearField(name)
    digest = hashlib.sha256(bare.DESCRIPTOR.full_name.encode() + b"\0")
    digest.update(bare.SerializeToString(deterministic=True))
    digest.update(tenant.encode())
    return digest.hexdigest()[:24]


def encode(bound: str, cursors: dict[str, Cursor | None]) -> str:
    body = json.dumps({"f": bound, "c": cursors}, separators=(",", ":"))
    return base64.urlsafe_b64encode(body.encode()).decode().rstrip("=")


MAX_TOKEN_CHARS = 1024  # far more than any token this server makes


def decode(
    token: str, bound: str, streams: Sequence[str], by_time: bool
) -> dict[str, Cursor | None]:
    """The cursors of a token made by ``encode`` for the same request (``by_time``: the list is
    in time order, so each cursor has a time); an empty token is the first page (every cursor
    None). Anything else is INVALID_ARGUMENT, however it was made."""
    if not token:
        return dict.fromkeys(streams)
    return _parsed(token, bound, lambda raw: {s: _cursor(raw["c"][s], by_time) for s in streams})


def encode_offset(bound: str, offset: int) -> str:
    """A token for lists the server computes whole per request (a walk, the entities): the
    position to go on from."""
    body = json.dumps({"f": bound, "o": offset}, separators=(",", ":"))
    return base64.urlsafe_b64encode(body.encode()).decode().rstrip("=")


def decode_offset(token: str, bound: str) -> int:
    """The position of a token made by ``encode_offset`` for the same request; 0 for none."""
    if not token:
        return 0

    def offset(raw: Any) -> int:
        n = raw["o"]
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError("offset")
        return n

    return _parsed(token, bound, offset)


def _parsed(token: str, bound: str, read: Callable[[Any], T]) -> T:
    """``read`` of a token's body, once it is known to be this request's; anything else is
    INVALID_ARGUMENT, however it was made."""
    try:
        if len(token) > MAX_TOKEN_CHARS:
            raise ValueError("too long")
        raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        if raw["f"] != bound:
            raise InvalidArgument("page_token", "belongs to another request (the fields "
                                  "besides page_size and page_token must not change)")
        return read(raw)
    except InvalidArgument:
        raise
    except Exception:  # garbage of any shape, e.g. nesting deep enough to end the parser
        raise InvalidArgument("page_token", "is not a token this server made") from None


def _cursor(raw: Any, by_time: bool) -> Cursor | None:
    if raw is None:
        return None
    at, mid = raw
    if by_time != (at is not None):
        raise ValueError("cursor of another list")
    if at is not None and not (isinstance(at, (int, float)) and math.isfinite(float(at))):
        raise ValueError("cursor time")
    return (None if at is None else float(at)), check.memory_id(str(mid), "page_token")


def fitting(messages: Sequence[Message], budget: int, extra: int = 0) -> int:
    """How many of ``messages``, from the first, fit in ``budget`` bytes once listed in one
    message, each with ``extra`` bytes beside it (at least one, so paging always moves on)."""
    total = 0
    for i, m in enumerate(messages):
        total += m.ByteSize() + 6 + extra  # field tag and length prefix
        if total > budget and i > 0:
            return i
    return len(messages)


def merged(
    streams: dict[str, Sequence[T]], key: Callable[[T], tuple[float, str]], size: int
) -> list[tuple[str, T]]:
    """The first ``size`` items of several sorted streams, in one order, each tagged with
    its stream."""
    tagged = [(key(item), name, item) for name, items in streams.items() for item in items]
    tagged.sort(key=lambda t: t[0])
    return [(name, item) for _, name, item in tagged[:size]]
