"""The cues the importance rules look for, in English and Korean (docs/design.md, "Importance by
rules"). A kind of cue has a weight: what a memory showing only that kind is worth.

Korean attaches particles to words, so its patterns match stems without word boundaries; a stem
short enough to sit inside other words (형, 딸) is matched only as a word of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class CueKind:
    name: str
    weight: float
    patterns: tuple[re.Pattern[str], ...]

    def matches(self, text: str) -> bool:
        return any(p.search(text) for p in self.patterns)


def _kind(name: str, weight: float, *patterns: str) -> CueKind:
    return CueKind(name, weight, tuple(re.compile(p, re.IGNORECASE) for p in patterns))


_MONTH = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
          r"sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")
_WEEKDAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)days?"
_RELATIVE_EN = (r"wife|husband|partner|spouse|son|daughter|child|children|kids?|baby|mother|mom|"
                r"mum|father|dad|parents?|sister|brother|sibling|grand(?:ma|pa|mother|father)|"
                r"aunt|uncle|cousin|niece|nephew|girlfriend|boyfriend|fianc[eé]e?|boss|manager|"
                r"colleague|co-?worker|friend|neighbou?r|roommate|flatmate|landlord|landlady|"
                r"teacher|doctor|dentist|cat|dog|pet")
_RELATIVE_KO = (r"아내|남편|와이프|아들|엄마|어머니|아버지|아빠|부모님|누나|언니|오빠|동생|"
                r"할머니|할아버지|삼촌|이모|고모|사촌|조카|여자 ?친구|남자 ?친구|여친|남친|약혼|"
                r"친구|동기|동료|상사|팀장|부장|과장|사장님|선배|후배|이웃|집주인|선생님|"
                r"고양이|강아지|반려")

# Asked to be kept, or called important.
EXPLICIT = _kind(
    "explicit", 0.8,
    r"\b(?:remember|don'?t forget|never forget|keep in mind|important|crucial|critical|"
    r"essential|make sure|take note|note that)\b",
    r"기억해|기억하|잊지 ?마|잊으면 안|잊어버리지|중요|명심|메모해|적어 ?둬|필수",
)
# What would hurt to lose or leak.
SECRET = _kind(
    "secret", 0.8,
    r"\b(?:passwords?|passcodes?|passphrases?|pin(?: code)?|api.?keys?|tokens?|secret keys?|"
    r"credentials?|ssh keys?|access codes?|door codes?)\b",
    r"비밀번호|암호|인증 ?번호|토큰|api ?키|출입 ?코드",
)
# Something to do: a duty, a rule, an appointment.
DUTY = _kind(
    "duty", 0.6,
    r"\b(?:must|need(?:s)? to|ha(?:ve|s) to|should|ought to|to-?do|deadline|due|appointment|"
    r"meeting|remind me|reminder|expires?|renew|submit|pay (?:the|my|our)|urgent|asap|never|"
    r"always)\b",
    r"해야|하지 ?마|마감|(?:일|요일|주|달|시|말|내일|모레|오늘)까지|약속|회의|미팅|예약|일정|"
    r"제출|납부|갱신|만료|급해|긴급|꼭|반드시|절대",
)
# Who is who: names, relations between people, where they live and work, when they were born.
PERSON = _kind(
    "person", 0.5,
    r"\b(?:named|called|names? (?:is|was|are))\b",
    rf"\b(?:my|your|his|her|our|their|\w+'s)\s+(?:\w+\s+)?(?:{_RELATIVE_EN})s?\b",
    rf"\bis (?:my|your|his|her|our|their|\w+'s) (?:{_RELATIVE_EN})\b",
    r"\b(?:married|engaged|divorced|dating|works? (?:at|for|as)|worked (?:at|for|as)|"
    r"lives? in|lived in|moved to|born|birthday|anniversary)\b",
    # An e-mail address (its local part starts a run and is at most 64 characters, so a long
    # run of letters costs one try, not one per letter), a phone number.
    r"(?<![\w.+-])[\w.+-]{1,64}@[\w-]+\.\w+|\+?\d[\d -]{7,}\d",
    rf"이름은|이름이|라는 이름|{_RELATIVE_KO}|(?<![가-힣])(?:형|딸)(?![가-힣])|"
    r"(?<![가-힣])(?:형|딸)(?=[이은는을과도의에]|님)",
    r"에서 일해|에서 일하|회사에 다니|회사에 다녀|에 살아|에 살고|에 살았|이사|태어났|생일|생신|"
    r"기념일|결혼|전화번호|주소|이메일",
)
# Likes, dislikes, habits, diets.
PREFERENCE = _kind(
    "preference", 0.5,
    r"\b(?:prefers?|preferred|favou?rite|vegetarian|vegan|allergic|can'?t stand|usually|"
    r"(?:don'?t|doesn'?t|never) (?:eat|drink)s?)\b",
    r"\b(?:i|he|she|we|they)\s+(?:really\s+|also\s+|do\s+|does\s+)?"
    r"(?:love|like|enjoy|hate|dislike|adore)s?\b(?!\s+(?:it|this|that|you|to)\b)",
    r"(?-i:\b[A-Z][a-z]+)\s+(?:loves|likes|enjoys|hates|dislikes|prefers|adores)\b",
    r"좋아해|좋아하|좋아요|싫어해|싫어하|싫어요|선호|채식|알레르기|못 먹|안 먹|즐겨",
)
# When and how much: dates, times, amounts with their unit.
DATE_OR_NUMBER = _kind(
    "date or number", 0.45,
    r"\b\d{4}[-/.]\d{1,2}[-/.]\d{1,2}\b|\b\d{1,2}[/.]\d{1,2}(?:[/.]\d{2,4})?\b",
    rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\b|\b{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b",
    rf"\b(?:{_WEEKDAY}|january|february|march|april|june|july|august|september|october|"
    r"november|december|tomorrow|tonight|noon|midnight|next (?:week|month|year))\b",
    r"\b\d{1,2}(?::\d{2})?\s*(?:am|pm)\b|\b\d{1,2}:\d{2}\b|\b(?:19|20)\d{2}\b|\b\d+(?:st|nd|rd|th)\b",
    # Number runs start where no digit, comma or point stands before them: each run is tried
    # once, not once per digit (a run of 32,768 digits took 30 s before).
    r"[$€£₩]\s*\d|(?<![\d,.])\d[\d,.]*\s*(?:kg|g|km|m|cm|mm|mi|miles?|lbs?|gb|mb|tb|%|percent|dollars?|"
    r"euros?|pounds|won|yen|minutes?|hours?|days?|weeks?|months?|years?)\b",
    r"(?<!\d)\d+\s*(?:년|월|일|시|분|층|살|%)|[월화수목금토일]요일|내일|모레|다음 ?주|다음 ?달|"
    r"(?<![\d,])\d[\d,]*\s*(?:만|천|억)?\s*원|(?<!\d)\d+\s*(?:킬로|미터|센티|기가|메가|퍼센트)",
)
# A feeling: worth keeping beside another cue, not alone.
FEELING = _kind(
    "feeling", 0.3,
    r"\b(?:love|hate|happy|sad|angry|afraid|scared|fear|joy|excited|worried|anxious|upset|"
    r"stressed|proud|lonely|grateful|amazing|terrible|wonderful|horrible|fantastic|awful)\b",
    r"사랑|미워|행복|슬퍼|슬프|화가|화나|무서|두려|기뻐|기쁘|신나|걱정|번아웃|불안|외로|최고|끔찍|"
    r"멋지|멋진|훌륭|최악",
)

KINDS: tuple[CueKind, ...] = (EXPLICIT, SECRET, DUTY, PERSON, PREFERENCE, DATE_OR_NUMBER, FEELING)
