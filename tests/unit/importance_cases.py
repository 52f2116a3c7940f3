"""Labelled sentences for the importance rules, each with the band its importance should fall in.

The bands follow what importance does to a new memory (docs/design.md, "Importance by rules"):
its score starts at w_a·A = 0.25·A, and outer takes it from 0.10, so

- ``low``    A < 0.4: it enters the belt (small talk, passing moods);
- ``medium`` 0.4 <= A < 0.7: it enters outer (names, relations, preferences, dates, numbers, tasks);
- ``high``   A >= 0.7: outer, and it stays there longest (explicit asks, secrets, dated duties).

``CASES`` is the table the rules were improved against; ``HELD_OUT`` was written with it, before
the rules changed, and was not used to tune them (though whoever wrote the rules had read it);
``FRESH`` was written after and measured once: their agreement says how far the rules carry.

    python -m tests.unit.importance_cases        (agreement of the current rules, and the misses)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

BANDS = {"low": (0.0, 0.4), "medium": (0.4, 0.7), "high": (0.7, 1.01)}

CASES: list[tuple[str, str]] = [
    # explicit asks to remember, and what is called important
    ("Remember: never deploy on Fridays", "high"),
    ("Important: the staging database is wiped every Sunday night", "high"),
    ("Please remember that I take my coffee without sugar", "high"),
    ("Don't forget to renew the domain before it expires", "high"),
    ("Keep in mind that Dana is allergic to peanuts", "high"),
    ("기억해: 금요일에는 절대 배포하지 마", "high"),
    ("중요한 건 매주 월요일 아침에 백업을 확인하는 거야", "high"),
    ("잊지 마, 엄마 생신은 5월 8일이야", "high"),
    ("이거 꼭 기억해 줘: 회의실 비밀번호는 4821이야", "high"),
    # secrets
    ("The wifi password is hunter2", "high"),
    ("Our API key for the weather service is stored in vault under /prod/weather", "high"),
    ("서버 접속 비밀번호는 매달 바뀐다", "high"),
    # duties with a date
    ("The tax return is due on April 15", "high"),
    ("I have a dentist appointment on March 3 at 10am", "high"),
    ("The report must be submitted by Friday noon", "high"),
    ("다음 주 화요일까지 보고서를 제출해야 해", "high"),
    ("3월 3일 오전 10시에 치과 예약이 있어", "high"),
    # duties without a date
    ("I need to call the plumber about the leaking sink", "medium"),
    ("We should update the onboarding guide", "medium"),
    ("세탁기 수리 기사에게 전화해야 해", "medium"),
    # names and relations between people
    ("Bob's cat is named Whiskers", "medium"),
    ("My sister Emma lives in Toronto", "medium"),
    ("Alice is Bob's manager", "medium"),
    ("Carlos works at the city hospital as a nurse", "medium"),
    ("My wife's name is Priya", "medium"),
    ("Tom and Lisa got married last June", "medium"),
    ("Jin's daughter started university this year", "medium"),
    ("민수의 고양이 이름은 나비야", "medium"),
    ("제 남편은 판교에 있는 회사에 다녀요", "medium"),
    ("지영이는 내 대학 동기야", "medium"),
    ("우리 팀장님 이름은 박서준이다", "medium"),
    # preferences
    ("I prefer window seats on long flights", "medium"),
    ("My favourite food is spicy ramen", "medium"),
    ("Sarah hates cilantro", "medium"),
    ("He is vegetarian and doesn't eat fish either", "medium"),
    ("I like my reports in PDF rather than Word", "medium"),
    ("저는 매운 음식을 좋아해요", "medium"),
    ("나는 아침보다 저녁에 운동하는 걸 선호해", "medium"),
    ("아내는 오이를 싫어해", "medium"),
    # dates and numbers
    ("My birthday is on 14 February", "medium"),
    ("The flat rent is 1,200 dollars a month", "medium"),
    ("I was born in 1988 in Busan", "medium"),
    ("The office moves to the 12th floor on 2025-01-06", "medium"),
    ("I ran 10 km in 52 minutes this morning", "medium"),
    ("내 생일은 9월 21일이야", "medium"),
    ("월세는 매달 85만 원이야", "medium"),
    # small talk and passing moods
    ("hello there, how are you", "low"),
    ("lol that's funny", "low"),
    ("Thanks, that helps!", "low"),
    ("ok sounds good", "low"),
    ("What a nice day it is today", "low"),
    ("I'm just browsing, nothing in particular", "low"),
    ("Haha, I love this, it is amazing", "low"),
    ("Good morning!", "low"),
    ("Let me think about it for a second", "low"),
    ("That movie was terrible, honestly", "low"),
    ("I'm a bit tired today", "low"),
    ("안녕하세요 반가워요", "low"),
    ("ㅋㅋㅋ 진짜 웃기다", "low"),
    ("고마워요, 도움이 됐어요", "low"),
    ("오늘 날씨 좋네", "low"),
    ("음... 잘 모르겠어", "low"),
]

HELD_OUT: list[tuple[str, str]] = [
    ("Remember that the gate code is 1942", "high"),
    ("Never merge to main without a review, this is important", "high"),
    ("Pay the electricity bill before the 20th", "high"),
    ("비밀번호 잊어버리지 않게 적어둬", "high"),
    ("그 회의는 목요일 오후 2시로 옮겨졌어", "high"),
    ("The lease ends on 31 August", "medium"),
    ("Grandma's name was Rose", "medium"),
    ("Kenji is my landlord", "medium"),
    ("She can't stand loud music", "medium"),
    ("I usually drink green tea in the afternoon", "medium"),
    ("내 아들 이름은 도윤이야", "medium"),
    ("나는 고수를 못 먹어", "medium"),
    ("다음 달 15일이 결혼기념일이야", "medium"),
    ("Nice, see you later", "low"),
    ("hmm interesting", "low"),
    ("I don't know, maybe", "low"),
    ("그래 알았어", "low"),
    ("배고프다", "low"),
    ("The weather is awful today", "low"),
    ("That's so cool!", "low"),
]

# Written after the rules changed and measured once, without tuning the rules to it.
FRESH: list[tuple[str, str]] = [
    ("Note that the VPN disconnects every 8 hours", "high"),
    ("Critical: the backup script deletes files older than 30 days", "high"),
    ("The door code for the office is 7731", "high"),
    ("I must pick up Mia from school at 3pm on Thursday", "high"),
    ("My flight to Seoul leaves on 12 May at 9:40", "high"),
    ("Please don't share the admin token with anyone", "high"),
    ("꼭 알아둬: 주차장은 밤 11시에 닫혀", "high"),
    ("이번 주 토요일에 동생 결혼식이 있어", "high"),
    ("Daniel is my brother-in-law", "medium"),
    ("Our neighbour Mrs. Kim has two dogs", "medium"),
    ("Mark prefers email to phone calls", "medium"),
    ("I hate waking up early", "medium"),
    ("Laura's husband is a pilot", "medium"),
    ("우리 딸은 수영을 좋아해", "medium"),
    ("저는 커피보다 차를 더 좋아해요", "medium"),
    ("The car needs new tyres", "medium"),
    ("I weigh 72 kg now", "medium"),
    ("See you tomorrow!", "low"),
    ("ㅎㅎ 좋은 하루 보내", "low"),
    ("Wow, that's wonderful news", "low"),
    ("Sorry, I was away for a minute", "low"),
    ("그렇구나", "low"),
    ("I'm so happy right now", "low"),
    ("This pizza is great", "low"),
]


def band(value: float) -> str:
    return next(name for name, (lo, hi) in BANDS.items() if lo <= value < hi)


def misses(evaluate: Callable[[str], float],
           cases: Sequence[tuple[str, str]]) -> list[tuple[str, str, float]]:
    """(sentence, expected band, importance) for each sentence outside its band."""
    return [(text, want, got) for text, want in cases if band(got := evaluate(text)) != want]


def agreement(evaluate: Callable[[str], float], cases: Sequence[tuple[str, str]]) -> float:
    """The share of sentences whose importance falls in their band."""
    return 1 - len(misses(evaluate, cases)) / len(cases)


def zone_agreement(evaluate: Callable[[str], float], cases: Sequence[tuple[str, str]]) -> float:
    """The share of sentences that enter the zone their band says (belt for low, else outer)."""
    right = sum((band(evaluate(text)) == "low") == (want == "low") for text, want in cases)
    return right / len(cases)


if __name__ == "__main__":
    from celestial_memory.domain.importance import RuleBasedEvaluator

    rules = RuleBasedEvaluator().evaluate
    for name, cases in (("table", CASES), ("held out", HELD_OUT), ("fresh", FRESH)):
        print(f"{name}: {agreement(rules, cases):.1%} of {len(cases)} in their band, "
              f"{zone_agreement(rules, cases):.1%} in their first zone (belt or outer)")
        for text, want, got in misses(rules, cases):
            print(f"    {got:.2f} {band(got):>6} (want {want:>6})  {text}")
