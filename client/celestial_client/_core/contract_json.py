"""The contract's JSON mapping of a message, as the service's HTTP port answers it: protobuf's
canonical JSON (camelCase names, enums by name, 64-bit integers as strings, times in RFC 3339
with a Z) with every field present, zero ones too, in the contract's order. ``celestial --json``
prints it, so that a script reads one document whichever way it asked."""

from __future__ import annotations

import functools
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message


def to_dict(message: Message) -> dict[str, Any]:
    """``message`` as the contract's JSON mapping: a dict ready for ``json.dumps``. Protobuf
    prints the set fields first and the zero ones after them, which would scatter a message's
    fields differently from one answer to the next: here they come in the contract's order."""
    fields = json_format.MessageToDict(message, always_print_fields_with_no_presence=True)
    ordered: dict[str, Any] = _ordered(fields, message.DESCRIPTOR)
    return ordered


def _ordered(value: Any, descriptor: Any) -> Any:  # a Descriptor (upb's or Python's)
    if not isinstance(value, dict):  # a well-known type printed as a string or a number
        return value
    out = {}
    for name, kind, repeated in _plan(descriptor):
        if name not in value:
            continue
        v = value[name]
        if kind is not None:
            v = [_ordered(x, kind) for x in v] if repeated else _ordered(v, kind)
        out[name] = v
    if len(out) < len(value):
        out.update((k, v) for k, v in value.items() if k not in out)  # "@type" and the like
    return out


@functools.cache
def _plan(descriptor: Any) -> tuple[tuple[str, Any, bool], ...]:
    """A message type's fields in the contract's order: each JSON name, the message type to
    order within (None for scalars, enums and maps) and whether it is repeated."""
    return tuple((f.json_name,
                  None if f.message_type is None or f.message_type.GetOptions().map_entry
                  else f.message_type, f.is_repeated) for f in descriptor.fields)
