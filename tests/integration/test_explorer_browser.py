"""The explorer (/explorer/ on the HTTP port) in a real headless browser (Debian's chromium, driven
by Selenium through chromedriver) against a live server: a search shows what a Recall without
reinforcement answers, grouped by zone, and reinforces nothing; a card shows the memory's
entities, its relations as a graph (a neighbour opens its own card) and its ledger history; a
vote lands in the service; API keys go in the fragment, and a missing one shows the error; a turn
the turn policy saved or skipped (Observe) says so on its card, with why, and a skipped one's
history shows the skip; such a kept-out turn takes a vote (it stays archived), and any other
archived memory's vote buttons stay disabled, with a line saying why. With a write key the card
shows every field of the memory, edits it, pins, unpins and deletes it, and the list follows
each change and each vote; with a read key the page shows no control to vote or change anything.
Skipped where no browser is installed. With ``CELESTIAL_EXPLORER_SCREENSHOT=path`` the run saves
a screenshot there (docs/explorer.png), 1400 px wide, one 420 px wide beside it
(docs/explorer-narrow.png), and one of the overview and a six-relation graph
(docs/explorer-overview.png).

Also: the checked-in explorer.js is what ``npm run build:explorer`` makes from the sources now
(skipped without node and npm)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import grpc
import pytest
from celestial_client import CelestialClient
from celestial_client.v1 import memory_pb2 as pb
from celestial_client.v1 import memory_pb2_grpc as pb_grpc
from celestial_memory.access.keys import create_key
from celestial_memory.clock import ManualClock
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder

from tests.browser import CHROMEDRIVER, CHROMIUM, MISSING, headless
from tests.integration.conftest import running_server

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "client" / "typescript"
BUNDLE = ROOT / "server" / "celestial_memory" / "api" / "explorer" / "explorer.js"
NODE = shutil.which("node") and shutil.which("npm")
needs_browser = pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason=MISSING)
ZONES = ["core", "inner", "outer", "belt", "cloud"]
T = "travel"
QUERY = "the trip to Lisbon"
# (content, importance): zones and scores differ; the first mentions a name, a place and a date.
NOTES = [("Alice Novak booked the flight to Lisbon for the conference on 12 May 2025", 0.9),
         ("The Lisbon conference hotel is on Avenida da Liberdade", 0.7),
         ("Carol recommended the pastries at a bakery in Belém near Lisbon", 0.5),
         ("Flight delays at Lisbon airport are common in summer", 0.2),
         ("Bob prefers the window seat on long flights", 0.4),
         ("The conference travel budget is 2000 euros", 0.0),
         ("The garden roses bloom in June", 0.3)]
Browser = Any  # selenium's WebDriver (selenium has no stubs here)


def webdriver_error() -> type[Exception]:
    from selenium.common.exceptions import WebDriverException
    return WebDriverException


def browser() -> Browser:
    pytest.importorskip("selenium.webdriver")
    return headless(1280, 900, console=True)  # the console: to read CSP reports


def marker(driver: Browser, name: str) -> int:
    try:
        return int(driver.execute_script(f"return document.body.dataset.{name} || 0"))
    except webdriver_error():  # the page is being loaded again
        return -1


def wait_for(driver: Browser, name: str, count: int, timeout: float = 60.0) -> None:
    """Until the page counted ``count`` finished loads of a kind (document.body.dataset)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if marker(driver, name) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"no {name} #{count} on the page: "
                         + driver.execute_script("return document.body.innerText"))


def after(driver: Browser, name: str, action: Callable[[], None]) -> None:
    """Runs ``action`` (a click, a submit) and waits for the load it starts to finish."""
    before = marker(driver, name)
    action()
    wait_for(driver, name, before + 1)


def search(driver: Browser, query: str) -> None:
    box = driver.find_element("id", "query")
    box.clear()
    box.send_keys(query)
    after(driver, "searches", driver.find_element("id", "search").click)


def open_card(driver: Browser, css: str) -> None:
    after(driver, "cards", driver.find_element("css selector", css).click)


def back(driver: Browser, forward: bool = False) -> None:
    """The browser's Back (or Forward) button, until the page has shown the entry's address."""
    after(driver, "steps", driver.forward if forward else driver.back)


def address(driver: Browser) -> dict[str, str]:
    """The page's address, read by the page: its query's parameters, and its fragment's length
    (a key's value never comes back here: the run's log would hold it)."""
    return dict(driver.execute_script("""
        return {...Object.fromEntries(new URLSearchParams(location.search)),
                hash: String(location.hash.length)}"""))


def shown_results(driver: Browser) -> list[dict[str, Any]]:
    return list(driver.execute_script("""
        return [...document.querySelectorAll('#results section.zone')].map(s => ({
          zone: s.dataset.zone,
          results: [...s.querySelectorAll('li.result')].map(li => ({
            id: li.dataset.id, zone: li.dataset.zone, score: Number(li.dataset.score),
            terms: Object.fromEntries([...li.querySelectorAll('.breakdown dd')].map(
              d => [d.dataset.term, Number(d.dataset.value)])),
            text: li.innerText}))}))"""))


def overview(driver: Browser) -> dict[str, Any]:
    return dict(driver.execute_script("""
        const home = document.getElementById('home');
        return {
          visible: !home.hidden,
          zones: Object.fromEntries([...home.querySelectorAll('#zones li')].map(
            z => [z.dataset.zone, Number(z.dataset.count)])),
          newest: [...home.querySelectorAll('#newest li.recent')].map(r => r.dataset.id),
          note: [...home.querySelectorAll('#newest li.none')].map(r => r.textContent),
        }"""))


def clear_search(driver: Browser) -> None:
    """Empties the search box by hand (select all, delete), until the overview is loaded again."""
    from selenium.webdriver.common.keys import Keys
    box = driver.find_element("id", "query")
    box.send_keys(Keys.CONTROL + "a")
    after(driver, "stats", lambda: box.send_keys(Keys.BACKSPACE))


def zone_name(zone: int) -> str:
    return pb.Zone.Name(zone).removeprefix("ZONE_").lower()


def shown_card(driver: Browser) -> dict[str, Any]:
    return dict(driver.execute_script("""
        const all = (css, f) => [...document.querySelectorAll(css)].map(f);
        return {
          id: document.getElementById('card').dataset.id,
          visible: !document.getElementById('card').hidden,
          content: document.getElementById('card-content').textContent,
          facts: Object.fromEntries(all('#card-facts dd', d => [d.dataset.field, d.textContent])),
          entities: all('#entities li.entity', e => e.dataset.entity),
          neighbours: all('#graph g.node.neighbour', g => g.dataset.id),
          edges: all('#graph line.edge', l => [l.dataset.relation, l.dataset.direction]),
          history: all('#history li.event', e => e.dataset.kind),
          votes: document.getElementById('votes').textContent,
        }"""))


def tools(driver: Browser) -> dict[str, Any]:
    """What the page decided the key may do, and which controls it shows for it."""
    return dict(driver.execute_script("""
        const shown = id => !document.getElementById(id).hidden;
        return {access: document.body.dataset.access, write: shown('write-tools'),
                vote: shown('vote-tools'), readOnly: shown('read-only')}"""))


def card_fields(driver: Browser) -> dict[str, Any]:
    """The card's other fields: summary, triples, metadata, relations, the note on its score."""
    return dict(driver.execute_script("""
        const all = (css, f) => [...document.querySelectorAll(css)].map(f);
        const note = document.getElementById('score-note');
        return {
          summary: document.getElementById('card-summary').textContent,
          triples: all('#triples li.triple', t => [t.dataset.subject, t.dataset.relation,
                                                   t.dataset.object]),
          metadata: Object.fromEntries(all('#metadata dd[data-key]',
                                           d => [d.dataset.key, d.textContent])),
          relations: all('#relations li.relation', r => ({
            id: r.dataset.id, relation: r.dataset.relation, weight: Number(r.dataset.weight),
            direction: r.dataset.direction, text: r.textContent})),
          terms: Object.fromEntries(all('#card-terms dd', d => [d.dataset.term,
                                                               Number(d.dataset.value)])),
          note: note.textContent, differs: note.dataset.differs || '',
          pin: document.getElementById('pin').textContent,
          status: document.getElementById('write-status').textContent,
        }"""))


def result_scores(driver: Browser) -> dict[str, float]:
    return {r["id"]: r["score"] for s in shown_results(driver) for r in s["results"]}


def edge_labels(driver: Browser) -> dict[str, Any]:
    """The relation graph's edge labels, and what each covers that it should not: another label,
    a node, an arrowhead (its triangle, as the marker draws it), an edge, the view's border."""
    return dict(driver.execute_script("""
        const g = document.getElementById('graph'), num = (e, a) => Number(e.getAttribute(a));
        const boxes = [...g.querySelectorAll('g.edge-label')].map(l => {
          const r = l.querySelector('rect'), t = l.querySelector('text');
          return {name: l.dataset.relation, text: t.textContent, t: t.getBBox(),
                  x0: num(r, 'x'), y0: num(r, 'y'), x1: num(r, 'x') + num(r, 'width'),
                  y1: num(r, 'y') + num(r, 'height')}});
        const problems = [];
        const inBox = (b, x, y) => x > b.x0 && x < b.x1 && y > b.y0 && y < b.y1;
        boxes.forEach((b, i) => {
          if (b.t.x < b.x0 - 0.5 || b.t.x + b.t.width > b.x1 + 0.5)
            problems.push(`${b.name}: wider than its background`);
          if (b.x0 < -150 || b.x1 > 150 || b.y0 < -85 || b.y1 > 85)
            problems.push(`${b.name}: outside the view`);
          boxes.forEach((o, j) => {
            if (j > i && o.x0 < b.x1 && b.x0 < o.x1 && o.y0 < b.y1 && b.y0 < o.y1)
              problems.push(`${b.name} on ${o.name}`)});
          for (const n of g.querySelectorAll('g.node')) {
            const m = n.transform.baseVal.consolidate();
            const x = m ? m.matrix.e : 0, y = m ? m.matrix.f : 0;
            const nx = Math.max(b.x0, Math.min(x, b.x1)), ny = Math.max(b.y0, Math.min(y, b.y1));
            if (Math.hypot(nx - x, ny - y) < num(n.querySelector('circle'), 'r'))
              problems.push(`${b.name} on the node ${n.dataset.id}`);
          }
          for (const l of g.querySelectorAll('line.edge')) {
            const [x1, y1, x2, y2] = ['x1', 'y1', 'x2', 'y2'].map(a => num(l, a));
            const [tx, ty, ox, oy] = l.dataset.direction === 'out' ? [x2, y2, x1, y1]
                                                                   : [x1, y1, x2, y2];
            const len = Math.hypot(ox - tx, oy - ty), ux = (ox - tx) / len, uy = (oy - ty) / len;
            const s = 6 * num(l, 'stroke-width'), bx = tx + ux * 0.9 * s, by = ty + uy * 0.9 * s;
            const tri = [[tx - ux * 0.1 * s, ty - uy * 0.1 * s], [bx - uy * s / 2, by + ux * s / 2],
                         [bx + uy * s / 2, by - ux * s / 2]];
            for (let a = 0; a <= 8; a++) for (let c = 0; c <= 8 - a; c++) {
              const k = 8 - a - c;
              if (inBox(b, (tri[0][0] * a + tri[1][0] * c + tri[2][0] * k) / 8,
                        (tri[0][1] * a + tri[1][1] * c + tri[2][1] * k) / 8))
                problems.push(`${b.name} on the arrowhead of ${l.dataset.relation}`);
            }
            for (let k = 0; k <= 40; k++)
              if (inBox(b, x1 + (x2 - x1) * k / 40, y1 + (y2 - y1) * k / 40))
                problems.push(`${b.name} on the edge ${l.dataset.relation}`);
          }
        });
        return {labels: boxes.map(b => b.text), problems: [...new Set(problems)]}"""))


def error_text(driver: Browser) -> str:
    return str(driver.execute_script("""
        const e = document.getElementById('error'); return e.hidden ? '' : e.textContent"""))


def viewport(driver: Browser, width: int, height: int = 900) -> None:
    """A ``width`` x ``height`` viewport, as a device of that size shows it (a window is kept
    500 px wide at least, and has a frame)."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
    assert driver.execute_script("return window.innerWidth") == width


def layout(driver: Browser, width: int) -> dict[str, Any]:
    """At a ``width`` px viewport: how wide the page is, where the search button and the two
    columns are, and whether the button's right edge is the button (not clipped, not covered)."""
    viewport(driver, width)
    return dict(driver.execute_script("""
        window.scrollTo(0, 0);
        const box = id => document.getElementById(id).getBoundingClientRect();
        const b = box('search');
        const edge = document.elementFromPoint(b.right - 2, (b.top + b.bottom) / 2);
        return {scroll: document.documentElement.scrollWidth, inner: window.innerWidth,
                button: [b.left, b.right, b.width], edge: edge && edge.id,
                found: [box('found').left, box('found').bottom],
                side: [box('side').left, box('side').top]}"""))


def fits(driver: Browser, width: int) -> dict[str, Any]:
    got = layout(driver, width)
    assert got["scroll"] <= got["inner"] == width, got  # no sideways scrolling
    left, right, w = got["button"]
    assert w > 0 and left >= 0 and right <= width and got["edge"] == "search", got
    return got


def screenshot(driver: Browser, path: str, width: int = 1400) -> None:
    """The page at the top, in a ``width`` x 900 viewport."""
    viewport(driver, width)
    driver.execute_script("window.scrollTo(0, 0)")
    driver.save_screenshot(path)


@asynccontextmanager
async def open_browser() -> AsyncIterator[Browser]:
    driver = await asyncio.to_thread(browser)
    try:
        yield driver
    finally:
        await asyncio.to_thread(driver.quit)


def md(key: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {key}"),)


@needs_browser
async def test_search_cards_relations_history_and_feedback_in_a_browser(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    async with (running_server(tmp_path, embedder, clock, http_address="127.0.0.1:0") as srv,
                grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as ch):
        stub = pb_grpc.MemoryServiceStub(ch)
        ids = [(await stub.Store(pb.StoreRequest(tenant=T, content=c, importance=i))).memory.id
               for c, i in NOTES]
        alice, hotel, delays = ids[0], ids[1], ids[3]
        await stub.Relate(pb.RelateRequest(tenant=T, from_id=alice, to_id=hotel,
                                           relation="stays_at", weight=0.8))
        await stub.Relate(pb.RelateRequest(tenant=T, from_id=delays, to_id=alice,
                                           relation="may_delay", weight=0.4))
        for q in ("Alice's flight to Lisbon", "the Lisbon hotel", "Alice's flight to Lisbon"):
            await stub.Recall(pb.RecallRequest(tenant=T, query=q, limit=2))  # reinforced
        # One vote before the page opens, so that the history has an event to list.
        await stub.Feedback(pb.FeedbackRequest(tenant=T, id=alice, verdict=pb.VERDICT_HELPFUL))
        expected = (await stub.Recall(pb.RecallRequest(tenant=T, query=QUERY, limit=20,
                                                       no_reinforce=True))).results
        counts = {m.id: m.recall_count for m in (
            (await stub.List(pb.ListRequest(tenant=T, page_size=100))).memories)}
        assert alice in {r.memory.id for r in expected}
        zones = [pb.Zone.Name(r.found_in).removeprefix("ZONE_").lower() for r in expected]
        assert len(set(zones)) >= 2, zones  # the grouping has something to group

        async with open_browser() as driver:
            base = f"http://127.0.0.1:{srv.http_port}/explorer/?tenant={T}"
            await asyncio.to_thread(driver.get, base)
            await asyncio.to_thread(wait_for, driver, "stats", 1)
            assert driver.find_element("id", "tenant").text == T
            assert f"{len(NOTES)} memories" in driver.find_element("id", "overview").text
            # Before a search, the overview: the zones' counts (Stats) and the newest memories
            # (Recent, which reinforces nothing: the recall counts below say so).
            stats = await stub.Stats(pb.StatsRequest(tenant=T))
            newest = (await stub.Recent(pb.RecentRequest(tenant=T, page_size=10))).memories
            home = overview(driver)
            assert home["visible"] and home["newest"] == [m.id for m in newest]
            assert home["zones"] == {**{zone_name(z.zone): z.count for z in stats.zones},
                                     "archived": stats.archived}
            assert sum(home["zones"].values()) == len(NOTES)

            # Search: the Recall's results, grouped by zone in zone order, scores and terms.
            await asyncio.to_thread(search, driver, QUERY)
            shown = shown_results(driver)
            assert not overview(driver)["visible"]
            want = [(z, [r for r, rz in zip(expected, zones, strict=True) if rz == z])
                    for z in ZONES if z in zones]
            assert [s["zone"] for s in shown] == [z for z, _ in want]
            for section, (zone, results) in zip(shown, want, strict=True):
                assert [r["id"] for r in section["results"]] == [r.memory.id for r in results]
                for got, r in zip(section["results"], results, strict=True):
                    assert got["zone"] == zone
                    b = r.breakdown
                    assert got["score"] == pytest.approx(b.total, abs=1e-9)
                    assert got["terms"] == pytest.approx(
                        {"recall": b.recall, "freshness": b.freshness, "importance":
                         b.importance, "context": b.context, "total": b.total}, abs=1e-9)
                    assert f"{b.total:.3f}" in got["text"] and r.memory.content in got["text"]
            # ...and it reinforced nothing.
            now = {m.id: m.recall_count for m in (
                (await stub.List(pb.ListRequest(tenant=T, page_size=100))).memories)}
            assert now == counts

            # A card: facts, entities, the relation, the history.
            await asyncio.to_thread(open_card, driver,
                                    f"#results li.result[data-id='{alice}'] button.open")
            got = (await stub.Get(pb.GetRequest(tenant=T, id=alice))).memory
            card = shown_card(driver)
            assert card["visible"] and card["id"] == alice and card["content"] == got.content
            assert card["facts"]["zone"] == pb.Zone.Name(got.zone).removeprefix("ZONE_").lower()
            assert card["facts"]["importance"] == f"{got.importance:.3f}"
            # Its score is the resting one, told apart from the search's, which the list shows.
            assert card["facts"]["score"] == f"{got.score:.3f}"
            label = driver.find_element("css selector", "#card-facts dd[data-field='score']")
            assert "last write" in label.get_attribute("title")
            assert driver.execute_script("""return document.querySelector(
                '#card-facts dd[data-field="score"]').previousElementSibling.textContent""") == (
                "resting score I")
            assert "differ" in driver.find_element("id", "score-note").text
            item = driver.find_element("css selector", f"#results li[data-id='{alice}'] .score")
            assert item.text.startswith("score for this search ")
            assert "against the query" in item.get_attribute("title")
            assert card["facts"]["recall-count"] == str(got.recall_count)
            assert card["facts"]["created"].startswith(
                got.created_at.ToDatetime().strftime("%Y-%m-%d %H:%M:%S"))
            assert got.entities and card["entities"] == list(got.entities)
            assert "name:alice novak" in card["entities"]
            # Nearest first, then the heavier relation: each edge points the way it goes.
            assert card["neighbours"] == [hotel, delays]
            assert card["edges"] == [["stays_at", "out"], ["may_delay", "in"]]
            # Each edge's name whole, covering no node, arrowhead, edge or other name.
            assert edge_labels(driver) == {"labels": ["stays_at", "may_delay"], "problems": []}
            ledger = (await stub.Ledger(pb.LedgerRequest(tenant=T, memory_id=alice))).events
            assert card["history"] == ["feedback_helpful"] == [
                pb.ZoneEventKind.Name(e.kind).removeprefix("ZONE_EVENT_KIND_").lower()
                for e in ledger]
            assert "1 helpful · 0 not helpful" in card["votes"]

            # The graph walks: the neighbour's card, and back.
            await asyncio.to_thread(open_card, driver, f"#graph g.node[data-id='{hotel}'] circle")
            card = shown_card(driver)
            assert card["id"] == hotel and card["content"] == NOTES[1][0]
            assert card["neighbours"] == [alice] and card["edges"] == [["stays_at", "in"]]
            await asyncio.to_thread(open_card, driver, f"#graph g.node[data-id='{alice}'] circle")
            assert shown_card(driver)["id"] == alice

            # Each step was an entry of the page's history: Back walks them back within the page
            # (never loading it again), to the search, then to the page as it opened; Forward again.
            driver.execute_script("document.body.dataset.stayed = 'yes'")
            for was in (hotel, alice, None):
                await asyncio.to_thread(back, driver)
                assert address(driver).get("id") == was and address(driver)["q"] == QUERY
                card = shown_card(driver)
                assert card["visible"] == (was is not None) and card["id"] == was
            await asyncio.to_thread(back, driver)
            assert address(driver) == {"tenant": T, "hash": "0"}
            assert not driver.find_elements("css selector", "#results li.result")
            assert driver.find_element("id", "query").get_attribute("value") == ""
            await asyncio.to_thread(back, driver, True)
            assert [s["zone"] for s in shown_results(driver)] == [z for z, _ in want]
            assert driver.find_element("id", "query").get_attribute("value") == QUERY
            await asyncio.to_thread(back, driver, True)
            assert shown_card(driver)["id"] == alice and address(driver)["id"] == alice
            assert driver.execute_script("return document.body.dataset.stayed") == "yes"

            # A vote: the page says it landed, and the service has it.
            before = (await stub.Get(pb.GetRequest(tenant=T, id=alice))).memory.importance
            await asyncio.to_thread(after, driver, "votes",
                                    driver.find_element("id", "helpful").click)
            status = driver.find_element("id", "feedback-status")
            assert status.text.startswith("Recorded: helpful")
            voted = (await stub.Get(pb.GetRequest(tenant=T, id=alice))).memory
            assert voted.importance > before
            assert float(status.get_attribute("data-importance")) == pytest.approx(
                voted.importance, abs=1e-12)
            assert float(status.get_attribute("data-importance-before")) == pytest.approx(
                before, abs=1e-12)
            ledger = (await stub.Ledger(pb.LedgerRequest(tenant=T, memory_id=alice))).events
            assert [e.kind for e in ledger] == [pb.ZONE_EVENT_KIND_FEEDBACK_HELPFUL] * 2
            card = shown_card(driver)
            assert card["history"] == ["feedback_helpful"] * 2
            assert "2 helpful · 0 not helpful" in card["votes"]
            assert card["facts"]["importance"] == f"{voted.importance:.3f}"
            assert error_text(driver) == ""
            # Nothing the page did broke its CSP (no inline style or script, no other origin).
            console = [e["message"] for e in driver.get_log("browser")]
            assert not [m for m in console if "Content Security Policy" in m], console
            # ...and it found all it asked for: the icon too (/favicon.ico, public as the page).
            # (The one not_found is the page's question whether the key may write: an Update of
            # the nil UUID, which no memory has.)
            assert [m for m in console if "404" in m and "MemoryService/Update" not in m] == [], (
                console)
            with await asyncio.to_thread(urllib.request.urlopen,
                                         f"http://127.0.0.1:{srv.http_port}/favicon.ico") as icon:
                assert icon.status == 200 and icon.headers["content-type"] == "image/x-icon"
                assert icon.read()[:4] == b"\0\0\1\0"  # an icon file's header
            # From a phone's 360 px to a wide screen: no sideways scrolling, the search button
            # whole; one column (the card under the results) below 720 px, two above.
            for width in (360, 420, 721, 1024, 1400):
                got = await asyncio.to_thread(fits, driver, width)
                if width < 720:
                    assert got["side"][1] >= got["found"][1], got
                else:
                    assert got["side"][0] > got["found"][0], got
            if shot := os.environ.get("CELESTIAL_EXPLORER_SCREENSHOT"):
                await asyncio.to_thread(screenshot, driver, shot)
                narrow = Path(shot).with_stem(Path(shot).stem + "-narrow")
                await asyncio.to_thread(screenshot, driver, str(narrow), 420)

            # The search emptied: the overview again, whose newest memories open their cards.
            await asyncio.to_thread(clear_search, driver)
            assert overview(driver)["visible"] and "q" not in address(driver)
            assert not driver.find_elements("css selector", "#results li.result")
            await asyncio.to_thread(fits, driver, 360)  # the overview fits a phone too
            await asyncio.to_thread(viewport, driver, 1280)
            await asyncio.to_thread(open_card, driver,
                                    f"#newest li.recent[data-id='{delays}'] button.open")
            assert shown_card(driver)["id"] == delays

            # A tenant that holds nothing says so (a misspelt name, most often), not "0 memories".
            await asyncio.to_thread(driver.get, base + "x")
            await asyncio.to_thread(wait_for, driver, "stats", 1)
            said = f"tenant {T}x holds no memories — check the tenant name"
            assert driver.find_element("id", "overview").text == said
            assert overview(driver)["newest"] == [] and said in overview(driver)["note"][0]

            # A busier graph: a memory with six relations, long names among them.
            hub = (await stub.Store(pb.StoreRequest(tenant=T + "x", content="the hub"))).memory.id
            names = ["stays_at", "recommended_by_a_colleague", "may_delay", "part_of",
                     "happened_before", "same_city_as"]
            for k, name in enumerate(names):
                other = (await stub.Store(pb.StoreRequest(
                    tenant=T + "x", content=f"neighbour number {k} of the hub"))).memory.id
                ends = (hub, other) if k % 2 else (other, hub)
                await stub.Relate(pb.RelateRequest(tenant=T + "x", from_id=ends[0], to_id=ends[1],
                                                   relation=name, weight=(k + 1) / 7))
            await asyncio.to_thread(driver.get, base + f"x&id={hub}")
            await asyncio.to_thread(wait_for, driver, "cards", 1)
            got = edge_labels(driver)
            if shot := os.environ.get("CELESTIAL_EXPLORER_SCREENSHOT"):
                await asyncio.to_thread(screenshot, driver, shot.replace(".png", "-overview.png"))
            # (Where there is no room, a name on its background may cross another edge.)
            assert sorted(got["labels"]) == sorted(names), got
            assert [p for p in got["problems"] if " on the edge " not in p] == [], got

            # A memory that is not there: the error, as text.
            await asyncio.to_thread(driver.get, base + "&id=00000000-0000-4000-8000-000000000000")
            await asyncio.to_thread(wait_for, driver, "errors", 1)
            assert error_text(driver).startswith("Opening the memory failed: not_found:")


@needs_browser
async def test_the_key_comes_from_the_fragment_and_its_absence_is_shown(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    keys = tmp_path / "keys.json"
    read = create_key(keys, "a-read", "read", ["a"])[1]
    write = create_key(keys, "a-write", "write", ["a"])[1]
    async with (running_server(tmp_path / "data", embedder, clock, api_keys_file=keys,
                               http_address="127.0.0.1:0") as srv,
                grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as ch):
        stub = pb_grpc.MemoryServiceStub(ch)
        for content, importance in NOTES[:3]:
            await stub.Store(pb.StoreRequest(content=content, importance=importance),
                             metadata=md(write))
        page = f"http://127.0.0.1:{srv.http_port}/explorer/"
        # The icon is public, as the page's own files are: it holds no memory.
        with await asyncio.to_thread(urllib.request.urlopen,
                                     f"http://127.0.0.1:{srv.http_port}/favicon.ico") as icon:
            assert icon.status == 200
        async with open_browser() as driver:
            # No key: the page says so, in words, and shows nothing else.
            await asyncio.to_thread(driver.get, page + "?q=Lisbon")
            await asyncio.to_thread(wait_for, driver, "errors", 1)
            text = error_text(driver)
            assert "unauthenticated" in text and "#key=" in text, text
            assert driver.execute_script("return document.body.dataset.error") == (
                "unauthenticated")
            assert not driver.find_elements("css selector", "#results li.result")

            # A read key added to the address (the key's own tenant: no ?tenant): the page loads
            # again with it, and searches, but may not vote.
            driver.execute_script("document.body.dataset.before = 'key'")
            await asyncio.to_thread(driver.get, page + f"?q=Lisbon#key={read}")
            await asyncio.to_thread(wait_for, driver, "searches", 1)
            assert driver.execute_script("return document.body.dataset.before") is None
            assert "3 memories" in driver.find_element("id", "overview").text
            await asyncio.to_thread(wait_for, driver, "probes", 1)
            assert driver.find_element("id", "key-state").text == "with an API key · read only"
            found = driver.find_elements("css selector", "#results li.result")
            assert len(found) >= 2 and error_text(driver) == ""
            await asyncio.to_thread(open_card, driver, "#results li.result button.open")
            # The page asked (an Update of no memory, which changes nothing) and the key may
            # not write: no control to vote, edit, pin or delete, and a line that says why.
            assert tools(driver) == {"access": "read", "write": False, "vote": False,
                                     "readOnly": True}
            assert "read, not write" in driver.find_element("id", "read-only").text
            assert error_text(driver) == ""

            # A write key: the vote lands.
            await asyncio.to_thread(driver.get, page + f"?q=Lisbon&tenant=a#key={write}")
            await asyncio.to_thread(wait_for, driver, "searches", 1)
            first = driver.find_element("css selector", "#results li.result")
            mid = first.get_attribute("data-id")
            await asyncio.to_thread(wait_for, driver, "probes", 1)
            await asyncio.to_thread(open_card, driver, "#results li.result button.open")
            assert tools(driver) == {"access": "write", "write": True, "vote": True,
                                     "readOnly": False}
            assert driver.find_element("id", "key-state").text == "with an API key"
            await asyncio.to_thread(after, driver, "votes",
                                    driver.find_element("id", "not-helpful").click)
            assert error_text(driver) == ""
            ledger = await stub.Ledger(pb.LedgerRequest(memory_id=mid), metadata=md(read))
            assert [e.kind for e in ledger.events] == [pb.ZONE_EVENT_KIND_FEEDBACK_NOT_HELPFUL]
            # Back closes the card (the step before it) and keeps the key where it was, in the
            # fragment, with no load of the page.
            driver.execute_script("document.body.dataset.stayed = location.hash")
            await asyncio.to_thread(back, driver)
            assert not shown_card(driver)["visible"]
            assert address(driver) == {"q": "Lisbon", "tenant": "a",
                                       "hash": str(len(f"#key={write}"))}
            assert driver.execute_script(
                "return document.body.dataset.stayed === location.hash") is True
            assert driver.find_elements("css selector", "#results li.result")


def fill(driver: Browser, element_id: str, text: str) -> None:
    box = driver.find_element("id", element_id)
    box.clear()
    box.send_keys(text)


def click(driver: Browser, element_id: str) -> None:
    driver.find_element("id", element_id).click()


WORKS = "Alice Novak works at Acme Travel. She plans the Lisbon conference trips."
EDITED = "Alice Novak booked the flight to Lisbon for the conference on 14 May 2025, seat 3A"
BADGE = "The Lisbon conference badge number is 4711"


@needs_browser
async def test_a_write_key_edits_pins_and_deletes_and_the_lists_follow(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    keys = tmp_path / "keys.json"
    read = create_key(keys, "t-read", "read", [T])[1]
    write = create_key(keys, "t-write", "write", [T])[1]
    async with (running_server(tmp_path / "data", embedder, clock, api_keys_file=keys,
                               http_address="127.0.0.1:0") as srv,
                grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as ch):
        stub = pb_grpc.MemoryServiceStub(ch)
        w, r = md(write), md(read)
        alice = (await stub.Store(pb.StoreRequest(
            content=NOTES[0][0], importance=NOTES[0][1], tags=["trip"], session_id="s1",
            metadata={"source": "email", "booking": "TP-1234"}), metadata=w)).memory.id
        ids = [alice] + [(await stub.Store(pb.StoreRequest(content=c, importance=i),
                                           metadata=w)).memory.id for c, i in NOTES[1:]]
        hotel, delays = ids[1], ids[3]
        works = (await stub.Store(pb.StoreRequest(content=WORKS), metadata=w)).memory.id
        badge = (await stub.Store(pb.StoreRequest(content=BADGE, immutable=True),
                                  metadata=w)).memory.id
        await stub.Relate(pb.RelateRequest(from_id=alice, to_id=hotel, relation="stays_at",
                                           weight=0.8), metadata=w)
        await stub.Relate(pb.RelateRequest(from_id=delays, to_id=alice, relation="may_delay",
                                           weight=0.4), metadata=w)

        async def fresh() -> dict[str, float]:
            """This search's scores as the service answers them now (reinforcing nothing)."""
            res = await stub.Recall(pb.RecallRequest(query=QUERY, limit=20, no_reinforce=True),
                                    metadata=r)
            return {x.memory.id: x.breakdown.total for x in res.results}

        async with open_browser() as driver:
            page = f"http://127.0.0.1:{srv.http_port}/explorer/?tenant={T}"
            await asyncio.to_thread(driver.get, page + f"&q={quote(QUERY)}#key={write}")
            await asyncio.to_thread(wait_for, driver, "searches", 1)
            await asyncio.to_thread(wait_for, driver, "probes", 1)
            await asyncio.to_thread(open_card, driver,
                                    f"#results li.result[data-id='{alice}'] button.open")
            assert tools(driver) == {"access": "write", "write": True, "vote": True,
                                     "readOnly": False}

            # Every field of the memory on its card.
            got = (await stub.Get(pb.GetRequest(id=alice), metadata=r)).memory
            card, fields = shown_card(driver), card_fields(driver)
            assert fields["summary"] == ("" if got.summary == got.content else got.summary)
            assert fields["metadata"] == {"source": "email", "booking": "TP-1234"}
            assert card["facts"]["tags"] == "trip" and card["facts"]["session"] == "s1"
            assert card["facts"]["pinned"] == "no" and card["facts"]["immutable"] == "no"
            if got.HasField("next_move"):
                move = card["facts"]["next-move"]
                assert got.next_move.at.ToDatetime().strftime("%Y-%m-%d %H:%M:%S") in move, move
            else:
                assert card["facts"]["next-move"] == "none scheduled"
            assert fields["terms"] == pytest.approx(
                {"recall": got.breakdown.recall, "freshness": got.breakdown.freshness,
                 "importance": got.breakdown.importance, "context": got.breakdown.context,
                 "total": got.breakdown.total}, abs=1e-9)
            # The relations' weights, in words beside the graph.
            assert [(x["id"], x["relation"], x["weight"], x["direction"])
                    for x in fields["relations"]] == [(hotel, "stays_at", 0.8, "out"),
                                                      (delays, "may_delay", 0.4, "in")]
            assert "weight 0.80" in fields["relations"][0]["text"]
            assert "weight 0.40" in fields["relations"][1]["text"]
            # The resting score and this search's differ, and the card says so in text.
            listed = result_scores(driver)[alice]
            assert f"{listed:.3f}" != f"{got.score:.3f}"
            assert fields["differs"] == "yes"
            assert f"{listed:.3f}" in fields["note"] and f"{got.score:.3f}" in fields["note"]
            assert QUERY in fields["note"]

            # A vote: the list is read again, and shows the scores the service has now.
            before = result_scores(driver)
            await asyncio.to_thread(after, driver, "votes", lambda: click(driver, "helpful"))
            now = await fresh()
            assert result_scores(driver) == pytest.approx(now, abs=1e-9)
            assert now[alice] != pytest.approx(before[alice], abs=1e-9)

            # Edit: content, importance and tags; the card and the list show the new ones.
            await asyncio.to_thread(click, driver, "edit")
            assert not driver.find_element("id", "edit-form").get_attribute("hidden")
            await asyncio.to_thread(fill, driver, "edit-content", EDITED)
            await asyncio.to_thread(fill, driver, "edit-importance", "0.95")
            await asyncio.to_thread(fill, driver, "edit-tags", "trip, lisbon")
            await asyncio.to_thread(after, driver, "edits", lambda: click(driver, "edit-save"))
            got = (await stub.Get(pb.GetRequest(id=alice), metadata=r)).memory
            assert got.content == EDITED and got.importance == pytest.approx(0.95)
            assert list(got.tags) == ["trip", "lisbon"]
            assert dict(got.metadata) == {"source": "email", "booking": "TP-1234"}
            card = shown_card(driver)
            assert card["content"] == EDITED and card["facts"]["tags"] == "trip, lisbon"
            assert card_fields(driver)["status"].startswith(
                "Saved (content, importance, tags).")
            assert error_text(driver) == ""
            item = [x for sec in shown_results(driver) for x in sec["results"]
                    if x["id"] == alice]
            assert item and EDITED in item[0]["text"]
            assert result_scores(driver) == pytest.approx(await fresh(), abs=1e-9)

            # Pin and unpin.
            await asyncio.to_thread(after, driver, "edits", lambda: click(driver, "pin"))
            assert (await stub.Get(pb.GetRequest(id=alice), metadata=r)).memory.pinned
            card = shown_card(driver)
            assert card["facts"]["pinned"] == "yes" and card["facts"]["next-move"] == (
                "none: pinned")
            assert card_fields(driver)["pin"] == "Unpin"
            await asyncio.to_thread(after, driver, "edits", lambda: click(driver, "pin"))
            assert not (await stub.Get(pb.GetRequest(id=alice), metadata=r)).memory.pinned
            assert card_fields(driver)["pin"] == "Pin"
            assert shown_card(driver)["facts"]["pinned"] == "no"

            # Delete: asked twice; "Keep it" keeps it.
            await asyncio.to_thread(click, driver, "delete")
            await asyncio.to_thread(click, driver, "delete-no")
            assert driver.find_element("id", "delete-confirm").get_attribute("hidden")
            await asyncio.to_thread(click, driver, "delete")
            await asyncio.to_thread(after, driver, "deletes", lambda: click(driver, "delete-yes"))
            with pytest.raises(grpc.aio.AioRpcError) as gone:
                await stub.Get(pb.GetRequest(id=alice), metadata=r)
            assert gone.value.code() == grpc.StatusCode.NOT_FOUND
            assert not shown_card(driver)["visible"] and "id" not in address(driver)
            assert driver.find_element("id", "notice").text.startswith("Deleted for good:")
            assert alice not in result_scores(driver)
            assert result_scores(driver) == pytest.approx(await fresh(), abs=1e-9)
            assert error_text(driver) == ""
            # ...and the overview's newest memories and counts no longer hold it.
            await asyncio.to_thread(clear_search, driver)
            home = overview(driver)
            assert alice not in home["newest"] and sum(home["zones"].values()) == len(ids) + 1

            # The facts a memory states (triples), on its card.
            await asyncio.to_thread(driver.get, page + f"&id={works}#key={write}")
            await asyncio.to_thread(wait_for, driver, "cards", 1)
            got = (await stub.Get(pb.GetRequest(id=works), metadata=r)).memory
            assert got.triples
            assert card_fields(driver)["triples"] == [[t.subject, t.relation, t.object]
                                                      for t in got.triples]

            # An immutable memory: no edit or pin, and a refused delete said in words, the
            # controls kept (the page asks again whether the key may write, and it may).
            await asyncio.to_thread(driver.get, page + f"&id={badge}#key={write}")
            await asyncio.to_thread(wait_for, driver, "cards", 1)
            await asyncio.to_thread(wait_for, driver, "probes", 1)
            assert driver.find_element("id", "edit").get_attribute("disabled")
            assert driver.find_element("id", "pin").get_attribute("disabled")
            assert "Immutable" in driver.find_element("id", "write-note").text
            await asyncio.to_thread(click, driver, "delete")
            await asyncio.to_thread(after, driver, "errors", lambda: click(driver, "delete-yes"))
            assert error_text(driver).startswith("Deleting the memory failed: permission_denied:")
            assert "only an admin key deletes it" in error_text(driver)
            await asyncio.to_thread(wait_for, driver, "probes", 2)
            assert tools(driver)["access"] == "write" and tools(driver)["write"]
            assert (await stub.Get(pb.GetRequest(id=badge), metadata=r)).memory.immutable
            console = [e["message"] for e in driver.get_log("browser")]
            assert not [m for m in console if "Content Security Policy" in m], console


@needs_browser
async def test_a_card_says_what_the_turn_policy_did_and_why(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    # Without exploration: each decision is the policy's best, never one drawn at random.
    async with running_server(tmp_path, embedder, clock, http_address="127.0.0.1:0",
                              policy_exploration=0.0) as srv:

        def observe() -> tuple[Any, Any]:
            with CelestialClient(f"127.0.0.1:{srv.port}", tenant=T) as client:
                return (client.observe("Hi there!", session_id="s1"),
                        client.observe("I moved to Lisbon in May 2023 with my sister Ana.",
                                       session_id="s1", previous=["Hi there!"]))

        hi, fact = await asyncio.to_thread(observe)
        assert hi.action == "SKIP" and hi.memory is not None and hi.memory.archived
        assert fact.action == "SAVE" and fact.memory is not None and not fact.memory.archived
        async with (grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as ch,
                    open_browser() as driver):
            stub = pb_grpc.MemoryServiceStub(ch)
            base = f"http://127.0.0.1:{srv.http_port}/explorer/?tenant={T}"
            for seen, action, said in ((hi, "SKIP", "skipped"), (fact, "SAVE", "kept")):
                memory = seen.memory
                why = memory.metadata["policy_why"]
                t = seen.decision.trace
                assert why == (t.rule or t.keep_by or f"bandit p={t.probability:.2f}")
                await asyncio.to_thread(driver.get, base + f"&id={memory.id}")
                await asyncio.to_thread(wait_for, driver, "cards", 1)
                card = shown_card(driver)
                assert card["id"] == memory.id and card["content"] == memory.content
                assert card["facts"]["policy"] == f"{said} by the turn policy: {action} — {why}"
                line = driver.find_element("css selector", "#card-facts dd[data-field='policy']")
                assert line.get_attribute("data-action") == action
                assert line.get_attribute("data-why") == why
                assert line.get_attribute("data-decision") == str(seen.decision.id)
                ledger = (await stub.Ledger(pb.LedgerRequest(tenant=T,
                                                             memory_id=memory.id))).events
                kinds = [pb.ZoneEventKind.Name(e.kind).removeprefix("ZONE_EVENT_KIND_").lower()
                         for e in ledger]
                assert card["history"] == kinds
                texts = driver.execute_script("""return [...document.querySelectorAll(
                    '#history li.event')].map(e => e.textContent)""")
                if action == "SKIP":
                    assert kinds == ["skipped"]
                    assert "skipped by the turn policy (archived)" in texts[0], texts
                else:
                    assert "skipped" not in kinds
                assert error_text(driver) == ""
            # A memory stored without the turn policy has no such line.
            plain = (await stub.Store(pb.StoreRequest(tenant=T, content=NOTES[4][0]))).memory
            await asyncio.to_thread(driver.get, base + f"&id={plain.id}")
            await asyncio.to_thread(wait_for, driver, "cards", 1)
            card = shown_card(driver)
            assert card["id"] == plain.id and "policy" not in card["facts"]
            console = [e["message"] for e in driver.get_log("browser")]
            assert not [m for m in console if "Content Security Policy" in m], console


def voting(driver: Browser) -> dict[str, Any]:
    """Whether the card's vote buttons take a click, and the line under them (its kind and text)."""
    return dict(driver.execute_script("""
        const on = id => !document.getElementById(id).disabled;
        const note = document.getElementById('vote-note');
        return {helpful: on('helpful'), notHelpful: on('not-helpful'),
                kind: note.dataset.votes || '', note: note.hidden ? '' : note.textContent}"""))


DAY = 86_400.0


@needs_browser
async def test_a_turn_the_policy_kept_out_takes_a_vote_and_other_archived_memories_do_not(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    """The server takes a vote on an archived memory only when the turn policy kept it out of
    the zones (archived as it was written, never restored): the page enables the buttons for
    such a turn and shows what the vote did, and keeps them disabled, saying why, on any other
    archived memory (one the rebalance forgot; the same turn once restored and forgotten)."""
    async with running_server(tmp_path, embedder, clock, http_address="127.0.0.1:0",
                              policy_exploration=0.0) as srv:

        def observe() -> Any:
            with CelestialClient(f"127.0.0.1:{srv.port}", tenant=T) as client:
                return client.observe("Hi there!", session_id="s1")

        hi = await asyncio.to_thread(observe)
        assert hi.action == "SKIP" and hi.memory is not None and hi.memory.archived
        turn = hi.memory.id
        async with (grpc.aio.insecure_channel(f"127.0.0.1:{srv.port}") as ch,
                    open_browser() as driver):
            stub = pb_grpc.MemoryServiceStub(ch)
            base = f"http://127.0.0.1:{srv.http_port}/explorer/?tenant={T}"
            await asyncio.to_thread(driver.get, base + f"&id={turn}")
            await asyncio.to_thread(wait_for, driver, "cards", 1)
            await asyncio.to_thread(wait_for, driver, "probes", 1)
            assert tools(driver)["vote"]
            got = voting(driver)
            assert (got["helpful"], got["notHelpful"], got["kind"]) == (True, True, "kept-out")
            assert "Kept out of the zones by the turn policy" in got["note"], got

            # A vote lands: its importance moves, it stays archived, and the card says so.
            before = (await stub.Get(pb.GetRequest(tenant=T, id=turn))).memory
            clock.advance(60)  # the ledger reads events of one time in id order: after the skip
            await asyncio.to_thread(after, driver, "votes", lambda: click(driver, "helpful"))
            voted = (await stub.Get(pb.GetRequest(tenant=T, id=turn))).memory
            assert voted.archived and voted.importance > before.importance
            status = driver.find_element("id", "feedback-status")
            assert status.text.startswith("Recorded: helpful. Importance "), status.text
            assert "still in the archive" in status.text, status.text
            assert float(status.get_attribute("data-importance")) == pytest.approx(
                voted.importance, abs=1e-12)
            assert float(status.get_attribute("data-importance-before")) == pytest.approx(
                before.importance, abs=1e-12)
            card = shown_card(driver)
            assert card["facts"]["importance"] == f"{voted.importance:.3f}"
            assert card["history"] == ["skipped", "feedback_helpful"]
            assert "1 helpful · 0 not helpful" in card["votes"]
            assert voting(driver)["helpful"] and voting(driver)["kind"] == "kept-out"
            assert error_text(driver) == ""

            # Other archived memories: a plain one the rebalance forgot, and the same turn once
            # restored (it is no longer what the policy kept out) and forgotten again.
            plain = (await stub.Store(pb.StoreRequest(tenant=T, content=NOTES[6][0],
                                                      importance=0.0))).memory.id
            await stub.Restore(pb.RestoreRequest(tenant=T, id=turn))
            await stub.Update(pb.UpdateRequest(tenant=T, id=turn, importance=0.0))
            clock.advance(91 * DAY)
            await stub.Rebalance(pb.RebalanceRequest(tenant=T))
            for mid in (plain, turn):
                m = (await stub.Get(pb.GetRequest(tenant=T, id=mid))).memory
                assert m.archived and m.archived_at != m.created_at
                await asyncio.to_thread(driver.get, base + f"&id={mid}")
                await asyncio.to_thread(wait_for, driver, "cards", 1)
                await asyncio.to_thread(wait_for, driver, "probes", 1)
                assert tools(driver)["vote"] and shown_card(driver)["id"] == mid
                got = voting(driver)
                assert (got["helpful"], got["notHelpful"], got["kind"]) == (False, False,
                                                                            "refused")
                assert got["note"].startswith("Archived: restore it"), got
            assert "policy" in card_fields(driver)["metadata"]  # the turn, with its decision
            # The server agrees: such a memory is refused a vote.
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.Feedback(pb.FeedbackRequest(tenant=T, id=turn,
                                                       verdict=pb.VERDICT_HELPFUL))
            assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert error_text(driver) == ""
            console = [e["message"] for e in driver.get_log("browser")]
            assert not [m for m in console if "Content Security Policy" in m], console


def _run(*cmd: str, timeout: float) -> str:
    out = subprocess.run(cmd, cwd=PACKAGE, capture_output=True, text=True, timeout=timeout,
                         check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


@pytest.mark.skipif(not NODE, reason="node is not installed")
def test_the_checked_in_bundle_is_what_build_explorer_makes(tmp_path: Path) -> None:
    deps = json.loads((PACKAGE / "package.json").read_text())["devDependencies"]
    if not all((PACKAGE / "node_modules" / name / "package.json").exists() for name in deps):
        _run("npm", "ci", "--no-audit", "--no-fund", timeout=300)
    fresh = tmp_path / "explorer.js"
    _run("npm", "run", "build:explorer", "--", "--outfile", str(fresh), timeout=180)
    assert fresh.read_bytes() == BUNDLE.read_bytes(), (
        "run `npm run build:explorer` in client/typescript")
