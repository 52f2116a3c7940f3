"""A headless Chromium for the suite's page tests (Debian's chromium and chromedriver, driven by
Selenium): where to find them, and one way to start it. Tests skip where either is missing."""

from __future__ import annotations

import shutil
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
MISSING = "no chromium and chromedriver installed here"


def headless(width: int, height: int, console: bool = False) -> Any:
    """A started browser with a ``width`` x ``height`` window; with ``console``, the page's
    console messages (CSP reports among them) can be read with ``get_log("browser")``."""
    from selenium import webdriver

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM or "chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", f"--window-size={width},{height}"):
        opts.add_argument(flag)
    if console:
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=opts, service=webdriver.ChromeService(CHROMEDRIVER))
