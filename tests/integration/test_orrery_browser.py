"""The orrery in a real headless browser (Debian's chromium, driven by Selenium through
chromedriver) against a live server: the dots per zone match Stats, and a rebalance moves them.
Skipped where no browser is installed (``.ci/run`` installs one where it can). With
``CELESTIAL_ORRERY_SCREENSHOT=path`` the run saves a screenshot there."""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from celestial_memory.clock import ManualClock
from celestial_memory.domain.requests import NewMemory, RecallQuery
from celestial_memory.encoding.embedding import SentenceTransformerEmbedder

from tests.browser import CHROMEDRIVER, CHROMIUM, MISSING, headless
from tests.integration.conftest import running_server

webdriver = pytest.importorskip("selenium.webdriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason=MISSING)
T = "orrery"
WORDS = ("Alice's espresso order", "the deploy key rotation", "Bob's flight to Lisbon",
         "the quarterly budget review", "Carol's cello recital", "the office wifi password",
         "Dana's dog Biscuit", "the Frankfurt server migration", "Eve's standup at 9:30",
         "the garden roses in June")


def dots_per_zone(driver: Any) -> Counter[str]:
    return Counter(driver.execute_script(
        "return [...document.querySelectorAll('#dots circle.dot')].map(c => c.dataset.zone)"))


def wait_for(driver: Any, loads: int, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if int(driver.execute_script("return document.body.dataset.loaded || 0")) >= loads:
            return
        time.sleep(0.1)
    raise AssertionError(f"the page did not load {loads} times: "
                         + driver.execute_script("return document.body.innerText"))


def _drive(port: int, svc: Any, clock: ManualClock) -> None:
    driver = headless(1200, 900)
    try:
        driver.get(f"http://127.0.0.1:{port}/orrery?tenant={T}&every=500")
        wait_for(driver, 1)
        stats = svc.stats(T)
        expected = {z.zone.name.lower(): z.count for z in stats.zones if z.count}
        assert dots_per_zone(driver) == expected
        assert driver.find_elements("css selector", "#dots circle.dot.pinned")
        assert "archived (not drawn)" in driver.find_element("id", "status").text
        assert not driver.find_element("id", "sampled").is_displayed()
        # Hover shows the content and the breakdown, as text.
        dot = driver.find_element("css selector", "#dots circle.dot")
        webdriver.ActionChains(driver).move_to_element(dot).perform()
        detail = driver.find_element("id", "detail").text
        assert "F (freshness)" in detail and any(w in detail for w in WORDS)
        if shot := os.environ.get("CELESTIAL_ORRERY_SCREENSHOT"):
            driver.save_screenshot(shot)
        # Time passes and a rebalance moves memories outward: the page follows.
        loads = int(driver.execute_script("return document.body.dataset.loaded"))
        clock.advance(30 * 86_400)
        report = svc.rebalance(T)
        assert sum(report.moved.values()) > 0
        wait_for(driver, loads + 2)
        after = {z.zone.name.lower(): z.count for z in svc.stats(T).zones if z.count}
        assert after != expected and dots_per_zone(driver) == after
    finally:
        driver.quit()


async def test_the_orrery_draws_the_zones_and_follows_a_rebalance(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, clock: ManualClock
) -> None:
    async with running_server(tmp_path, embedder, clock, metrics_address="127.0.0.1:0") as srv:
        svc = srv.service
        items = [NewMemory(f"{w} (note {i})", importance=((i * 7) % 10) / 10,
                           pinned=i == 0) for i, w in enumerate(WORDS * 3)]
        stored = await asyncio.to_thread(svc.store_batch, T, items)
        for q in ("espresso", "deploy key", "Lisbon flight", "budget"):  # some recalled often
            for _ in range(3):
                await asyncio.to_thread(svc.recall, T, RecallQuery(q, limit=3))
        assert len(stored.memories) == 30
        assert srv.ops is not None
        await asyncio.to_thread(_drive, srv.ops.port, svc, clock)
