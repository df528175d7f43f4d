"""A real cluster (as in tests/cluster, on SQLite) and a real headless Chromium driving the UI.

The browser is Debian's ``chromium`` with ``chromium-driver`` (``scripts/setup`` installs
both); Selenium is given their paths, so nothing is downloaded at run time.
"""

from __future__ import annotations

import base64
import os

import pytest

from tests.cluster.conftest import cluster  # noqa: F401  (same fixture, logs on failure; the report hook is tests/shared_cluster.py's)
from tests.cli.test_local_run import ROOT

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SCREENSHOTS = os.path.join(ROOT, "test-output", "ui")


@pytest.fixture
def store_url(tmp_path):
    # The UI reads only the REST API, whose store paths are tested on both backends elsewhere.
    return f"sqlite:///{tmp_path}/state.db"


@pytest.fixture
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    for path in (CHROMIUM, CHROMEDRIVER):
        assert os.path.exists(path), f"{path} is missing: run scripts/setup (Debian chromium and chromium-driver)"
    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1100", "--lang=en-US"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


@pytest.fixture
def screenshot(browser):
    """``screenshot(name)`` saves the whole page (not only the window) as test-output/ui/NAME.png."""
    os.makedirs(SCREENSHOTS, exist_ok=True)

    def save(name: str) -> str:
        width, height = browser.execute_script(
            "return [document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
        shot = browser.execute_cdp_cmd("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}})
        path = os.path.join(SCREENSHOTS, f"{name}.png")
        with open(path, "wb") as handle:
            handle.write(base64.b64decode(shot["data"]))
        return path

    return save
