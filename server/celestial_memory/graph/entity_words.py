"""Word lists for the rule-based entity extractor (``entities.py``), English and Korean.

All English words are lower-case; the extractor compares a word's lower-case form.
"""

from __future__ import annotations


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Never part of a name, anywhere: interjections, chat shorthand, weekdays and months (dates are
# their own kind), honorific abbreviations (the name follows them) and line labels.
NEVER_NAMES = _words("""
    hey hi hello hiya howdy wow whoa oh ooh ohh ah ahh aw aww awww yeah yea yes yep yup nah nope
    ok okay alright thanks thank thx ty lol lmao rofl haha hahaha hehe omg omfg btw fyi imo tbh
    idk brb ugh hmm hm um umm uh uhh oops whoops yay woohoo congrats congratulations cheers bye
    goodbye please sorry wait gosh geez jeez yikes xoxo
    today tomorrow yesterday tonight
    monday tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays
    thursdays fridays saturdays sundays mon tue tues wed thu thur thurs fri sat sun
    january february march april may june july august september october november december
    mr mrs ms mx dr prof sir madam st mt jr sr vs
    note ps edit update re fwd subject question answer tip todo reminder warning summary
""")

# Never a one-word name, and dropped from the start of a sentence: pronouns, determiners,
# conjunctions, prepositions, auxiliaries. Kept inside a longer name mid-sentence ("The Hobbit").
FUNCTION_WORDS = _words("""
    i me my mine myself you your yours yourself he him his himself she her hers herself it its
    itself we us our ours ourselves they them their theirs themselves this that these those who
    whom whose what which when where why how whatever whoever the a an some any every each all
    both no none many much most more few several such another other either neither and but or
    nor so yet for if because although though while since unless until as after before once
    then than in on at to from with without about of by into onto over under through during
    around near between among against upon within is am are was were be been being do does did
    done have has had can could would shall should might must there here not also just only
    very too
""")

# Common words that start sentences: dropped only there (a capital there says nothing).
COMMON_INITIAL = FUNCTION_WORDS | _words("""
    will may let lets now later soon recently lately always never sometimes often usually
    finally anyway anyways again already still even really actually honestly definitely
    probably maybe perhaps basically literally seriously totally absolutely exactly hopefully
    luckily unfortunately fortunately sadly obviously clearly apparently besides otherwise
    however therefore instead meanwhile eventually suddenly somehow right well sure last next
    first second third lastly plus like almost especially kinda sorta quite pretty super
    together overall indeed
    went go going gone got get getting come came coming make made making take took taking
    think thought know knew see saw seeing look looking looks feel felt feeling want wanted
    need needed tell told said say saying keep kept try tried trying check remember guess hope
    wish learned learnt started starting found finding having love loved loving liked enjoy
    enjoyed enjoying spent spending met meeting bought buying watched watching read reading
    played playing working worked cooked painted painting visited visiting gave give giving
    thinking talking talked glad happy excited proud sounds sound seems seem hoping wishing
    planning planned decided joined signed moved moving doing stop listen imagine agreed
    everything everyone everybody something someone somebody anything anyone anybody nothing
    nobody nowhere somewhere anywhere everywhere life family work school home kids people time
    good great nice cool awesome amazing beautiful lovely fun funny interesting true same
    different important hard easy better best worse worst big little small old long one two
    three four five lots thing things yours truly
""")

# Lower-case words allowed inside a name ("Bank of America", "Vincent van Gogh").
NAME_CONNECTORS = _words("of de van von der den da del di du la le")

# A period after these does not end a sentence.
ABBREVIATIONS = _words("mr mrs ms mx dr prof st jr sr vs mt")

# The word before a name that makes it a place.
PLACE_CUES = _words("in at near around visited visiting visit across inside outside")
# "to <Name>" is a place only after a motion: "went to Paris", not "talked to Mel".
MOTION_VERBS = _words("""
    went go goes going gone moved move moving flew fly flying drove drive driving trip travel
    travelled traveled traveling travelling back headed heading came come coming way road
    relocated returned walked ran
""")
# "from <Name>": "I'm from Sweden", "moved from Ohio", not "a card from Mel".
FROM_CUES = _words("am i'm i’m is are was were originally moved move came come comes flew drove back")
# Capitalised after a place cue but not places: "in English".
NOT_PLACES = _words("""
    english korean spanish french german chinese japanese italian portuguese russian arabic
    hindi python java math history art
""")

MONTHS: dict[str, int] = {
    "January": 1, "February": 2, "March": 3, "April": 4, "May": 5, "June": 6, "July": 7,
    "August": 8, "September": 9, "October": 10, "November": 11, "December": 12,
    "Jan": 1, "Feb": 2, "Mar": 3, "Apr": 4, "Jun": 6, "Jul": 7, "Aug": 8, "Sep": 9, "Sept": 9,
    "Oct": 10, "Nov": 11, "Dec": 12,
}

# English units: surface form -> the singular unit the key uses.
EN_UNITS: dict[str, str] = {
    "km": "km", "kms": "km", "kilometer": "km", "kilometers": "km", "kilometre": "km",
    "kilometres": "km", "mi": "mile", "mile": "mile", "miles": "mile", "m": "m", "meter": "m",
    "meters": "m", "metre": "m", "metres": "m", "cm": "cm", "mm": "mm", "kg": "kg", "kgs": "kg",
    "kilo": "kg", "kilos": "kg", "kilogram": "kg", "kilograms": "kg", "g": "g", "gram": "g",
    "grams": "g", "lb": "lb", "lbs": "lb", "pound": "pound", "pounds": "pound", "ft": "ft",
    "foot": "ft", "feet": "ft", "inch": "inch", "inches": "inch", "l": "l", "liter": "l",
    "liters": "l", "litre": "l", "litres": "l", "ml": "ml", "gb": "gb", "mb": "mb", "tb": "tb",
    "degree": "degree", "degrees": "degree",
    "sec": "second", "secs": "second", "second": "second", "seconds": "second",
    "min": "minute", "mins": "minute", "minute": "minute", "minutes": "minute", "h": "hour",
    "hr": "hour", "hrs": "hour", "hour": "hour", "hours": "hour", "day": "day", "days": "day",
    "week": "week", "weeks": "week", "month": "month", "months": "month", "year": "year",
    "years": "year", "yr": "year", "yrs": "year", "decade": "decade", "decades": "decade",
    "year old": "year old", "years old": "year old", "year-old": "year old",
    "years-old": "year old", "time": "time", "times": "time",
    "dollar": "usd", "dollars": "usd", "buck": "usd", "bucks": "usd", "usd": "usd",
    "euro": "eur", "euros": "eur", "eur": "eur", "won": "krw", "krw": "krw", "yen": "jpy",
    "cent": "cent", "cents": "cent", "%": "percent", "percent": "percent", "per cent": "percent",
    "kid": "kid", "kids": "kid", "child": "child", "children": "child", "son": "son",
    "sons": "son", "daughter": "daughter", "daughters": "daughter", "brother": "brother",
    "brothers": "brother", "sister": "sister", "sisters": "sister", "sibling": "sibling",
    "siblings": "sibling", "grandkid": "grandkid", "grandkids": "grandkid",
    "grandchild": "grandchild", "grandchildren": "grandchild", "friend": "friend",
    "friends": "friend", "people": "person", "person": "person", "persons": "person",
    "student": "student", "students": "student", "member": "member", "members": "member",
    "dog": "dog", "dogs": "dog", "cat": "cat", "cats": "cat", "pet": "pet", "pets": "pet",
    "book": "book", "books": "book", "painting": "painting", "paintings": "painting",
    "song": "song", "songs": "song", "page": "page", "pages": "page", "step": "step",
    "steps": "step", "game": "game", "games": "game", "class": "class", "classes": "class",
    "lesson": "lesson", "lessons": "lesson",
}
CURRENCY_SIGNS: dict[str, str] = {"$": "usd", "€": "eur", "£": "gbp", "₩": "krw", "¥": "jpy"}
MULTIPLIERS: dict[str, int] = {
    "k": 1_000, "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000,
    "bn": 1_000_000_000, "천": 1_000, "만": 10_000, "억": 100_000_000,
}
# "one" is left out: mostly an article or an idiom ("one day").
NUMBER_WORDS: dict[str, int] = {
    "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
    "ten": 10, "eleven": 11, "twelve": 12, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
    "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100,
}

# Korean units after digits -> the English unit of the key. "킬로" stays "kilo": km or kg.
KO_UNITS: dict[str, str] = {
    "명": "person", "사람": "person", "마리": "animal", "개월": "month", "개": "item",
    "달": "month", "년": "year", "주일": "week", "주": "week", "일": "day", "시간": "hour",
    "분": "minute", "초": "second", "살": "year old", "세": "year old", "번": "time",
    "회": "time", "잔": "cup", "권": "volume", "층": "floor", "킬로미터": "km",
    "킬로그램": "kg", "킬로": "kilo", "미터": "m", "센티미터": "cm", "센티": "cm",
    "달러": "usd", "불": "usd", "원": "krw", "유로": "eur", "엔": "jpy", "퍼센트": "percent",
    "프로": "percent", "가지": "kind",
}
# Native numerals and the counters they take ("두 명", "세 시간"); "한" is left out like "one".
KO_NATIVE_NUMBERS: dict[str, int] = {
    "두": 2, "세": 3, "네": 4, "다섯": 5, "여섯": 6, "일곱": 7, "여덟": 8, "아홉": 9, "열": 10,
    "스무": 20,
}
KO_COUNTERS = ("명", "사람", "마리", "개", "살", "시간", "번", "잔", "권", "달", "가지")
# What may follow a native numeral's counter: a particle or a duration word.
KO_NUMBER_TAILS = ("동안", "정도", "쯤", "씩", "간", "만에")

KO_PARTICLES = (
    "은", "는", "이", "가", "을", "를", "에", "에서", "에게", "에게서", "한테", "한테서", "께",
    "께서", "의", "와", "과", "랑", "이랑", "하고", "도", "만", "로", "으로", "까지", "부터",
    "처럼", "보다", "이나", "나", "이든", "든", "이야", "야", "이에요", "예요", "입니다",
    "이다", "이고", "인데", "에서는", "에서도", "에는", "에도", "으로는", "로는", "까지는",
    "부터는", "한테는", "에게는", "이랑은", "랑은", "하고는", "와는", "과는", "께서는",
)
# Particles that say "where" (and the genitive), required after one-syllable place suffixes.
KO_LOCATIVE = ("에서", "에", "으로", "로", "까지", "부터", "의")

# Honorifics after a name (지민씨, 김민수 선생님); dropped from the name and its key.
KO_HONORIFICS = (
    "선생님", "교수님", "선배님", "사장님", "박사님", "작가님", "원장님", "팀장님", "부장님",
    "과장님", "대리님", "회장님", "목사님", "선배", "언니", "오빠", "누나", "씨", "님",
)
# Title words a name can end with before 님 (김선생님): stripped.
KO_TITLE_STEMS = ("선생", "교수", "사장", "박사", "작가", "원장", "팀장", "부장", "과장", "대리",
                  "선배", "회장", "목사")
# Common nouns that take 님 or 씨 and are not names.
KO_NOT_NAMES = _words("""
    선생 교수 사장 부모 어머 아버 할머 할아버 하나 고객 회원 여러 아저 아가 마음 의사 목사
    신부 기사 작가 우리 저희 그분 이분 저분 친구 동생 이모 고모 삼촌 사모 아드 며느 원장
    부장 과장 팀장 대리 회장 선배 후배 간호 환자 주인 사부 스승 도련 시어머 손글 말솜 박사
""")

# Places: known cities and countries, then suffixes. Words that are also common nouns
# (파리 "fly", 고양 as in 고양이 "cat", 전주 "last week") are left out.
KO_KNOWN_PLACES = (
    "서울", "부산", "대구", "인천", "광주", "대전", "울산", "세종", "제주도", "제주", "수원",
    "성남", "창원", "천안", "포항", "경주", "춘천", "강릉", "여수", "속초", "강남", "홍대",
    "명동", "이태원", "판교", "일산", "해운대", "경기도", "강원도", "충청도", "전라도", "경상도",
    "한국", "미국", "일본", "중국", "영국", "프랑스", "독일", "캐나다", "호주", "베트남", "태국",
    "대만", "이탈리아", "스페인", "뉴욕", "런던", "도쿄", "오사카", "하와이", "유럽",
)
KO_PLACE_SUFFIXES = (
    "공원", "대학교", "대학원", "대학", "학교", "병원", "카페", "호텔", "공항", "도서관",
    "박물관", "미술관", "백화점", "터미널", "해수욕장", "해변", "경기장", "교회", "성당", "마트",
    "리조트", "타워",
)
# One-syllable suffixes also end many common words: they need a two-syllable stem, a locative
# particle or the word's end, and a last two syllables not in KO_COMMON_ENDINGS.
KO_SHORT_PLACE_SUFFIXES = ("시", "구", "군", "동", "역", "산", "궁")
KO_COMMON_ENDINGS = _words("""
    드시 다시 도시 당시 동시 역시 혹시 잠시 즉시 임시 수시 표시 무시 전시 일시 교시 개시 제시
    감시 지시 게시 출시 친구 도구 가구 연구 요구 입구 출구 야구 축구 농구 배구 탁구 당구 완구
    문구 기구 장구 인구 장군 해군 육군 공군 국군 아군 적군 대군 활동 행동 운동 감동 이동 자동
    노동 충동 소동 변동 진동 작동 가동 출동 파동 연동 공동 지역 영역 무역 통역 번역 전역 동산
    수산 계산 예산 재산 생산 유산 출산 우산 자궁 미궁
""")
# A place word whose stem is generic is not a name: 우리학교, 대학교 (대 + 학교), 지하철역.
KO_GENERIC_STEMS = _words("""
    우리 저희 동네 근처 집근처 이 그 저 큰 작은 새 옛 대 초등 중 고등 여자 남자 동물 종합 대형
    놀이 국립 시립 지하철 기차 버스 고속 무슨 어느 다른 같은 한 두 세 그냥 다음 이번
""")
# A bare year is a date after these: "in 2019", "since 2016".
YEAR_CUES = _words("in since until till from during before after by of")
