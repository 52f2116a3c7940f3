"""Rule-based entities: the names, places, dates, amounts and titles a memory mentions.

No model, no downloads: regular expressions and word lists (``entity_words.py``), English and
Korean. It runs on the Store path, so it stays linear on hostile text: what can consume a long
stretch starts only at a word start and never backtracks into it (atomic groups, possessive
quantifiers), the rest is bounded; each rule reads at most ``SCAN_LIMIT`` matches, and a text
yields at most ``MAX_ENTITIES`` entities, one per key, in order of first appearance. Where spans
overlap the earlier, then the longer, wins (a name inside a title, a day inside a date).

What each kind finds, and what it deliberately does not:

- ``person_or_name``: 1-4 capitalised words, "of", "de", "van"... inside ("Bank of America");
  "Bob's" -> "Bob" (a possessive ends a name: "Mary's Hospital" gives "Mary", "Hospital"); a
  speaker prefix ("Caroline: ..."). Not: "I"; a common word capitalised as a sentence's first
  ("The", "Went"); interjections, weekdays, months, honorific abbreviations ("Hey", "Saturday",
  "Mr"; so a person called "May" is missed); a lone pronoun; lower-case starts ("iPhone").
  Korean: 2-4 syllables before an honorific (지민씨, 김민수 선생님); a bare Korean name is not.
- ``place``: an English name after "in", "at", "near", "visited", "went/moved/flew to", "am/came
  from" (else ``person_or_name``). Korean: a known city or country (서울, 미국) or a place suffix
  (한강공원, 서울대학교, 강남역). One-syllable suffixes (시, 구, 동, 역...) also end common
  words (친구, 운동, 다시): they need a two-syllable stem, a locative particle or the word's end,
  and not a listed common ending. Not: generic stems (우리학교, 지하철역), no suffix (스타벅스).
- ``date``: "7 May 2023", "May 7, 2023", "May 2023", "2023-05-07", "05/07/2023" (month first
  unless the first number is over 12), a year after "in", "since"...; 2023년 5월 7일, 5월 7일,
  2023년. Keys "2023-05-07", "2023-05", "--05-07", "2023". Not: weekdays, a month alone,
  relative dates ("yesterday", "last Saturday", 어제), times of day.
- ``number``: a number with a unit, keyed by the number (commas dropped, number words and
  multipliers applied) and the singular English unit: "3 kids" -> "3 kid"; "$20", "20 dollars",
  "20달러" -> "20 usd"; "30%" -> "30 percent"; "3명" -> "3 person"; "3만원" -> "30000 krw".
  Not: a bare number, ordinals, "one" and "한" (mostly articles, idioms); "10킬로" is "10 kilo".
- ``title``: quoted text up to 80 characters and 12 words, with 2+ words, a capital or Hangul
  (not scare quotes like "cool", nor a quoted "Hi"); 『』「」《》〈〉 too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Protocol

from celestial_memory.graph import entity_words as W

PERSON_OR_NAME, PLACE, DATE, NUMBER, TITLE = "person_or_name", "place", "date", "number", "title"
KINDS = frozenset({PERSON_OR_NAME, PLACE, DATE, NUMBER, TITLE})

MAX_ENTITIES, MAX_KEY, MAX_TITLE, MAX_TITLE_WORDS = 32, 64, 80, 12  # per text; key, title chars
MAX_WORD = 30  # a longer "word" is noise, not a name
SCAN_LIMIT = 256  # matches read per rule: bounds the Python work on hostile text


@dataclass(frozen=True, slots=True)
class Entity:
    name: str  # as it appears, trimmed (a possessive, particle or honorific dropped)
    key: str  # normalised for matching: see normalise_key and the module docstring
    kind: str  # one of KINDS


class EntityExtractor(Protocol):
    """``extract``: a text's entities, one per key, in order of first appearance;
    ``extract_many``: ``extract`` of each text, in order."""

    def extract(self, text: str) -> list[Entity]: ...

    def extract_many(self, texts: Sequence[str]) -> list[list[Entity]]: ...


# Candidates are (start, end, priority, entity); on the same span a lower priority wins.
Candidate = tuple[int, int, int, Entity]
_PRIORITY = {TITLE: 0, DATE: 1, NUMBER: 2, PLACE: 3, PERSON_OR_NAME: 4}


def normalise_key(text: str) -> str:
    """Lower-case, whitespace collapsed, at most ``MAX_KEY`` characters."""
    return " ".join(text.split()).lower()[:MAX_KEY].rstrip()


def _alternation(words: Sequence[str]) -> str:
    # Longest first, so "개월" is tried before "개"; spaces inside a unit match any run of blanks.
    return "|".join(re.escape(w).replace(r"\ ", r"[ \t]+") for w in sorted(words, key=len, reverse=True))


def _scan(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    return islice(pattern.finditer(text), SCAN_LIMIT)


def _candidate(start: int, end: int, name: str, kind: str, key: str | None = None) -> Candidate:
    return start, end, _PRIORITY[kind], Entity(name, key if key is not None else normalise_key(name), kind)


# ---- titles -------------------------------------------------------------------------------
_T = MAX_TITLE
# Every pattern starts with a literal or a character class, then checks the word boundary with a
# look-behind: a leading look-behind would keep the engine from skipping to where a match can start.
_TITLE = re.compile(  # possessive, and no quote inside: a failed title costs one scan to a quote
    rf'"([^"\n]{{1,{_T}}}+)"|“([^“”\n]{{1,{_T}}}+)”'
    rf"|'(?<![\w'’]')([^'\n]{{1,{_T}}}+)'(?![A-Za-z0-9'’])|‘([^‘’\n]{{1,{_T}}}+)’(?![A-Za-z0-9'’])"
    rf"|『([^『』\n]{{1,{_T}}}+)』|「([^「」\n]{{1,{_T}}}+)」|《([^《》\n]{{1,{_T}}}+)》|〈([^〈〉\n]{{1,{_T}}}+)〉"
)
_QUOTE = re.compile(r"[\"'“‘『「《〈]")
_HANGUL = re.compile(r"[가-힣]")


def _titles(text: str, out: list[Candidate]) -> None:
    for m in _scan(_TITLE, text):
        # Punctuation inside the quotes belongs to the sentence ("Wow!").
        title = next(g for g in m.groups() if g is not None).strip(" \t,.;:!?")
        if not title or len(title.split()) > MAX_TITLE_WORDS or not any(c.isalpha() for c in title):
            continue
        low = title.lower()
        if " " not in title and (low in W.NEVER_NAMES or low in W.FUNCTION_WORDS or title[0].islower()):
            continue  # 'Hi', scare quotes ("cool"); Hangul is never lower-case, so it stays
        out.append(_candidate(m.start(), m.end(), title, TITLE))


# ---- dates --------------------------------------------------------------------------------
_MONTH = _alternation(list(W.MONTHS))
_NUM_START = r"[0-9](?<![A-Za-z0-9.,/-][0-9])"  # the first digit of a number, not inside a word
_DATE_NUM = re.compile(
    rf"{_NUM_START}(?=[0-9/]|[ \t]?[A-Za-z년월])(?:"  # fail fast on a lone number
    rf"(?P<dm>[0-9]?(?:st|nd|rd|th)?[ \t]+(?:of[ \t]+)?(?P<mon>{_MONTH})\b\.?(?:,?[ \t]+[0-9]{{4}}\b)?)"
    r"|(?P<iso>[0-9]{3}(?P<sep>[-/.])[0-9]{1,2}(?P=sep)[0-9]{1,2})\b"
    r"|(?P<us>[0-9]?/[0-9]{1,2}/[0-9]{4})\b"
    r"|(?P<ko>[0-9]{0,3}[ \t]?(?:년(?:[ \t]?[0-9]{1,2}[ \t]?월(?:[ \t]?[0-9]{1,2}[ \t]?일)?)?"
    r"|월[ \t]?[0-9]{1,2}[ \t]?일))"
    r"|(?P<year>[0-9]{3})(?![0-9]|[.,/-][0-9]))"
)
_DATE_MONTH = re.compile(
    rf"(?:{_MONTH})\b\.?(?:[ \t]+(?P<d>[0-9]{{1,2}})(?:st|nd|rd|th)?\b(?:,?[ \t]+(?P<y>[0-9]{{4}})\b)?"
    r"|,?[ \t]+(?P<y2>[0-9]{4})\b)"
)
_INT = re.compile(r"[0-9]+")
_DIGIT = re.compile(r"[0-9]")
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _date_key(year: str | None, month: int | None, day: str | None) -> str | None:
    """ISO-like key: "2023-05-07", "2023-05", "--05-07" or "2023"; None when not a date."""
    if year is not None and (len(year) != 4 or year[0] == "0"):
        return None
    if month is None:  # a year alone: "in 1000 ways" or 1000년 (a thousand years) are not dates
        return year if year and 1800 <= int(year) <= 2099 else None
    d = int(day) if day else 0
    if not 1 <= month <= 12 or (day and not 1 <= d <= _MONTH_DAYS[month - 1]):
        return None
    tail = f"{month:02d}-{d:02d}" if day else f"{month:02d}"
    return f"{year}-{tail}" if year else f"--{tail}"


def _numeric_date(text: str, m: re.Match[str]) -> str | None:
    n = _INT.findall(m.group())
    if m.group("dm"):
        return _date_key(n[1] if len(n) > 1 else None, W.MONTHS[m.group("mon")], n[0])
    if m.group("iso"):
        return _date_key(n[0], int(n[1]), n[2])
    if m.group("us"):  # month first, unless the first number can only be a day
        a, b = int(n[0]), int(n[1])
        return _date_key(n[2], b, n[0]) if a > 12 else _date_key(n[2], a, n[1])
    if m.group("ko"):  # 2023년 5월 7일, or 5월 7일 without a year
        year, md = (n[0], n[1:]) if "년" in m.group() else (None, n)
        return _date_key(year, int(md[0]) if md else None, md[1] if len(md) > 1 else None)
    # A bare year only after "in", "since"...: "2019 steps" is a number, "in 2019" a date.
    before = text[max(0, m.start() - 8):m.start()].split()
    return _date_key(m.group(), None, None) if before and before[-1].lower() in W.YEAR_CUES else None


def _dates(text: str, out: list[Candidate]) -> None:
    for m in _scan(_DATE_NUM, text):
        key = _numeric_date(text, m)
        if key:
            out.append(_candidate(m.start(), m.end(), m.group().strip(), DATE, key))
    for m in _scan(_DATE_MONTH, text):
        month = W.MONTHS[m.group().split()[0].rstrip(".,")]
        key = _date_key(m.group("y") or m.group("y2"), month, m.group("d"))
        if key and not (m.start() and text[m.start() - 1].isalnum()):  # not inside a word
            out.append(_candidate(m.start(), m.end(), m.group(), DATE, key))


# ---- numbers with a unit ------------------------------------------------------------------
# The unit is any short word (looked up in a dict): an alternation of every unit would be
# tried at every digit.
_UNIT = r"(?P<u>[A-Za-z]{1,14}+(?![A-Za-z])(?:[ \t-]+(?P<tail>old|cent)(?![A-Za-z]))?|%|[가-힣]{1,4}+)"
_NUMBER = re.compile(
    rf"{_NUM_START}(?P<n>[0-9]{{0,2}}(?:,[0-9]{{3}}){{1,4}}|[0-9]{{0,14}})(?P<f>\.[0-9]{{1,6}})?"
    rf"(?![0-9]|[.,][0-9])(?=[ \t-]?[A-Za-z%가-힣])"  # fail fast where no word follows
    rf"(?:[ \t]?(?P<mult>thousand|million|billion|천|만|억))?[ \t-]?{_UNIT}"
)
_MONEY = re.compile(
    r"(?P<cur>[$€£₩¥])[ \t]?(?P<n>[0-9]{1,3}(?:,[0-9]{3}){1,4}|[0-9]{1,15})(?P<f>\.[0-9]{1,6})?"
    r"(?![0-9]|[.,][0-9])(?:[ \t]?(?P<mult>[kK]|thousand|million|billion|bn)(?![A-Za-z]))?"
)
_WORD_NUMBER = re.compile(  # "two", "Three"..., checked against W.NUMBER_WORDS
    r"[tTfFsSeEnNhH](?<![A-Za-z][A-Za-z])(?:wo|hree|en|welve|wenty|hirty|our|ive|orty|ifty|ix|even"
    rf"|ixty|eventy|ight|leven|ighty|ine|inety|undred)(?![A-Za-z])[ \t-]+{_UNIT}"
)
_KO_END = rf"(?:{_alternation(W.KO_PARTICLES)})?(?![가-힣])"
_KO_NATIVE = re.compile(  # 두 명, 세 시간, 다섯 살
    r"[두세네열다여일아스](?<![가-힣][가-힣])(?:섯|곱|덟|홉|무)?[ \t]?"
    rf"(?P<ko>{_alternation(W.KO_COUNTERS)})(?=(?:{_alternation(W.KO_NUMBER_TAILS)})?{_KO_END})"
)


def _amount(n: str, mult: str | None) -> str:
    digits, factor = n.replace(",", ""), W.MULTIPLIERS[mult.lower()] if mult else 1
    if factor == 1 or len(digits) > 15:
        return digits
    return f"{float(digits) * factor:.6f}".rstrip("0").rstrip(".")


def _unit(m: re.Match[str]) -> tuple[str, int] | None:
    """The key's unit and where the unit ends; None when the word after the number is no unit."""
    u = m.group("u")
    if "가" <= u[0] <= "힣":  # Korean units need no boundary: particles follow ("3명이랑")
        for size in range(len(u), 0, -1):
            if u[:size] in W.KO_UNITS:
                return W.KO_UNITS[u[:size]], m.start("u") + size
        return None
    low, tail = u.lower(), m.group("tail")
    if tail and f"{low} {tail.lower()}" in W.EN_UNITS:
        return W.EN_UNITS[f"{low} {tail.lower()}"], m.end()
    return (W.EN_UNITS[low], m.end("u")) if low in W.EN_UNITS else None


def _number_key(pattern: re.Pattern[str], m: re.Match[str]) -> tuple[str, int] | None:
    """The key of a number match and where it ends; None when it is no number with a unit."""
    g = m.groupdict()
    if pattern is _MONEY:
        return f"{_amount(g['n'] + (g['f'] or ''), g['mult'])} {W.CURRENCY_SIGNS[g['cur']]}", m.end()
    if pattern is _KO_NATIVE:
        numeral = m.group()[: m.start("ko") - m.start()].strip()
        value = W.KO_NATIVE_NUMBERS.get(numeral)
        return (f"{value} {W.KO_UNITS[g['ko']]}", m.end()) if value else None
    unit = _unit(m)
    if pattern is _WORD_NUMBER:
        value = W.NUMBER_WORDS.get(m.group().split()[0].split("-")[0].lower())
        amount = str(value) if value else None
    else:
        amount = _amount(m.string[m.start():m.end("f") if g["f"] else m.end("n")], g["mult"])
    return (f"{amount} {unit[0]}", unit[1]) if unit and amount else None


def _numbers(text: str, out: list[Candidate], digits: bool, hangul: bool) -> None:
    patterns = [_WORD_NUMBER] + ([_NUMBER, _MONEY] if digits else []) + ([_KO_NATIVE] if hangul else [])
    for pattern in patterns:
        for m in _scan(pattern, text):
            found = _number_key(pattern, m)
            if found:
                out.append(_candidate(m.start(), found[1], text[m.start():found[1]], NUMBER, found[0]))


# ---- English names ------------------------------------------------------------------------
_UP = "A-ZÀ-ÖØ-Þ"
_LET = "A-Za-zÀ-ÖØ-öø-ÿ0-9"
# The rest of a capitalised word: hyphenated, "O'Brien", a possessive. Atomic, so that "Don't"
# fails at once instead of retrying shorter words.
_REST = rf"(?>[{_LET}]*+(?:-[{_LET}]++|['’][{_UP}][{_LET}]*+)*+(?:['’]s?)?+)(?![{_LET}'’-])"
_NAME_RUN = re.compile(
    rf"[{_UP}](?<![{_LET}-][{_UP}]){_REST}"
    rf"(?:[ \t]++(?:(?:{_alternation(list(W.NAME_CONNECTORS))})[ \t]++)?[{_UP}]{_REST}){{0,3}}"
)
_OPENERS = frozenset(" \t\"'“‘([{«「『《-*•")
_ENDERS = frozenset("\n\r.!?…:")


def _sentence_initial(text: str, start: int) -> bool:
    """Whether ``start`` begins a sentence (or a line, a quote, a list item, a speaker's turn)."""
    i, lowest = start - 1, max(0, start - 64)
    while i >= lowest and text[i] in _OPENERS:
        i -= 1
    if i < 0 or text[i] not in _ENDERS:
        return i < 0
    if text[i] == ".":  # "Mr. Smith", "J. K. Rowling": the period ends an abbreviation
        words = text[max(0, i - 5):i].split()
        word = words[-1] if words and text[i - 1].isalpha() else ""
        return not (word.lower() in W.ABBREVIATIONS or (len(word) == 1 and word.isupper() and word != "I"))
    return True


def _place_cue(text: str, start: int) -> bool:
    window = text[max(0, start - 32):start]
    words = window.split()
    if not words or not window[-1].isspace():
        return False  # "in, Paris": the cue must be the word right before
    word, before = words[-1].lower(), words[-2].lower() if len(words) > 1 else ""
    if word in ("to", "from"):  # "went to Paris", "I'm from Oslo"; not "talked to Mel"
        return before in (W.MOTION_VERBS if word == "to" else W.FROM_CUES)
    return word in W.PLACE_CUES


def _emit_name(text: str, seg: list[tuple[str, int, int]], possessive: bool, out: list[Candidate]) -> None:
    while seg and seg[-1][0] in W.NAME_CONNECTORS:
        seg.pop()
    lone = len(seg) == 1 and seg[0][0].lower() in W.FUNCTION_WORDS  # a lone "The" or "It"
    if not seg or lone or all(len(w) == 1 for w, _, _ in seg):  # or initials alone
        return
    name = " ".join(w for w, _, _ in seg)
    start, end = seg[0][1], seg[-1][2]
    place = not possessive and name.lower() not in W.NOT_PLACES and _place_cue(text, start)
    out.append(_candidate(start, end, name, PLACE if place else PERSON_OR_NAME))


def _names(text: str, out: list[Candidate]) -> None:
    for m in _scan(_NAME_RUN, text):
        initial = _sentence_initial(text, m.start())
        # "Caroline: I went..." names the speaker even if the name is also a common word ("Will").
        line = text[text.rfind("\n", 0, m.start()) + 1:m.start()]
        speaker = initial and text.startswith(":", m.end()) and not line.strip()
        seg: list[tuple[str, int, int]] = []
        offset = m.start()
        for word in m.group().split():
            start = text.index(word, offset)
            offset = start + len(word)
            base = word[:-2] if word[-2:] in ("'s", "’s") else word.rstrip("'’")
            low = base.lower()
            drop = base == "I" or low in W.NEVER_NAMES or len(base) > MAX_WORD or (
                low in W.COMMON_INITIAL  # shouted ("SO", "LOVE IT"), or starting a sentence
                and ((base.isupper() and len(base) > 1) or (initial and not seg and not speaker)))
            if drop or (not seg and word in W.NAME_CONNECTORS):
                _emit_name(text, seg, False, out)
                seg = []
                continue
            seg.append((base, start, start + len(base)))
            initial = False
            if base != word:  # a possessive ends the name: "Caroline's LGBTQ group"
                _emit_name(text, seg, True, out)
                seg = []
        _emit_name(text, seg, False, out)


# ---- Korean names and places --------------------------------------------------------------
_KO_START = "[가-힣](?<![가-힣][가-힣])"  # the first syllable of a Hangul word
_KO_HONORIFIC = re.compile(
    rf"{_KO_START}(?P<rest>[가-힣]{{1,3}})[ ]?(?:{_alternation(W.KO_HONORIFICS)})(?={_KO_END})"
)
_KO_KNOWN = re.compile(  # its word start is checked in Python, to keep the literal prefix
    rf"(?:{_alternation(W.KO_KNOWN_PLACES)})(?P<city>특별시|광역시|시)?(?={_KO_END})"
)
_KO_PLACE = re.compile(
    rf"{_KO_START}(?:[가-힣]{{0,7}}?(?P<suffix>{_alternation(W.KO_PLACE_SUFFIXES)})(?={_KO_END})"
    rf"|[가-힣]{{1,3}}?(?P<short>{_alternation(W.KO_SHORT_PLACE_SUFFIXES)})"
    rf"(?=(?:(?:{_alternation(W.KO_LOCATIVE)})(?:는|도|만)?)?(?![가-힣])))"
)


def _korean(text: str, out: list[Candidate]) -> None:
    for m in _scan(_KO_HONORIFIC, text):
        name = text[m.start():m.end("rest")]
        # 김선생님 -> 김, which is too short to keep
        name = next((name[: -len(t)] for t in W.KO_TITLE_STEMS if name.endswith(t)), name)
        if len(name) >= 2 and name not in W.KO_NOT_NAMES:
            out.append(_candidate(m.start(), m.start() + len(name), name, PERSON_OR_NAME))
    for m in _scan(_KO_KNOWN, text):
        if not (m.start() and "가" <= text[m.start() - 1] <= "힣"):
            key = m.group()[: m.start("city") - m.start()] if m.group("city") else m.group()
            out.append(_candidate(m.start(), m.end(), m.group(), PLACE, key))  # 서울시 and 서울 share a key
    for m in _scan(_KO_PLACE, text):
        name = m.group()
        stem = name[: m.start("suffix" if m.group("suffix") else "short") - m.start()]
        if stem in W.KO_GENERIC_STEMS or (m.group("short") and name[-2:] in W.KO_COMMON_ENDINGS):
            continue
        out.append(_candidate(m.start(), m.end(), name, PLACE))


# ---- the extractor ------------------------------------------------------------------------
class RuleExtractor:
    """English and Korean rules; see the module docstring for what they find and miss."""

    def __init__(self, max_entities: int = MAX_ENTITIES) -> None:
        self._max = max_entities

    def extract(self, text: str) -> list[Entity]:
        found: list[Candidate] = []
        digits, hangul = _DIGIT.search(text) is not None, _HANGUL.search(text) is not None
        if _QUOTE.search(text):
            _titles(text, found)
        if digits:
            _dates(text, found)
        _numbers(text, found, digits, hangul)
        _names(text, found)
        if hangul:
            _korean(text, found)
        found.sort(key=lambda c: (c[0], -c[1], c[2]))  # by start, the longer first, then priority
        entities: list[Entity] = []
        seen: set[str] = set()
        covered = 0
        for start, end, _, entity in found:
            if start < covered:  # inside a span already taken
                continue
            covered = end
            if entity.key not in seen:
                seen.add(entity.key)
                entities.append(entity)
                if len(entities) == self._max:
                    break
        return entities

    def extract_many(self, texts: Sequence[str]) -> list[list[Entity]]:
        return [self.extract(t) for t in texts]
