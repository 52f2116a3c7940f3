"""What the turn policy reads in a turn's text, in English and Korean: questions, references back
to what was said, fillers (greetings, thanks, acknowledgements, short replies), reactions, the
kinds of content (personal, preference, technical, feeling) and how dense its content words are.

A statement's form (words, questions, fillers, reactions, ``informative``) is the domain's
(``domain/statement_cues.py``), since the importance rules read it too; it is re-exported here.
The personal, preference and feeling kinds are the importance rules' own cues
(``domain/importance_cues.py``), so a turn and a stored memory are read alike. Korean attaches
particles to words, so its patterns match stems without word boundaries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from celestial_memory.domain.importance_cues import (
    DATE_OR_NUMBER,
    DUTY,
    EXPLICIT,
    FEELING,
    PERSON,
    PREFERENCE,
    SECRET,
    CueKind,
)
from celestial_memory.domain.statement_cues import (
    DIGIT,
    FILLER_KO,
    FILLER_WORDS,
    FIRST_PERSON,
    MAX_READ,
    NAME,
    QUESTION_KO,
    QUESTION_WORD,
    REACTION_START,
    SECOND_PERSON,
    STOP,
    any_match,
    compile_patterns,
    content_words,
    informative,
    is_filler,
    is_question,
    is_reaction,
    reaction_share,
    words,
)

__all__ = [
    "MAX_READ", "PERSONAL", "REFER_BACK", "TECHNICAL", "Reading", "content_words", "informative",
    "is_filler", "is_question", "is_reaction", "reaction_share", "read", "rule_text", "words",
]

# A turn that points back at the conversation's past: a recall is what it needs.
REFER_BACK = compile_patterns(
    r"\b(?:as i (?:said|mentioned|told you)|like i (?:said|mentioned)|i (?:told|mentioned to) you|"
    # "remember that ..." and "remember my ..." ask to keep something (phase 1), not to recall.
    r"remember (?:when|what|how|that time|the (?:time|day|night)|our)|do you remember|"
    r"you remember|recall|remind me (?:where|what|when|who|how|which|of|about)|"
    r"last time|the other day|earlier you|you (?:said|mentioned|told me)|we (?:talked|spoke) about|"
    r"what did (?:i|we) (?:say|decide))\b",
    r"지난번에?|저번에?|그때|아까|전에 말한|말했던|얘기했던|이야기했던|기억나|기억해\?|기억하니|"
    r"기억하세요|했었지|했잖아",
)

# Code, systems and their words: what a technical conversation keeps.
TECHNICAL = CueKind("technical", 0.3, compile_patterns(
    r"\b(?:api|sdk|server|database|db|sql|query|queries|endpoint|deploy(?:ed|ment)?|docker|"
    r"kubernetes|k8s|python|java(?:script)?|typescript|rust|golang|c\+\+|git|branch|commit|"
    r"merge|pull request|bug|error|exception|stack ?trace|crash(?:es|ed)?|timeout|latency|cpu|"
    r"gpu|memory leak|config(?:uration)?|install(?:ed)?|version|v\d+(?:\.\d+)+|library|"
    r"framework|function|class|module|script|compile[rd]?|build|test(?:s|ing)?|regex|json|"
    r"yaml|http|grpc|port|ssh|linux|windows|macos|vpn|router|wifi|backup|migration|schema)\b",
    # Each starts at a word's start, so a long run of letters is tried once, not once a letter.
    r"`[^`\n]{1,200}`|\b\w+\.\w+\(|\b\w+_\w+\b|(?<![\w./])/\w+/\w+",
    r"서버|데이터베이스|배포|쿼리|에러|오류|버그|설치|설정|버전|코드|함수|라이브러리|프레임워크|"
    r"빌드|테스트|커밋|브랜치|깃|도커|쿠버네티스|파이썬|자바|네트워크|와이파이|백업|마이그레이션",
))

PERSONAL: tuple[CueKind, ...] = (SECRET, DUTY, PERSON, DATE_OR_NUMBER)


@dataclass(frozen=True)
class Reading:
    """One turn as the rules and the state see it."""

    words: int
    content_words: tuple[str, ...]
    question: bool
    refers_back: bool
    filler: bool
    reactions: float
    personal: bool
    preference: bool
    technical: bool
    emotion: bool
    explicit: bool
    first_person: bool
    second_person: bool
    has_number: bool
    names: int

    @property
    def reaction(self) -> bool:
        """Nothing but fillers and reactions to the other speaker."""
        return self.reactions == 1.0

    @property
    def density(self) -> float:
        """Content words over words: what is left once the glue words are taken out."""
        return len(self.content_words) / self.words if self.words else 0.0


def _strip_refer_back(text: str) -> str:
    for p in REFER_BACK:
        text = p.sub(" ", text)
    return text


def _any_kind(kinds: tuple[CueKind, ...], text: str) -> bool:
    return any(k.matches(text) for k in kinds)


def read(text: str) -> Reading:
    """``text`` as the rules see it: its first ``MAX_READ`` characters."""
    text = text[:MAX_READ]
    ws = words(text)
    return Reading(
        words=len(ws),
        content_words=content_words(text),
        question=is_question(text),
        refers_back=any_match(REFER_BACK, text),
        filler=is_filler(text),
        reactions=reaction_share(text),
        personal=_any_kind(PERSONAL, text),
        preference=PREFERENCE.matches(text),
        technical=TECHNICAL.matches(text),
        emotion=FEELING.matches(text),
        # "Do you remember ..." asks for a recall, not to keep the question.
        explicit=EXPLICIT.matches(_strip_refer_back(text)) or SECRET.matches(text),
        first_person=any_match(FIRST_PERSON, text),
        second_person=any_match(SECOND_PERSON, text),
        has_number=bool(DIGIT.search(text)),
        names=len(NAME.findall(text)),
    )


def rule_text() -> str:
    """Every pattern the policy reads by (its own and the statement's), for the rule set's
    fingerprint."""
    groups: list[tuple[re.Pattern[str], ...]] = [
        REFER_BACK, QUESTION_WORD, QUESTION_KO, FILLER_KO, FIRST_PERSON, SECOND_PERSON,
        REACTION_START, TECHNICAL.patterns, *(k.patterns for k in PERSONAL),
        PREFERENCE.patterns, FEELING.patterns]
    pats = [p.pattern for g in groups for p in g]
    return "\n".join([*pats, NAME.pattern, " ".join(sorted(FILLER_WORDS)),
                      " ".join(sorted(STOP))])
