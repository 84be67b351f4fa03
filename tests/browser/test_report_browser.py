"""The workflow's HTML report (`make report`, snakemake --report) in a real browser (`make test-browser`):
headless chromium opens <smoke results>/smoke/report.html, and every section (the ledger, the overview,
each paper: its notebook, its headline claims and its main figure) lists its pages, each of which
renders: a notebook or the ledger as a page with text, a figure as a loaded image. A screenshot of the first screen and one per section under results/browser/.
"""
import os
import time
from pathlib import Path

import pytest

from conftest import REPO, headless_chromium

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not os.environ.get("REPRO_BROWSER"), reason="run by `make test-browser`")]
PAPERS = sorted(p.parent.name for p in (REPO / "papers").glob("*/rules.smk"))
SECTIONS = ["Ledger", "Overview", *PAPERS, "kernels"]
OUT = REPO / "results" / "browser"
WAIT = 30   # s for the report's app to draw a view


@pytest.fixture(scope="module")
def report() -> Path:
    path = Path(os.environ.get("REPRO_SMOKE_RESULTS", REPO / "results")) / "smoke" / "report.html"
    if not path.is_file():
        pytest.fail(f"no report at {path}: `make report PROFILE=smoke` writes it (make test-browser does)")
    return path


@pytest.fixture(scope="module")
def driver():
    d = headless_chromium("1400,1000", "--disable-background-networking")
    yield d
    d.quit()


def wait_for(condition, what: str, timeout: float = WAIT):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.25)
    pytest.fail(f"report: {what} not shown within {timeout} s")


def nav_item(driver, text: str):
    from selenium.webdriver.common.by import By

    found = driver.find_elements(By.XPATH, f"//nav//*[normalize-space(text())='{text}']")
    return found[0] if found else None


def open_report(driver, report: Path):
    driver.get(report.as_uri())
    wait_for(lambda: nav_item(driver, "Ledger"), "the Results menu")


def test_report_first_screen_lists_every_section(driver, report):
    from selenium.webdriver.common.by import By

    open_report(driver, report)
    OUT.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(OUT / "report.png"))
    nav = driver.find_element(By.TAG_NAME, "nav").text
    missing = [s for s in SECTIONS if s not in nav.splitlines()]
    assert not missing, f"sections missing from the report's menu: {missing}\n{nav}"
    assert "Reproductions of five ICML 2024 papers" in driver.find_element(By.TAG_NAME, "body").text


@pytest.mark.parametrize("section", SECTIONS)
def test_report_section_renders(driver, report, section):
    from selenium.webdriver.common.by import By

    open_report(driver, report)
    nav_item(driver, section).click()
    rows = wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, "nav table tbody tr"), f"the pages of {section}")
    pages = [row.text for row in rows]
    if section in PAPERS:
        assert any("executed notebook" in p for p in pages), pages
        assert any("headline: claims and floors" in p for p in pages), pages
    for i, page in enumerate(pages):
        # each row: the page's label, its view button (the eye), then its info button
        driver.find_elements(By.CSS_SELECTOR, "nav table tbody tr")[i].find_elements(By.TAG_NAME, "a")[0].click()
        shown = wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, "iframe, div.p-3 img"), f"{section}: {page}")[0]
        if shown.tag_name == "img":
            wait_for(lambda: driver.execute_script("return arguments[0].complete && arguments[0].naturalWidth", shown),
                     f"{section}: the image of {page}")
        else:
            driver.switch_to.frame(shown)
            text = wait_for(lambda: driver.find_element(By.TAG_NAME, "body").text.strip(), f"{section}: {page} text")
            driver.switch_to.default_content()
            assert "Traceback" not in text and len(text) > 100, f"{section}: {page}: {text[:300]}"
    driver.save_screenshot(str(OUT / f"report_{section}.png"))
