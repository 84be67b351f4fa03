"""The top README as a reader first sees it (`make test-browser`): rendered to HTML (mistune, GitHub-style
tables), opened in headless chromium at a laptop's window, its first screen must show the two commands and
the per-paper verdicts table with a row for every paper. A screenshot under results/browser/readme.png."""
import os

import pytest

from conftest import REPO, headless_chromium

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not os.environ.get("REPRO_BROWSER"), reason="run by `make test-browser`")]
PAPERS = sorted(p.parent.name for p in (REPO / "papers").glob("*/rules.smk"))
OUT = REPO / "results" / "browser"
WINDOW = (1400, 1000)


def test_readme_first_screen_answers_what_reproduced(tmp_path):
    import mistune
    from selenium.webdriver.common.by import By

    body = mistune.create_markdown(escape=False, plugins=["table"])((REPO / "README.md").read_text())
    page = tmp_path / "README.html"
    page.write_text("<html><head><meta charset='utf-8'><style>body{font-family:sans-serif;max-width:1200px;"
                    "margin:auto;font-size:14px} table{border-collapse:collapse} td,th{border:1px solid #ccc;"
                    "padding:2px 6px}</style></head><body>" + body + "</body></html>")
    driver = headless_chromium(f"{WINDOW[0]},{WINDOW[1]}")
    try:
        driver.get(page.as_uri())
        height = driver.execute_script("return window.innerHeight")
        code = [e for e in driver.find_elements(By.TAG_NAME, "pre") if "make reproduce" in e.text]
        assert code and code[0].location["y"] < height, "the commands are not on the first screen"
        table = next(t for t in driver.find_elements(By.TAG_NAME, "table") if "INCONCLUSIVE" in t.text)
        rows = {r.find_elements(By.TAG_NAME, "td")[0].text for r in table.find_elements(By.TAG_NAME, "tr")[1:]}
        assert set(PAPERS) <= rows, rows
        assert table.location["y"] < height, "the verdicts table starts below the first screen"
        OUT.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(OUT / "readme.png"))
    finally:
        driver.quit()
