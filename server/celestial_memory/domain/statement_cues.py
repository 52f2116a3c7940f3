"""The form of a statement, in English and Korean: its words and content words, whether it asks,
whether it is a filler (a greeting, thanks, an acknowledgement, a short reply) or a reaction to
the other speaker, and whether it holds a fact of its own (``informative``).

The importance rules read it for a text without cues (``importance.py``); the turn policy reads
it in every turn (``policy/cues.py``). Korean attaches particles to words, so its patterns match
stems without word boundaries.
"""

from __future__ import annotations

import re


def compile_patterns(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.IGNORECASE) for p in patterns)


def any_match(patterns: tuple[re.Pattern[str], ...], text: str) -> bool:
    return any(p.search(text) for p in patterns)


QUESTION_WORD = compile_patterns(
    r"^\s*(?:who|what|when|where|why|how|which|whose|whom|is|are|was|were|do|does|did|can|could|"
    r"would|will|should|have|has|had)\b",
)
# Korean asks with its endings: -까, -니, -나요, -어요? and the like, or a question word.
QUESTION_KO = compile_patterns(
    r"(?:까|니|나요|가요|냐|래|죠|지요)\s*[?？]?\s*$",
    r"(?:누가|누구|무엇|뭐|뭘|언제|어디|왜|어떻게|어떤|몇)",
)
QUESTION_MARK = re.compile(r"[?？]")

# Greetings, thanks, acknowledgements and short replies: what a conversation says to go on.
FILLER_WORDS = frozenset({
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
FILLER_KO = compile_patterns(
    r"^(?:(?:안녕(?:하세요|하십니까)?|반가워요?|반갑습니다|고마워요?|고맙습니다|감사(?:합니다|해요)|"
    r"땡큐|응|어|네|넵|예|아니|그래|그래요|알았어|알겠어요?|알겠습니다|좋아|좋아요|좋네|오케이|"
    r"ㅇㅋ|ㅇㅇ|ㅋ++|ㅎ++|ㅠ++|음++|아하|그렇구나|그렇군요|맞아요?|잘 자|잘 가|또 봐|다음에 봐|"
    r"수고하세요|수고했어|굿|대박|헐)[\s.!~?,]*+)++$",
)
WORD = re.compile(r"[A-Za-z][A-Za-z']*|[가-힣]+|\d+(?:[.,]\d+)*")
FIRST_PERSON = compile_patterns(
    r"\b(?:i|i'm|im|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|our|ours|us)\b",
    r"(?:^|\s)(?:나는|난|내가|내 |제가|저는|전 |우리|저희|나의|저의)")
SECOND_PERSON = compile_patterns(
    r"\b(?:you|your|you're|you've|you'd|you'll|yours|yourself|u|ur)\b",
    r"(?:너는|넌|네가|니가|너의|당신|님은|님이)")
REACTION_START = compile_patterns(
    r"^\s*(?:wow|whoa|aww+|oh|ah|hey|hi|hello|yeah|yes|yep|no|nope|ok(?:ay)?|sure|thanks?|"
    r"thank you|cool|nice|great|awesome|amazing|congrats|congratulations|haha|lol|totally|"
    r"definitely|absolutely|exactly|right|true|agreed|same|bye|cheers|take care|good luck|"
    r"that's|that is|sounds|so)\b",
    r"^\s*(?:와|우와|오|아|헐|대박|진짜|정말|멋지|좋|축하)",
)
# A text is read by its head: what decides a turn is said early, and the reading stays
# bounded for a pasted document.
MAX_READ = 8192
SENTENCE = re.compile(r"(?<=[.!?。？！])\s+|\n+")
DIGIT = re.compile(r"\d")
# A capitalised word inside a sentence: a name, a place, a title.
NAME = re.compile(r"(?<=[a-z,;:'\")] )(?-i:[A-Z][a-z]+)|(?<=\w )(?-i:[A-Z]{2,})\b")

STOP = frozenset({
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


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def content_words(text: str) -> tuple[str, ...]:
    """The words that carry content, in order (lower case; Korean words of two syllables or
    more, since one syllable is mostly a particle or an ending)."""
    return tuple(w for w in words(text)
                 if w not in STOP and (len(w) > 2 if w.isascii() else len(w) > 1))


def is_question(text: str) -> bool:
    t = text.strip()
    return bool(QUESTION_MARK.search(t) or any_match(QUESTION_WORD, t)
                or (not t.isascii() and any_match(QUESTION_KO, t)))


def is_filler(text: str) -> bool:
    """A greeting, thanks, acknowledgement or short reply and nothing else."""
    t = text.strip()
    if not t:
        return True
    if FILLER_KO[0].search(t):
        return True
    ws = words(t)
    return len(ws) <= 8 and all(w in FILLER_WORDS for w in ws) and not DIGIT.search(t)


def _reaction_sentence(s: str) -> bool:
    """A sentence that answers the other speaker without news of its own: no first person, no
    number, and either a short reaction or a short question back at them."""
    s = s.strip()
    if not s or is_filler(s):
        return True
    if any_match(FIRST_PERSON, s) or DIGIT.search(s):
        return False
    n = len(words(s))
    if QUESTION_MARK.search(s) and any_match(SECOND_PERSON, s) and n <= 12:
        return True
    if any_match(REACTION_START, s) and n <= 12:
        return True
    return any_match(SECOND_PERSON, s) and n <= 16


def reaction_share(text: str) -> float:
    """The share of the turn's sentences that are fillers or reactions to the other speaker."""
    sentences = SENTENCE.split(text.strip())
    return sum(map(_reaction_sentence, sentences)) / len(sentences)


def is_reaction(text: str) -> bool:
    """Every sentence of the turn is a filler or a reaction to the other speaker."""
    return reaction_share(text) == 1.0


def informative(text: str) -> bool:
    """A statement that holds a fact, cue or none: a name, a place or a number in a sentence
    that is not a question, or enough dense content words (half its words or more). Fillers,
    questions and reactions are not."""
    t = text.strip()
    if not t or is_filler(t) or is_question(t):
        return False
    head = t[:MAX_READ]
    if is_reaction(head):
        return False
    content = content_words(head)
    if NAME.search(head) or DIGIT.search(head):
        return len(content) >= 2
    return len(content) >= 4 and len(content) / len(words(head)) >= 0.5
