"""JupyterLab in a real browser (`make test-browser`): `make lab` serves the repo; headless chromium,
driven by Selenium through Debian's chromium-driver, opens each paper notebook (parameterised for
the smoke results, interactive=True), runs all cells, checks no cell shows an error, moves the first
explorer slider that can move, and checks the explorer's output changed. One screenshot per notebook
under results/browser/.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import REPO, WORKFLOW_ENV, headless_chromium

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not os.environ.get("REPRO_BROWSER"), reason="run by `make test-browser`")]
PAPERS = sorted(p.parent.name for p in (REPO / "papers").glob("*/rules.smk"))
OUT = REPO / "results" / "browser"
TOKEN = "browser-test"
RUN_TIMEOUT = 240     # s for "run all cells" at smoke
CHANGE_TIMEOUT = 90   # s for the explorer to redraw after the slider moved


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab():
    """`make lab` on a free port, with the app object exposed to the page (window.jupyterapp)."""
    port = free_port()
    proc = subprocess.Popen(["make", "lab", f"LAB_PORT={port}", f"LAB_TOKEN={TOKEN}",
                             "LAB_ARGS=--LabApp.expose_app_in_browser=True"], cwd=REPO, env=WORKFLOW_ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/kernelspecs?token={TOKEN}", timeout=2)
                break
            except OSError:
                assert proc.poll() is None, "make lab exited"
                time.sleep(1)
        else:
            pytest.fail("jupyter lab did not answer within 120 s")
        yield f"http://127.0.0.1:{port}"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)


@pytest.fixture(scope="module")
def driver():
    d = headless_chromium("1400,1200")
    d.set_script_timeout(30)
    yield d
    d.quit()


def prepared_notebook(paper: str, smoke: Path) -> Path:
    """The paper notebook with papermill's parameters injected (smoke results, interactive), not run."""
    OUT.mkdir(parents=True, exist_ok=True)
    out = OUT / f"{paper}.ipynb"
    subprocess.run([sys.executable, "-m", "papermill", "--prepare-only", str(REPO / "papers" / paper / f"{paper}.ipynb"),
                    str(out), "-p", "profile", "smoke", "-p", "results_dir", str(smoke / paper),
                    "-p", "claims_path", str(REPO / "papers" / paper / "claims.yaml"), "-p", "interactive", "True"],
                   check=True, capture_output=True)
    return out


# JavaScript against JupyterLab's app (window.jupyterapp): the open notebook panel and its cells.
PANEL = "const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
STATE = PANEL + """
if (!w || !w.content || !w.sessionContext) return null;
const k = w.sessionContext.session && w.sessionContext.session.kernel;
const cells = w.content.widgets.filter(c => c.model.type === 'code');
return {path: w.context.path, kernel: k ? k.status : null,
        unrun: cells.filter(c => c.model.executionCount === null).length,
        errors: cells.filter(c => c.model.outputs.toJSON().some(o => o.output_type === 'error'))
                     .map(c => c.model.id + ': ' + JSON.stringify(c.model.outputs.toJSON()
                          .filter(o => o.output_type === 'error').map(o => o.ename + ': ' + o.evalue))),
        explorer: w.content.widgets.findIndex(c => (c.model.getMetadata('tags') || []).includes('explorer'))};
"""
EXPLORER_NODE = PANEL + "return w.content.widgets[arguments[0]].node;"


def wait_for(driver, predicate, timeout, what):
    deadline, state = time.time() + timeout, None
    while time.time() < deadline:
        state = driver.execute_script(STATE)
        if state and predicate(state):
            return state
        time.sleep(0.5)
    pytest.fail(f"{what} within {timeout} s; last state {json.dumps(state)}")


def explorer_output(node) -> str:
    """What the explorer shows: its widget output areas (text and image data), not the controls."""
    from selenium.webdriver.common.by import By

    areas = node.find_elements(By.CSS_SELECTOR, ".widget-output")
    return "".join(a.get_attribute("innerHTML") for a in areas)


def move_a_slider(driver, node) -> str:
    """Drag the first slider whose value moves (a slider whose range is one value cannot); returns
    the moved slider's description and readout."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    for slider in node.find_elements(By.CSS_SELECTOR, ".widget-slider"):
        readout = slider.find_element(By.CSS_SELECTOR, ".widget-readout")
        before = readout.text
        handle = slider.find_element(By.CSS_SELECTOR, ".noUi-handle")
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", slider)
        ActionChains(driver).click_and_hold(handle).move_by_offset(60, 0).release().perform()
        time.sleep(0.5)
        if readout.text == before:   # a drag that did not take: the keyboard
            handle.send_keys(Keys.ARROW_RIGHT, Keys.ARROW_RIGHT)
            time.sleep(0.5)
        if readout.text != before:
            label = slider.find_element(By.CSS_SELECTOR, ".widget-label").text
            return f"{label} {before} -> {readout.text}"
    pytest.fail("no explorer slider could be moved")


@pytest.mark.parametrize("paper", PAPERS)
def test_notebook_runs_and_explorer_responds(paper, lab, driver):
    from selenium.webdriver.common.by import By

    smoke = Path(os.environ.get("REPRO_SMOKE_RESULTS", REPO / "results")) / "smoke"
    assert (smoke / paper / "metrics.json").is_file(), f"no smoke results under {smoke / paper} (make smoke)"
    nb = prepared_notebook(paper, smoke)
    start = time.monotonic()
    driver.get(f"{lab}/lab/tree/{nb.relative_to(REPO)}?token={TOKEN}&reset")
    wait_for(driver, lambda s: s["path"] == str(nb.relative_to(REPO)) and s["kernel"] == "idle", 120,
             f"{paper}: the notebook did not open with an idle kernel")
    driver.execute_script(PANEL + "return window.jupyterapp.commands.execute('notebook:run-all-cells');")
    time.sleep(2)
    state = wait_for(driver, lambda s: s["unrun"] == 0 and s["kernel"] == "idle", RUN_TIMEOUT,
                     f"{paper}: run all cells did not finish")
    assert not state["errors"], f"{paper}: cells show errors: {state['errors']}"
    assert state["explorer"] >= 0, f"{paper}: no cell tagged explorer"
    node = driver.execute_script(EXPLORER_NODE, state["explorer"])
    before = explorer_output(node)
    assert before, f"{paper}: the explorer shows no output"
    moved = move_a_slider(driver, node)
    deadline = time.time() + CHANGE_TIMEOUT
    while time.time() < deadline and (explorer_output(node) in (before, "")
                                      or driver.execute_script(STATE)["kernel"] != "idle"):
        time.sleep(0.5)
    after = explorer_output(node)
    for button in driver.find_elements(By.XPATH, "//button[normalize-space()='No']"):   # the news prompt
        button.click()
    driver.execute_script("(arguments[0].querySelector('.jp-Cell-outputWrapper') || arguments[0])"
                          ".scrollIntoView({block: 'start'});", node)
    time.sleep(0.5)
    driver.save_screenshot(str(OUT / f"{paper}.png"))
    assert after != before, f"{paper}: the explorer output did not change after moving {moved}"
    state = driver.execute_script(STATE)
    assert not state["errors"], f"{paper}: cells show errors after the slider moved: {state['errors']}"
    assert "Traceback" not in after, f"{paper}: the explorer raised after moving {moved}"
    print(f"{paper}: ran and redrew in {time.monotonic() - start:.0f} s ({moved}); {OUT / f'{paper}.png'}")
