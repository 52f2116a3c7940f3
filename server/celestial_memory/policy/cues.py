"""What the turn policy reads in a turn's text, in English and Korean: questions, references back
to what was said, fillers (greetings, thanks, acknowledgements, short replies), reactions, the
kinds of content (personal, preference, technical, feeling) and how dense its content words are.

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


def _re(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.IGNORECASE) for p in patterns)


def _any(patterns: tuple[re.Pattern[str], ...], text: str) -> bool:
    return any(p.search(text) for p in patterns)


# A turn that points back at the conversation's past: a recall is what it needs.
REFER_BACK = _re(
    r"\b(?:as i (?:said|mentioned|told you)|like i (?:said|mentioned)|i (?:told|mentioned to) you|"
    r"remember (?:when|that|the|what|how|my|our)|do you remember|you remember|recall|"
    r"last time|the other day|earlier you|you (?:said|mentioned|told me)|we (?:talked|spoke) about|"
    r"what did (?:i|we) (?:say|decide))\b",
    r"지난번에?|저번에?|그때|아까|전에 말한|말했던|얘기했던|이야기했던|기억나|기억해\?|기억하니|"
    r"기억하세요|했었지|했잖아",
)
_QUESTION_WORD = _re(
    r"^\s*(?:who|what|when|where|why|how|which|whose|whom|is|are|was|were|do|does|did|can|could|"
    r"would|will|should|have|has|had)\b",
)
# Korean asks with its endings: -까, -니, -나요, -어요? and the like, or a question word.
_QUESTION_KO = _re(
    r"(?:까|니|나요|가요|냐|래|죠|지요)\s*[?？]?\s*$",
    r"(?:누가|누구|무엇|뭐|뭘|언제|어디|왜|어떻게|어떤|몇)",
)
_QUESTION_MARK = re.compile(r"[?？]")

# Greetings, thanks, acknowledgements and short replies: what a conversation says to go on.
_FILLER_WORDS = frozenset({
    "hi", "hey", "hello", "yo", "hiya", "howdy", "morning", "evening", "night", "afternoon",
    "good", "bye", "goodbye", "cya", "see", "you", "later", "soon", "tomorrow", "take",
    "care", "thanks", "thank", "thx", "ty", "cheers", "appreciate", "it", "ok", "okay", "k",
    "kk", "sure", "yes", "yeah", "yep", "yup", "no", "nope", "nah", "right", "alright",
    "fine", "cool", "nice", "great", "awesome", "perfect", "got", "sounds", "lol", "haha",
    "hahaha", "hmm", "hm", "uh", "um", "oh", "ah", "wow", "whoa", "aww", "np", "welcome",
    "pleasure", "mine", "too", "same", "agreed", "totally", "definitely", "absolutely",
    "indeed", "true", "exactly", "will", "do", "noted", "understood", "the", "a", "and", "so",
    "that's", "thats", "is", "was", "very", "really", "much", "all",
})
# One or more of them in a row ("안녕하세요 반가워요"), and nothing else. Possessive: a run of
# "ㅋ" with something after it fails at once instead of trying every way to split the run.
_FILLER_KO = _re(
    r"^(?:(?:안녕(?:하세요|하십니까)?|반가워요?|반갑습니다|고마워요?|고맙습니다|감사(?:합니다|해요)|"
    r"땡큐|응|어|네|넵|예|아니|그래|그래요|알았어|알겠어요?|알겠습니다|좋아|좋아요|좋네|오케이|"
    r"ㅇㅋ|ㅇㅇ|ㅋ++|ㅎ++|ㅠ++|음++|아하|그렇구나|그렇군요|맞아요?|잘 자|잘 가|또 봐|다음에 봐|"
    r"수고하세요|수고했어|굿|대박|헐)[\s.!~?,]*+)++$",
)
_WORD = re.compile(r"[A-Za-z][A-Za-z']*|[가-힣]+|\d+(?:[.,]\d+)*")
_FIRST_PERSON = _re(r"\b(?:i|i'm|im|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|our|ours|us)\b",
                    r"(?:^|\s)(?:나는|난|내가|내 |제가|저는|전 |우리|저희|나의|저의)")
_SECOND_PERSON = _re(r"\b(?:you|your|you're|you've|you'd|you'll|yours|yourself|u|ur)\b",
                     r"(?:너는|넌|네가|니가|너의|당신|님은|님이)")
_REACTION_START = _re(
    r"^\s*(?:wow|whoa|aww+|oh|ah|hey|hi|hello|yeah|yes|yep|no|nope|ok(?:ay)?|sure|thanks?|"
    r"thank you|cool|nice|great|awesome|amazing|congrats|congratulations|haha|lol|totally|"
    r"definitely|absolutely|exactly|right|true|agreed|same|bye|cheers|take care|good luck|"
    r"that's|that is|sounds|so)\b",
    r"^\s*(?:와|우와|오|아|헐|대박|진짜|정말|멋지|좋|축하)",
)
# A turn is read by its head: what decides a turn is said early, and the reading stays
# bounded for a pasted document.
MAX_READ = 8192
_SENTENCE = re.compile(r"(?<=[.!?。？！])\s+|\n+")
_DIGIT = re.compile(r"\d")
# A capitalised word inside a sentence: a name, a place, a title.
_NAME = re.compile(r"(?<=[a-z,;:'\")] )(?-i:[A-Z][a-z]+)|(?<=\w )(?-i:[A-Z]{2,})\b")

# Code, systems and their words: what a technical conversation keeps.
TECHNICAL = CueKind("technical", 0.3, _re(
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

_STOP = frozenset({
    "a", "an", "the", "and", "or", "but", "so", "to", "of", "in", "on", "at", "by", "for",
    "with", "from", "into", "onto", "about", "as", "is", "am", "are", "was", "were", "be",
    "been", "being", "it", "its", "it's", "this", "that", "these", "those", "there", "here",
    "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "do", "does",
    "did", "done", "have", "has", "had", "having", "can", "could", "would", "should", "will",
    "shall", "may", "might", "must", "just", "really", "very", "too", "also", "than", "then",
    "not", "no", "yes", "yeah", "oh", "wow", "hey", "hi", "ok", "okay", "i", "me", "my",
    "mine", "we", "us", "our", "you", "your", "he", "him", "his", "she", "her", "they",
    "them", "their", "i'm", "i've", "i'd", "i'll", "you're", "you've", "we're", "that's",
    "what's", "don't", "didn't", "can't", "won't", "isn't", "wasn't", "all", "any", "some",
    "more", "most", "much", "many", "lot", "lots", "such", "if", "because", "while", "though",
    "still", "even", "ever", "only", "own", "same", "get", "got", "go", "going", "gonna",
    "like", "love", "thanks", "thank", "great", "cool", "nice", "awesome", "amazing", "good",
    "glad", "happy", "sure", "totally", "definitely", "something", "anything", "everything",
    "thing", "things", "one",
})


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


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def content_words(text: str) -> tuple[str, ...]:
    """The words that carry content, in order (lower case; Korean words of two syllables or
    more, since one syllable is mostly a particle or an ending)."""
    return tuple(w for w in words(text)
                 if w not in _STOP and (len(w) > 2 if w.isascii() else len(w) > 1))


def is_question(text: str) -> bool:
    t = text.strip()
    return bool(_QUESTION_MARK.search(t) or _any(_QUESTION_WORD, t)
                or (not t.isascii() and _any(_QUESTION_KO, t)))


def is_filler(text: str) -> bool:
    """A greeting, thanks, acknowledgement or short reply and nothing else."""
    t = text.strip()
    if not t:
        return True
    if _FILLER_KO[0].search(t):
        return True
    ws = words(t)
    return len(ws) <= 8 and all(w in _FILLER_WORDS for w in ws) and not _DIGIT.search(t)


def _reaction_sentence(s: str) -> bool:
    """A sentence that answers the other speaker without news of its own: no first person, no
    number, and either a short reaction or a short question back at them."""
    s = s.strip()
    if not s or is_filler(s):
        return True
    if _any(_FIRST_PERSON, s) or _DIGIT.search(s):
        return False
    n = len(words(s))
    if _QUESTION_MARK.search(s) and _any(_SECOND_PERSON, s) and n <= 12:
        return True
    if _any(_REACTION_START, s) and n <= 12:
        return True
    return _any(_SECOND_PERSON, s) and n <= 16


def reaction_share(text: str) -> float:
    """The share of the turn's sentences that are fillers or reactions to the other speaker."""
    sentences = _SENTENCE.split(text.strip())
    return sum(map(_reaction_sentence, sentences)) / len(sentences)


def is_reaction(text: str) -> bool:
    """Every sentence of the turn is a filler or a reaction to the other speaker."""
    return reaction_share(text) == 1.0


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
        refers_back=_any(REFER_BACK, text),
        filler=is_filler(text),
        reactions=reaction_share(text),
        personal=_any_kind(PERSONAL, text),
        preference=PREFERENCE.matches(text),
        technical=TECHNICAL.matches(text),
        emotion=FEELING.matches(text),
        # "Do you remember ..." asks for a recall, not to keep the question.
        explicit=EXPLICIT.matches(_strip_refer_back(text)) or SECRET.matches(text),
        first_person=_any(_FIRST_PERSON, text),
        second_person=_any(_SECOND_PERSON, text),
        has_number=bool(_DIGIT.search(text)),
        names=len(_NAME.findall(text)),
    )


def informative(text: str) -> bool:
    """A statement that holds a fact without any cue the importance rules know: a name, a place
    or a number in a sentence that is not a question, or enough dense content words. What a
    floor on importance would lift out of the belt (benchmarks/policy_replay.py measures it)."""
    t = text.strip()
    if not t or is_filler(t) or is_question(t):
        return False
    r = read(t)
    if r.reaction:
        return False
    if r.names or r.has_number:
        return len(r.content_words) >= 2
    return len(r.content_words) >= 4 and r.density >= 0.5


def rule_text() -> str:
    """Every pattern this module reads by, for the rule set's fingerprint."""
    groups: list[tuple[re.Pattern[str], ...]] = [
        REFER_BACK, _QUESTION_WORD, _QUESTION_KO, _FILLER_KO, _FIRST_PERSON, _SECOND_PERSON,
        _REACTION_START, TECHNICAL.patterns, *(k.patterns for k in PERSONAL),
        PREFERENCE.patterns, FEELING.patterns]
    pats = [p.pattern for g in groups for p in g]
    return "\n".join([*pats, _NAME.pattern, " ".join(sorted(_FILLER_WORDS)),
                      " ".join(sorted(_STOP))])
