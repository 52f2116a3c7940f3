"""Entities, subject-relation-object triples and a one-line summary by a model: the prompt,
and a strict reading of its answer. A batch of memories goes in one call; an answer that is
not the JSON asked for, or that skips or invents a memory, fails the whole batch (the queue
retries it) rather than being half used. What the model gives is cleaned the way the rules'
entities are: kinds mapped onto the rules' kinds, keys normalised, lengths and counts
bounded."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from celestial_memory.graph.entities import (
    DATE,
    MAX_ENTITIES,
    NUMBER,
    PERSON_OR_NAME,
    PLACE,
    TITLE,
    Entity,
    normalise_key,
)
from celestial_memory.understanding.chat import ChatModel, ModelError, numbered_entries

MAX_TRIPLES = 16  # per memory
MAX_FACTS, MAX_FACT = 5, 300  # facts per memory, characters per fact
MAX_PART = 120  # characters of a triple's subject, relation or object
MAX_SUMMARY = 300  # characters of a summary (a longer one is cut)
MAX_TEXT = 4000  # characters of a memory sent (a long one is cut: its start says the most)

PROMPT = (
    "You read memories an assistant keeps about its users. For each numbered memory, list the "
    "entities it mentions (people, places, organisations, dates, amounts with units, titles of "
    "works) and the facts it states as subject-relation-object triples, with short relations "
    "in snake_case (works_at, lives_in, likes, has_pet, born_on), a one-line summary of at "
    "most 20 words in the memory's language, and the few facts worth remembering on their own "
    "as short standalone sentences that name who they are about (none for small talk). Write "
    "dates as YYYY-MM-DD, YYYY-MM or YYYY. Use only what the memory says. Answer with JSON "
    'only, exactly: {"memories": [{"n": 1, "entities": [{"name": "Alice", "kind": "person"}], '
    '"triples": [["Alice", "works_at", "Acme"]], "summary": "Alice works at Acme.", '
    '"facts": ["Alice works at Acme."]}]} with one entry per memory, in order. '
    "Kinds: person, place, organization, date, number, title, other. Memories may be in "
    "English or Korean; keep names as written."
)
# The model's kinds onto the rules' (graph/entities.py): an organisation is a name there too.
KINDS = {"person": PERSON_OR_NAME, "organization": PERSON_OR_NAME, "organisation": PERSON_OR_NAME,
         "other": PERSON_OR_NAME, "place": PLACE, "location": PLACE, "date": DATE,
         "number": NUMBER, "amount": NUMBER, "title": TITLE, "work": TITLE}


@dataclass(frozen=True, slots=True)
class Triple:
    subject: str
    relation: str
    object: str

    def to_list(self) -> list[str]:
        return [self.subject, self.relation, self.object]


@dataclass(slots=True)
class Understood:
    entities: list[Entity] = field(default_factory=list)
    triples: list[Triple] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)  # standalone sentences, stored as memories
    summary: str = ""  # one line; empty when the model gave none (the rules' is kept)


def _text(v: object, limit: int) -> str:
    return " ".join(v.split())[:limit].strip() if isinstance(v, str) else ""


def _entity(d: object) -> Entity | None:
    if not isinstance(d, dict):
        return None
    name = _text(d.get("name"), MAX_PART)
    kind = KINDS.get(_text(d.get("kind"), 20).lower(), PERSON_OR_NAME)
    return Entity(name, normalise_key(name), kind) if name else None


def _triple(v: object) -> Triple | None:
    if isinstance(v, dict):
        v = [v.get("subject"), v.get("relation"), v.get("object")]
    if not isinstance(v, list) or len(v) != 3:
        return None
    s, r, o = (_text(x, MAX_PART) for x in v)
    r = "_".join(r.lower().split())
    return Triple(s, r, o) if s and r and o else None


def _plain(text: str) -> str:
    """Text compared for sameness: lower-case words, punctuation dropped."""
    return " ".join("".join(c for c in text.lower() if c.isalnum() or c.isspace()).split())


def parse(answer: str, n: int, texts: Sequence[str] = ()) -> list[Understood]:
    """What the model said of each of ``n`` memories (``texts``, when given, are theirs: a
    fact that only repeats its memory is dropped), or ModelError naming what is wrong."""
    out: list[Understood] = []
    for k, entry in enumerate(numbered_entries(answer, "memories", n, "memory"), 1):
        for key in ("entities", "triples", "facts"):  # a list, or left out
            if not isinstance(entry.get(key) or [], list):
                raise ModelError(f"memory {k}: {key!r} is not a list")
        if not isinstance(entry.get("summary") or "", str):
            raise ModelError(f"memory {k}: 'summary' is not text")
        got = Understood()
        seen: set[str] = set()
        for raw in entry.get("entities") or []:
            if (ent := _entity(raw)) is not None and ent.key not in seen:
                seen.add(ent.key)
                got.entities.append(ent)
        for t in entry.get("triples") or []:
            if (tr := _triple(t)) is not None and tr not in got.triples:
                got.triples.append(tr)
        said = {_plain(x) for x in texts[k - 1:k]}  # a "fact" that only repeats the memory
        for raw in entry.get("facts") or []:
            fact = _text(raw, MAX_FACT)
            if fact and _plain(fact) not in said:
                said.add(_plain(fact))
                got.facts.append(fact)
        got.entities, got.triples = got.entities[:MAX_ENTITIES], got.triples[:MAX_TRIPLES]
        got.facts = got.facts[:MAX_FACTS]
        got.summary = _text(entry.get("summary"), MAX_SUMMARY)
        out.append(got)
    return out


class LlmExtractor:
    def __init__(self, model: ChatModel) -> None:
        self._model = model

    def understand(self, texts: Sequence[str]) -> tuple[list[Understood], int]:
        """Entities and triples of each text, and the tokens the call cost; ModelError."""
        body = "\n".join(f"{i}. {' '.join(t.split())[:MAX_TEXT]}" for i, t in enumerate(texts, 1))
        answer = self._model.ask(PROMPT, body, json_answer=True)
        return parse(answer.text, len(texts), texts), answer.tokens

    def close(self) -> None:
        self._model.close()
