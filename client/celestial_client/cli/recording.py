"""The client ``celestial`` uses: the typed client, keeping each response as the service sent it,
so that ``--json`` prints the contract's document (what the HTTP port answers for the same call,
``_core/contract_json.py``) while the text for people comes from the typed results."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from google.protobuf.message import Message

from celestial_client._core.base import UNSET, _Unset
from celestial_client.client import CelestialClient


class RecordingClient(CelestialClient):
    """A ``CelestialClient`` that keeps every unary response of its calls, in order (one
    command's worth: the command line makes one client per command)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.responses: list[Message] = []

    def _call(self, method: str, request: Any, timeout: float | _Unset | None = UNSET) -> Any:
        response = super()._call(method, request, timeout)
        self.responses.append(response)
        return response

    def answer(self) -> Message:
        """What the service answered this command: its last call's response, or the pages of
        the paged read it made last joined into one response of their type (``joined``)."""
        if not self.responses:
            raise RuntimeError("no call was answered")
        kind = type(self.responses[-1])
        first = len(self.responses)
        while first > 0 and type(self.responses[first - 1]) is kind:
            first -= 1
        return joined(self.responses[first:])


def joined(pages: Sequence[Message]) -> Message:
    """Pages of one read as one response: the repeated fields (memories, events, entities) of
    every page in order, the rest (``next_page_token``) as the last page has it."""
    last = pages[-1]
    if len(pages) == 1:
        return last
    if any(type(p) is not type(last) for p in pages):
        raise TypeError("pages of different reads: " + ", ".join(type(p).__name__ for p in pages))
    out = type(last)()
    out.CopyFrom(last)
    for field in last.DESCRIPTOR.fields:
        if not field.is_repeated or (field.message_type is not None
                                     and field.message_type.GetOptions().map_entry):
            continue
        out.ClearField(field.name)
        for page in pages:
            getattr(out, field.name).extend(getattr(page, field.name))
    return out
