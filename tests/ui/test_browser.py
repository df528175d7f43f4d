"""The web UI in a real headless Chromium against a real coordinator, worker and driver.

The coordinator requires an API token for changes. An operator submits a job through the
page (refused until the token is entered), sees it in the jobs list with its checkpoint age
going up (the page polls the API, no reload), opens its detail page, cancels it (through
the confirmation dialog) and sees it CANCELED, resumes it; a bad config is shown with its
line. Every page is saved as a screenshot in test-output/ui/.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from selenium.common.exceptions import NoAlertPresentException, NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from seatide.plugin.contexts import HeldPosition
from seatide.store.left_held import record_left_held
from seatide.testing.cluster import Cluster, batch_gate
from seatide.testing.jobs import batch_job

pytestmark = pytest.mark.cluster

BAD_CONFIG = """env { job.mode = BATCH }
source {
  FakeSource {
    row.num = "many"
    schema = { fields { id = bigint } }
  }
}
sink { Console {} }
"""
TOKEN = "ui-operator-token"
LEFT_SLOT = "ui_left_slot"


def wait(browser, condition, timeout: float, message: str):
    """Poll the page until ``condition(browser)`` is truthy; elements may be replaced meanwhile
    (the page re-renders every second) and a number may not be shown yet (ValueError)."""
    return WebDriverWait(browser, timeout, poll_frequency=0.2,
                         ignored_exceptions=(NoSuchElementException, StaleElementReferenceException, ValueError)).until(
        condition, f"timed out waiting for {message}")


def text_of(browser, css: str) -> str:
    """The text of the element ``css`` names, found again if a re-render replaced it between the
    find and the read (a CI run failed so, on the job page's left-behind row)."""
    read = []
    wait(browser, lambda d: read.append(d.find_element(By.CSS_SELECTOR, css).text) or True, 10, f"the text of {css}")
    return read[-1]


def click(browser, css: str, message: str) -> None:
    """Click the element ``css`` names, finding it again if a re-render replaced it between
    the find and the click (the jobs list and the detail page re-render every second)."""
    wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, css).click() or True, 10, message)


def go(browser, hash_route: str) -> None:
    browser.execute_script("window.location.hash = arguments[0]", hash_route)


def confirm(browser, expected: str) -> None:
    alert = wait(browser, lambda d: _alert(d), 10, "the confirmation dialog")
    assert expected in alert.text, alert.text
    alert.accept()


def _alert(browser):
    try:
        return browser.switch_to.alert
    except NoAlertPresentException:
        return None


def test_operator_submits_watches_and_cancels_a_job_in_the_browser(cluster: Cluster, browser, screenshot, tmp_path):
    gate = str(tmp_path / "gate")
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    token_file.chmod(0o600)
    c1 = cluster.coordinator("c1", extra=["--api-token-file", str(token_file)])
    cluster.worker("w1", env=batch_gate(gate, passes=4))   # four batches commit, then the job is held
    job_file = tmp_path / "orders.conf"
    job_file.write_text(batch_job(str(tmp_path / "out"), rows=3000, pipelines=2, rows_per_batch=100, name="orders-ui"))

    # A slot an earlier release of the job id left (review F2): its row, as the release writes it.
    with cluster.store.write() as conn:
        record_left_held(conn, SimpleNamespace(job_id="ui-orders", run_id="r0ld", incarnation=1),
                         SimpleNamespace(config="", variables="{}"), "src1", "Postgres-CDC", HeldPosition(LEFT_SLOT, 4096),
                         "an earlier SeaTide marked it", f"SELECT pg_drop_replication_slot('{LEFT_SLOT}')")
    left_row = f'tr[data-holds="{LEFT_SLOT}"]'

    # Overview: the leader with its epoch, the nodes and their heartbeats, and what releases left held.
    browser.get(c1.url + "/")
    # Every change the page asks for, as method and path: the page is one document throughout (sameDocument).
    browser.execute_script("window.changes = []; const sent = window.fetch; window.fetch = (url, init) => {"
                           " if (init && init.method && init.method !== 'GET') window.changes.push(init.method + ' ' + url);"
                           " return sent(url, init); };")
    wait(browser, lambda d: text_of(d, "#leader-node") == "c1", 30, "c1 shown as leader")
    wait(browser, lambda d: "pg_drop_replication_slot" in text_of(d, f"#left-behind-all {left_row}"), 10,
         "the slot left held, on the overview")
    assert "ui-orders" in text_of(browser, f"#left-behind-all {left_row}")
    assert text_of(browser, "#leader-epoch") == str(cluster.leader().epoch)
    wait(browser, lambda d: "ALIVE" in text_of(d, '#nodes-table tr[data-node-id="w1"]'), 30, "worker w1 alive")
    assert "coordinator (leader)" in text_of(browser, '#nodes-table tr[data-node-id="c1"]')

    # Submit by uploading the job file: refused without the token, accepted once it is entered.
    go(browser, "#/submit")
    browser.find_element(By.ID, "config-file").send_keys(str(job_file))
    wait(browser, lambda d: "orders-ui" in d.find_element(By.ID, "config").get_attribute("value"), 10, "the upload")
    browser.find_element(By.ID, "job-id").send_keys("ui-orders")
    browser.find_element(By.ID, "btn-submit").click()
    confirm(browser, "Submit ui-orders")
    refused = wait(browser, lambda d: d.find_element(By.ID, "submit-error"), 10, "the refusal without a token")
    assert "requires an API token" in refused.text and cluster.job("ui-orders") is None
    browser.find_element(By.ID, "token").send_keys(TOKEN, Keys.TAB)
    screenshot("submit")
    browser.find_element(By.ID, "btn-submit").click()
    confirm(browser, "Submit ui-orders")
    wait(browser, lambda d: d.execute_script("return location.hash") == "#/jobs/ui-orders", 15, "the job's page")
    assert browser.execute_script("return localStorage.getItem('seatide.apiToken')") == TOKEN

    # Jobs list: the job appears, runs, and its checkpoint age goes up while the page stays loaded.
    go(browser, "#/jobs")
    browser.execute_script("window.sameDocument = true")
    row = '#jobs-table tr[data-job-id="ui-orders"]'
    wait(browser, lambda d: text_of(d, row + " td.status") == "RUNNING", 120, "the job RUNNING in the list")
    wait(browser, lambda d: text_of(d, row + " td:nth-child(7)") == "400", 120, "400 rows out (four batches)")
    age = lambda d: float(d.find_element(By.CSS_SELECTOR, row + " .ckpt-age").get_attribute("data-seconds"))  # noqa: E731
    first = wait(browser, lambda d: age(d) + 1e-9, 30, "a checkpoint age")
    wait(browser, lambda d: age(d) >= first + 2, 30, "the checkpoint age to go up")
    assert text_of(browser, row + " .ckpt .badge") == "HEALTHY"
    assert browser.execute_script("return window.sameDocument") is True, "the page reloaded"
    screenshot("jobs")
    name_filter = browser.find_element(By.ID, "filter-name")
    name_filter.send_keys("no-such-job")
    wait(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, row), 5, "the filter to hide the job")
    name_filter.clear()
    name_filter.send_keys("orders-u")   # matches the name, not the id's beginning only
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, row), 5, "the filter to show the job")

    # Detail: DAG, attempts, checkpoint chart, events, masked config, driver log.
    click(browser, row + " a", "the link to the job's page")
    wait(browser, lambda d: [g.get_attribute("data-plugin") for g in d.find_elements(By.CSS_SELECTOR, "#dag g.node")]
         == ["source[0]", "transform[0]", "sink[0]", "source[1]", "transform[1]", "sink[1]"], 15, "the DAG")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#dag .pipeline-box")) == 2
    wait(browser, lambda d: {"JOB_SUBMITTED", "JOB_RUNNING"} <= {
        li.get_attribute("data-kind") for li in d.find_elements(By.CSS_SELECTOR, "#events li")}, 15, "the events")
    wait(browser, lambda d: "w1" in text_of(d, "#attempts-table tbody"), 15, "the attempt on w1")
    wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#checkpoint-charts circle")) == 8, 15,
         "four checkpoints in each chart")
    wait(browser, lambda d: d.find_element(By.ID, "log").get_attribute("textContent").strip(), 30, "the driver log")
    assert 'job.name = "orders-ui"' in browser.find_element(By.ID, "config").get_attribute("textContent")
    assert "an earlier SeaTide marked it" in text_of(browser, f"#left-behind {left_row}")
    screenshot("job")

    # Cancel through the confirmation dialog; the page follows the job to CANCELED.
    click(browser, "#btn-cancel", "the cancel button")
    confirm(browser, "Cancel job ui-orders?")
    wait(browser, lambda d: "CANCELED" in text_of(d, "#job-status"), 90, "CANCELED on the page")
    assert cluster.job("ui-orders").status == "CANCELED"
    wait(browser, lambda d: "JOB_CANCELED" in {
        li.get_attribute("data-kind") for li in d.find_elements(By.CSS_SELECTOR, "#events li")}, 10, "the cancel event")
    assert browser.find_element(By.ID, "btn-cancel").get_attribute("disabled") is not None
    assert browser.find_element(By.ID, "btn-resume").get_attribute("disabled") is None
    screenshot("job-canceled")

    # Resume from the latest checkpoints: a new incarnation, which the page follows.
    click(browser, "#btn-resume", "the resume button")
    confirm(browser, "Resume job ui-orders from its latest checkpoints?")
    wait(browser, lambda d: "Resumed" in text_of(d, "#action-message"), 10, "the resume accepted")
    assert cluster.job("ui-orders").incarnation == 2
    wait(browser, lambda d: text_of(d, "#incarnation") == "2", 10, "incarnation 2 on the page")
    wait(browser, lambda d: "JOB_RESUMED" in {
        li.get_attribute("data-kind") for li in d.find_elements(By.CSS_SELECTOR, "#events li")}, 10, "the resume event")
    # Submit and resume through the routes only coordinators that record environments serve: an older one
    # answers them 404/405 rather than record a job it would fill from its own environment (review 2 of envgate).
    changes = browser.execute_script("return window.changes")
    assert "POST /api/v1/jobs" in changes and "POST /api/v1/jobs/ui-orders/incarnations" in changes, changes
    assert not [c for c in changes if c.endswith(("/submit-job", "/resume"))], changes

    # A bad config: the API's message and the offending line, inline; nothing recorded.
    go(browser, "#/submit")
    browser.find_element(By.ID, "config").send_keys(BAD_CONFIG)
    browser.find_element(By.ID, "btn-submit").click()
    confirm(browser, "Submit this job")
    error = wait(browser, lambda d: d.find_element(By.ID, "submit-error"), 10, "the inline error")
    # The reason first, then where: the plugin and the line of the pasted text.
    assert "option 'row.num' must be integer, got \"many\"" in error.text
    assert "source[0] FakeSource, line 4" in error.text
    bad = browser.find_element(By.CSS_SELECTOR, "#submit-error .bad-line")
    assert bad.get_attribute("data-line") == "4" and 'row.num = "many"' in bad.text
    screenshot("submit-error")
    assert [j["jobId"] for j in _all_jobs(c1.url)] == ["ui-orders"]

    # Back on the overview, the job is counted under its status.
    go(browser, "#/")
    wait(browser, lambda d: text_of(d, '#job-counts b') == "1", 10, "one job counted")
    screenshot("overview")


def _all_jobs(url: str) -> list[dict]:
    from seatide.testing.cluster import http

    return http("GET", url + "/api/v1/running-jobs")[1] + http("GET", url + "/api/v1/finished-jobs/all")[1]
