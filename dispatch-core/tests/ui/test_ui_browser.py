"""``dispatch ui`` in a real browser: Debian's headless Chromium, driven by selenium
through /usr/bin/chromedriver, on a record a supervisor made (SQLite, the simulated
scheduler). The list, a filter, a job page's timeline, the summary, the in-place refresh,
and names and scheduler words that are HTML shown as text with no script run. Each page's
screenshot is saved (DISPATCH_TEST_ARTIFACTS, else the test's temporary directory).

Chromium is installed by scripts/setup.sh; without it these tests fail, saying so."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dispatch.ui.server import UI
from dispatch_testing.simulated.scheduler import succeed
from ui.ui_record import IMG_NAME, REASON, SCRIPT_NAME, Record, serve

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
#: a page, a refresh: generous, the machine is shared
WAIT = 60.0


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if missing:
        pytest.fail(
            f"{', '.join(missing)} missing: the browser tests need Debian's chromium and "
            "chromium-driver (scripts/setup.sh installs them as root)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1400,1000",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(WAIT)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    where = Path(os.environ.get("DISPATCH_TEST_ARTIFACTS") or tmp_path) / "ui-screenshots"
    where.mkdir(parents=True, exist_ok=True)
    return where


def screenshot(driver: Any, where: Path, name: str) -> None:
    path = where / f"{name}.png"
    assert driver.save_screenshot(str(path)), f"no screenshot of {name}"
    assert path.stat().st_size > 1000


def no_alert(driver: Any) -> None:
    from selenium.common.exceptions import NoAlertPresentException

    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text  # noqa: B018 (asking is the check)


def wait_until(driver: Any, condition: Any) -> Any:
    """``condition(driver)`` once true, asked again until ``WAIT``; an element the page's
    refresh replaced while it was read (stale) is asked again too."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    ignored = (NoSuchElementException, StaleElementReferenceException)
    wait = WebDriverWait(driver, WAIT, poll_frequency=0.2, ignored_exceptions=ignored)
    return wait.until(condition)


def names(driver: Any) -> list[str]:
    from selenium.webdriver.common.by import By

    rows = driver.find_elements(By.CSS_SELECTOR, "#jobs tbody tr[data-job]")
    return [r.find_elements(By.TAG_NAME, "td")[1].text for r in rows]


def test_the_list_shows_html_names_as_text_and_runs_no_script(
    record: Record, browser: Any, shots: Path
) -> None:
    with serve(UI(record.client, clock=record.sched.now)) as base:
        browser.get(base + "/")
        newest_first = [IMG_NAME, SCRIPT_NAME, "running", "held", "recovered"]
        wait_until(browser, lambda d: names(d) == newest_first)
        no_alert(browser)
        # the only script is the server's file; the names made no element
        scripts = browser.execute_script(
            "return Array.from(document.scripts).map(s => s.getAttribute('src'))"
        )
        assert scripts == ["/static/ui.js"]
        assert browser.execute_script("return document.querySelectorAll('main img').length") == 0
        screenshot(browser, shots, "list")


def test_the_filter_form_narrows_the_list(record: Record, browser: Any, shots: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    with serve(UI(record.client, clock=record.sched.now)) as base:
        browser.get(base + "/")
        wait_until(browser, lambda d: len(names(d)) == 5)
        Select(browser.find_element(By.NAME, "state")).select_by_value("held")
        browser.find_element(By.CSS_SELECTOR, "#filters button").click()
        wait_until(browser, lambda d: "state=held" in d.current_url)
        wait_until(browser, lambda d: sorted(names(d)) == sorted(["held", IMG_NAME]))
        screenshot(browser, shots, "list-held")


def test_a_job_page_draws_one_mark_per_execution_and_the_words_as_text(
    record: Record, browser: Any, shots: Path
) -> None:
    from selenium.webdriver.common.by import By

    job_id = record.jobs["recovered"]
    with serve(UI(record.client, clock=record.sched.now)) as base:
        browser.get(f"{base}/jobs/{job_id}")
        wait_until(browser, lambda d: d.find_elements(By.ID, "timeline"))
        bars = browser.find_elements(By.CSS_SELECTOR, "#timeline g.execution")
        assert [b.get_attribute("data-cause") for b in bars] == ["preempted", "preempted", "none"]
        assert len(browser.find_elements(By.CSS_SELECTOR, "#timeline rect")) == 3
        words = browser.find_elements(By.CSS_SELECTOR, "#attempts td.words")
        assert [w.text for w in words] == [
            "Preempted by a higher priority job",
            REASON,
            "COMPLETED",
        ]
        assert browser.find_elements(By.CSS_SELECTOR, "#attempts b") == []
        commands = browser.find_element(By.ID, "commands").text
        assert f"dispatch status {job_id}" in commands
        no_alert(browser)
        screenshot(browser, shots, "job")
        browser.get(f"{base}/jobs/{record.jobs[IMG_NAME]}")
        wait_until(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "h1"))
        assert browser.find_element(By.CSS_SELECTOR, "h1").text.startswith(IMG_NAME)
        no_alert(browser)


def test_the_summary_page(record: Record, browser: Any, shots: Path) -> None:
    from selenium.webdriver.common.by import By

    with serve(UI(record.client, clock=record.sched.now)) as base:
        browser.get(base + "/summary")
        by_state = ["active 3", "succeeded 2"]
        # read within the wait: the page's refresh may replace the table meanwhile
        wait_until(
            browser,
            lambda d: (
                [r.text for r in d.find_elements(By.CSS_SELECTOR, "#by-state tr")] == by_state
            ),
        )
        wait_until(browser, lambda d: d.find_element(By.ID, "lost").text == "0h 0m 24s")
        screenshot(browser, shots, "summary")


def test_the_list_refreshes_in_place_while_a_job_runs(record: Record, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    ui = UI(record.client, clock=record.sched.now)
    running = record.jobs["running"]
    row = f'#jobs tr[data-job="{running}"]'
    with serve(ui) as base:
        browser.get(base + "/")
        wait_until(
            browser,
            lambda d: d.find_element(By.CSS_SELECTOR, row).get_attribute("data-state") == "running",
        )
        browser.execute_script("window.notReloaded = true")
        with ui.lock:  # the record changes while no page is being read
            object_id = record.live_object(running)
            record.sched.cancel(object_id)  # the scheduler ends it ...
            record.sched.plan(running, 2, succeed(after=1))
            record.settle(4)  # ... and the supervisor records it
        wait_until(
            browser,
            lambda d: d.find_element(By.CSS_SELECTOR, row).get_attribute("data-state") != "running",
        )
        assert browser.execute_script("return window.notReloaded") is True


def test_chromium_is_debians(browser: Any) -> None:
    assert shutil.which("chromium") == CHROMIUM
    assert browser.capabilities["browserName"] in ("chrome", "chromium")
