"""The rule-based entity extractor: what it finds, what it must not, and its bounds."""

from __future__ import annotations

import time

import pytest
from celestial_memory.graph.entities import KINDS, MAX_ENTITIES, MAX_KEY, Entity, RuleExtractor

extractor = RuleExtractor()

# (text, keys that must be found, keys that must not be found)
TABLE: list[tuple[str, set[str], set[str]]] = [
    # Conversational lines in the style of LoCoMo: the speaker prefix is a name.
    ("Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
     {"caroline", "lgbtq"}, {"i", "yesterday", "went"}),
    ("Melanie: Wow, that's cool! I painted a sunrise last week.",
     {"melanie"}, {"wow", "i", "cool", "last week"}),
    ("Jon: I lost my job as a banker on 19 January, 2023.",
     {"jon", "2023-01-19"}, {"i", "january", "19"}),
    ("Caroline: Hey Mel! How are you doing?", {"caroline", "mel"}, {"hey", "hey mel", "how"}),
    ("Gina: Thanks Jon, that means a lot. Lol I needed that.", {"gina", "jon"}, {"thanks", "lol", "i"}),
    ("Will: I'll see you there!", {"will"}, {"i"}),
    # Sentence-initial common words are not names; names mid-sentence are.
    ("Yesterday I met Bob's sister at the park.", {"bob"}, {"yesterday", "bob's", "i"}),
    ("The weather was lovely, so we walked.", set(), {"the", "the weather", "weather"}),
    ("Wow. Oh. Yeah. Okay. Hi there.", set(), {"wow", "oh", "yeah", "okay", "hi"}),
    ("Then Caroline called me about the trip.", {"caroline"}, {"then", "then caroline"}),
    ("I went hiking on Saturday and again last Sunday.", set(), {"saturday", "sunday", "last sunday"}),
    ("We saw Bank of America and Vincent van Gogh paintings.",
     {"bank of america", "vincent van gogh"}, {"bank", "america"}),
    ("Mr. Smith and Dr Jones met Jean-Luc O'Brien.",
     {"smith", "jones", "jean-luc o'brien"}, {"mr", "dr", "mr. smith", "dr jones"}),
    ("OMG SO COOL, I LOVE IT", set(), {"omg", "so", "cool", "i", "love", "it"}),
    ("I read The Hobbit last year and Tolkien's letters.", {"the hobbit", "tolkien"}, {"tolkien's", "i"}),
    # Places need a cue.
    ("I moved to Paris in May 2023 and I'm from New York.",
     {"paris", "2023-05", "new york"}, {"may", "i'm"}),
    ("She talked to Mel about learning in English.", {"mel"}, set()),
    # Dates.
    ("We married on 7 May 2023.", {"2023-05-07"}, {"may", "7"}),
    ("The party is on May 7, 2023, right?", {"2023-05-07"}, {"may"}),
    ("Her birthday is May 7th.", {"--05-07"}, set()),
    ("Filed 2023-05-07, again 05/07/2023 and 31/12/2022.", {"2023-05-07", "2022-12-31"}, set()),
    ("I have lived here since 2016.", {"2016"}, {"2016 year"}),
    ("It broke in 1000 ways on 2023-02-30.", set(), {"1000", "2023-02-30"}),
    ("May I ask what you did on Monday?", set(), {"may", "monday"}),
    # Numbers with units.
    ("I ran 10 km and then 5 miles with my 3 kids.", {"10 km", "5 mile", "3 kid"}, {"10", "3"}),
    ("It cost $20, or 20 dollars, with 30% off for 2 hours.",
     {"20 usd", "30 percent", "2 hour"}, {"20", "30"}),
    ("We raised $1.5 million and 1,000 people came.", {"1500000 usd", "1000 person"}, set()),
    ("My two dogs are 5 years old; the 5-year-old one is calm.", {"2 dog", "5 year old"}, {"two"}),
    ("I've been painting for five years.", {"5 year"}, set()),
    ("She scored 42 today and one day she will win.", set(), {"42", "1 day", "one day"}),
    # Titles.
    ('My favourite book is "The Hobbit" and I loved “Little Women” too.',
     {"the hobbit", "little women"}, set()),
    ("We sang 'Happy Birthday' but it's 'fine', just 'ok'.", {"happy birthday"}, {"fine", "ok"}),
    ('That was so "cool" and "fun".', set(), {"cool", "fun"}),
    ("Caroline: I painted \"Sunrise Over the Lake\" for the LGBTQ center.",
     {"caroline", "sunrise over the lake", "lgbtq"}, set()),
    # Korean: honorifics, place suffixes, known places, dates, counters, quotes.
    ("지민씨가 어제 한강공원에서 친구 3명이랑 10킬로 뛰었어요.",
     {"지민", "한강공원", "3 person", "10 kilo"}, {"지민씨", "친구", "어제"}),
    ("김민수 선생님은 부산에서 5년 동안 일했어요.", {"김민수", "부산", "5 year"}, {"선생", "선생님"}),
    ("2023년 5월 7일에 서울대학교병원에 갔어.", {"2023-05-07", "서울대학교병원"}, {"5월", "7 day"}),
    ("5월 7일에 만나요. 2023년에 시작했어요.", {"--05-07", "2023"}, {"7 day"}),
    ("선생님이 고양이를 키워요. 부모님께 전화했어요.", set(), {"선생", "고양", "부모"}),
    ("친구랑 운동했어. 반드시 다시 올게. 봉사활동에 참여했어.",
     set(), {"친구", "운동", "반드시", "봉사활동"}),
    ("우리학교 대학교에 갔다가 지하철역에서 내렸어.", set(), {"우리학교", "대학교", "지하철역"}),
    ("강남역에서 두 시간 기다렸어.", {"강남역", "2 hour"}, {"두"}),
    ("미국에서 왔고 한국어를 공부해요.", {"미국"}, {"한국어", "한국"}),
    ("서울시에 살고 강남구에서 일해요.", {"서울", "강남구"}, {"서울시"}),
    ("『어린 왕자』와 「별」을 읽었어.", {"어린 왕자", "별"}, set()),
    ("20달러를 냈고 3만원도 냈어요. 2시간 걸렸어요.", {"20 usd", "30000 krw", "2 hour"}, set()),
    ("아저씨랑 아가씨가 손님들이랑 왔어요.", set(), {"아저", "아가", "손님"}),
    ("수진언니랑 민호 오빠가 다섯 살 조카를 데려왔어.", {"수진", "민호", "5 year old"}, {"조카"}),
    ("Caroline이 어제 서울에 왔어요.", {"caroline", "서울"}, {"어제"}),
]


def keys(text: str) -> set[str]:
    return {e.key for e in extractor.extract(text)}


@pytest.mark.parametrize(("text", "must_find", "must_not_find"), TABLE)
def test_table(text: str, must_find: set[str], must_not_find: set[str]) -> None:
    found = keys(text)
    assert must_find <= found, (text, found)
    assert not must_not_find & found, (text, found)


def test_table_size() -> None:
    korean = [row for row in TABLE if any("가" <= c <= "힣" for c in row[0])]
    assert len(TABLE) >= 40 and len(korean) >= 12


def test_entities_are_well_formed() -> None:
    for text, _, _ in TABLE:
        entities = extractor.extract(text)
        assert len({e.key for e in entities}) == len(entities)  # deduplicated by key
        for e in entities:
            assert e.kind in KINDS and e.name == e.name.strip() and e.key
            assert len(e.key) <= MAX_KEY and e.key == e.key.lower()


def test_kinds() -> None:
    def kind_of(text: str, key: str) -> str:
        return next(e.kind for e in extractor.extract(text) if e.key == key)

    assert kind_of("I met Caroline in Paris.", "caroline") == "person_or_name"
    assert kind_of("I met Caroline in Paris.", "paris") == "place"
    assert kind_of("We flew to Tokyo on 7 May 2023.", "tokyo") == "place"
    assert kind_of("We flew to Tokyo on 7 May 2023.", "2023-05-07") == "date"
    assert kind_of("I ran 10 km.", "10 km") == "number"
    assert kind_of('I read "The Hobbit".', "the hobbit") == "title"
    assert kind_of("지민씨가 한강공원에 갔어요.", "지민") == "person_or_name"
    assert kind_of("지민씨가 한강공원에 갔어요.", "한강공원") == "place"


def test_first_appearance_order_and_dedup() -> None:
    entities = extractor.extract("Mel met Jon. Later Jon met Mel and Caroline in Paris.")
    assert [e.key for e in entities] == ["mel", "jon", "caroline", "paris"]


def test_names_keep_their_surface_form() -> None:
    [bob] = extractor.extract("I met Bob's   sister.")
    assert bob == Entity("Bob", "bob", "person_or_name")
    [mel] = extractor.extract("We saw Mel there.")
    assert mel.name == "Mel"


@pytest.mark.parametrize(
    "text",
    ["가" * 32768, "😀" * 32768, "A" * 32768, "A " * 16384, "1 " * 16384, "'s " * 10922, "『" * 32768,
     "1 km " * 6553, "Mr. Bob " * 4096, '"A" ' * 8192, "지민씨 서울에 " * 4096],
)
def test_hostile_input_is_bounded(text: str) -> None:
    start = time.perf_counter()
    entities = extractor.extract(text)
    # Generous, so a loaded machine never fails it; a regex that backtracks takes seconds.
    assert time.perf_counter() - start < 2.0
    assert len(entities) <= MAX_ENTITIES


def test_many_distinct_entities_are_capped() -> None:
    text = ", ".join(f"Zed{chr(97 + i % 26)}{chr(97 + i // 26)}" for i in range(200))
    assert len(extractor.extract(text)) == MAX_ENTITIES
    assert len(RuleExtractor(max_entities=5).extract(text)) == 5


def test_long_title_and_key_are_capped() -> None:
    long_name = " ".join(["Alpha"] * 4)
    assert all(len(e.key) <= MAX_KEY for e in extractor.extract(f"I met {long_name} today."))
    assert extractor.extract('She said "' + "word " * 30 + '" twice.') == []  # over 80 chars: no title


def test_extract_many_equals_extract() -> None:
    texts = [row[0] for row in TABLE] + ["", "   "]
    assert extractor.extract_many(texts) == [extractor.extract(t) for t in texts]


def test_empty_text() -> None:
    assert extractor.extract("") == [] and extractor.extract("   \n") == []
