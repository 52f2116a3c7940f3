"""A learned model's card (``card.json``, written by ``make train-ranker`` beside ``ranker.txt``):
its schema, checked before anything reads the model. Every field has a type and a range, and a
card with a field this schema does not know is refused too: a card is written by one command,
so anything else in it means it was written by hand or damaged.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from celestial_memory.ranking.features import FEATURES
from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr, ValidationError

# Payloads read and rows scored per recall: a recall gathers about 150 candidates at the
# defaults (five zones of 30), and the model was measured at 20 to 100 (docs/benchmarks.md).
MAX_CANDIDATES = 200
CARD_BYTES = 1 << 20  # a card is a few kilobytes; more is not a card
Text = Annotated[StrictStr, Field(max_length=4096)]
Scalar = StrictStr | StrictInt | StrictFloat | bool | None
Feature = Annotated[StrictStr, Field(max_length=64)]


class CardRefused(Exception):
    """What is wrong with a card."""


class Card(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    name: Annotated[StrictStr, Field(min_length=1, max_length=200)]
    data: Text
    features: Annotated[list[Feature], Field(min_length=1, max_length=len(FEATURES) * 4)]
    candidates: Annotated[StrictInt, Field(ge=1, le=MAX_CANDIDATES)]
    command: Text
    model: Text
    parameters: Annotated[dict[Feature, Scalar], Field(max_length=256)]
    # The leave-one-out figures and a note: read by people, never by the server.
    figures: Annotated[dict[Feature, Any], Field(max_length=64)]
    sha256: Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]


def parse_card(data: bytes) -> Card:
    """The card in ``data`` (the bytes of ``card.json``), or CardRefused saying why not."""
    if len(data) > CARD_BYTES:
        raise CardRefused(f"the card is {len(data):,} bytes, more than {CARD_BYTES:,}")
    try:
        raw = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise CardRefused(f"the card is not UTF-8: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise CardRefused(f"the card is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise CardRefused(f"the card is a JSON {type(raw).__name__}, not an object")
    try:
        card = Card.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "the card"
        raise CardRefused(f"the card's {where}: {first['msg']} (given {first.get('input')!r:.60})"
                          ) from None
    if unknown := [f for f in card.features if f not in FEATURES]:
        raise CardRefused(f"the card names features this server does not know: {unknown[:5]}")
    return card
