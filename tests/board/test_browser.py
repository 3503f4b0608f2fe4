"""The board in a real browser: Debian's headless chromium driven by Playwright, against a local stack started as
`make up` starts it (its own process, a free port, a private stack file) and `taskq board` started as a user starts
it (its own process; it prints its URL). Each test saves a screenshot under reports/board/.

Skipped, with the reason, only when chromium is absent (scripts/install-browser installs it; `make test` and CI run
that first). The queues start paused, so the stack's workers leave the tasks where the tests look for them."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from taskq.board.assets import htmx_path
from taskqueue.core.settings import Settings
from taskqueue.store import FairTurn, TaskStore
from tests.board.support import create, dead_letter

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "reports" / "board"
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]
PARAMS = ["CreateTasksScheduleState=DISABLED", "FakeRunnerDurationSeconds=0", "TimeBudgetSeconds=5"]
TIMEOUT_MS = 20_000

if CHROMIUM is None:
    pytest.skip("no chromium: the board's browser tests need Debian's chromium (scripts/install-browser, or as root "
                "apt-get install -y chromium)", allow_module_level=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def clean_env(extra: dict[str, str]) -> dict[str, str]:
    names = ("QUEUE_TABLE_NAME", "TASKQ_STACK_NAME", "FAILED_EVENTS_QUEUE_URL", "AGENT_TABLE_NAME")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k not in names}
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


def stop(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """`python -m local up` on a free port with a stack file of its own; both queues paused."""
    home = tmp_path_factory.mktemp("board-stack")
    discovery = home / "run" / "local-stack.json"
    log_path = home / "up.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "local", "up", "--port", str(free_port()), "--discovery", str(discovery),
             "--param-overrides", *PARAMS],
            cwd=REPO, env=clean_env({}), stdout=log, stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 120
            while not discovery.exists():
                assert proc.poll() is None, f"`local up` exited with {proc.returncode}:\n{log_path.read_text()}"
                assert time.monotonic() < deadline, f"no stack file after 120 s:\n{log_path.read_text()}"
                time.sleep(0.2)
            record = json.loads(discovery.read_text())
            client = boto3.client("dynamodb", endpoint_url=record["endpoint_url"], region_name=record["region"],
                                  aws_access_key_id="test", aws_secret_access_key="test")
            store = TaskStore(client, Settings.from_env({"QUEUE_TABLE_NAME": record["outputs"]["QueueTableName"]}))
            for queue in ("work", "calls"):
                store.pause(queue)
            yield {"file": discovery, "record": record, "store": store, "home": home}
        finally:
            stop(proc)


@pytest.fixture(scope="module")
def board_url(stack: dict[str, Any]) -> Iterator[str]:
    """`taskq board` as a user runs it: no AWS variables, the stack found through its stack file; its URL read
    from what it prints."""
    assert htmx_path().is_file(), f"htmx is not installed at {htmx_path()}: run `make board-assets`"
    home = stack["home"] / "home"
    home.mkdir()
    out = home / "board.log"
    with out.open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "taskq", "board", "--refresh", "1"], cwd=home, stdout=log,
                                stderr=subprocess.STDOUT, env=clean_env({"HOME": str(home), "TASKQ_LOCAL_STACK_FILE": str(stack["file"])}))
        try:
            deadline = time.monotonic() + 60
            while not (found := re.search(r"taskq board: (http://127\.0\.0\.1:\d+/)", out.read_text())):
                assert proc.poll() is None, f"taskq board exited with {proc.returncode}:\n{out.read_text()}"
                assert time.monotonic() < deadline, f"taskq board printed no URL in 60 s:\n{out.read_text()}"
                time.sleep(0.1)
            yield found.group(1)
        finally:
            stop(proc)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh browser session (its own cookies, so its own CSRF token); a screenshot named after the test at the end."""
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    tab = context.new_page()
    tab.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        yield tab
        assert not errors, f"script errors on the page: {errors}"
    finally:
        SHOTS.mkdir(parents=True, exist_ok=True)
        tab.screenshot(path=str(SHOTS / f"{request.node.name}.png"), full_page=True)
        context.close()


def eventually(check: Callable[[], bool], what: str, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"not within {seconds:g} s: {what}"
        time.sleep(0.2)


def count(page: Any, name: str) -> int:
    return int(page.locator(f'[data-count="{name}"]').inner_text().strip())


def test_counts_change_as_tasks_are_created_without_a_reload(stack, board_url, page):
    from playwright.sync_api import expect

    page.goto(board_url)
    before = count(page, "work:ready")
    page.evaluate("window.boardTestMarker = 'still the same page'")
    create(stack["store"], int(time.time() * 1000), 3, payload={"from": "browser test"})
    expect(page.locator('[data-count="work:ready"]')).to_have_text(str(before + 3))
    assert page.evaluate("window.boardTestMarker") == "still the same page"  # refreshed in place, not reloaded
    expect(page.locator('[data-state="work"]')).to_have_text("paused")


def test_open_a_task_whose_payload_holds_a_script_shows_it_as_text(stack, board_url, page):
    from playwright.sync_api import expect

    script = "<script>window.boardPwned = 1</script><img src=x onerror=window.boardPwned=2>"
    [task_id] = create(stack["store"], int(time.time() * 1000), 1, priority=999, payload={"note": script})
    page.goto(board_url + "tasks?queue=work&state=PENDING")
    page.locator(f'tr[data-task="{task_id}"] a').first.click()
    expect(page.locator("#task-id")).to_have_text(task_id)
    expect(page.locator("#payload")).to_contain_text(script)
    assert page.locator("#payload script, #payload img").count() == 0
    assert page.evaluate("typeof window.boardPwned") == "undefined"
    expect(page.locator(".timeline")).to_contain_text("created (PENDING)")


def test_retry_a_failure_task(stack, board_url, page):
    from playwright.sync_api import expect

    store = stack["store"]
    [task_id] = dead_letter(store, "work", 1, error="legacy system said no")
    page.goto(board_url + f"tasks/{task_id}")
    expect(page.locator("#task-status")).to_have_text("FAILURE")
    expect(page.locator("#last-error")).to_have_text("legacy system said no")
    page.locator('[data-action="retry"]').click()
    expect(page.locator("#task-status")).to_have_text("PENDING")
    expect(page.locator(".flash.ok")).to_contain_text(f"retried {task_id}")
    task = store.get(task_id)
    assert (task.status.value, task.attempts) == ("PENDING", 0)


def test_pause_and_resume_a_queue(stack, board_url, page):
    from playwright.sync_api import expect

    store = stack["store"]
    page.goto(board_url)
    page.locator('[data-action="resume-calls"]').click()
    expect(page.locator('[data-state="calls"]')).to_have_text("running")
    expect(page.locator(".flash.ok")).to_contain_text("resumed queue 'calls'")
    assert not store.is_paused("calls")
    page.locator('[data-action="pause-calls"]').click()
    expect(page.locator('[data-state="calls"]')).to_have_text("paused")
    assert store.is_paused("calls")


def test_cancel_a_waiting_call(stack, board_url, page):
    from playwright.sync_api import expect

    store = stack["store"]
    [call] = create(store, int(time.time() * 1000), 1, queue="calls",
                    payload={"caller": "+33 1 23 45", "preferences": {"language": "fr"}})
    page.goto(board_url + "matching")
    row = page.locator(f'tr[data-call="{call}"]')
    expect(row).to_contain_text("language=fr")
    row.locator('[data-action="cancel-call"]').click()
    expect(page.locator(".flash.ok")).to_contain_text(f"cancelled {call}")
    expect(page.locator(f'tr[data-call="{call}"]')).to_have_count(0)
    assert store.get(call).status.value == "CANCELLED"


def test_an_action_without_the_token_is_refused(stack, board_url, page):
    from playwright.sync_api import expect

    store = stack["store"]
    page.goto(board_url)
    form = page.locator('form:has([data-action="resume-work"])')
    form.locator('input[name="csrf_token"]').evaluate("input => input.remove()")
    form.locator('[data-action="resume-work"]').click()
    expect(page.locator("#reason")).to_contain_text("CSRF token is missing")
    assert store.is_paused("work")
    # And a request made outside the page (another site's form, a script): refused the same way.
    response = page.request.post(board_url + "actions/resume", form={"queue": "work"})
    assert response.status == 400 and store.is_paused("work")


def test_a_task_whose_id_has_slashes_dots_and_question_marks_opens_and_cancels(stack, board_url, page):
    """Issue 28: any id the schema allows has a page; chromium resolves "." and ".." segments and merges nothing
    it is not told to, so the links must survive a real browser's URL parser."""
    from playwright.sync_api import expect

    store = stack["store"]
    odd = ["browser/a/b", "browser?x=1&y=%2F", "..", "a/../browser", "ünï code"]
    create(store, int(time.time() * 1000), len(odd), priority=998, taskIds=odd)
    for task_id in odd:
        page.goto(board_url + "tasks?queue=work&state=PENDING&limit=100")
        page.locator("tr[data-task] a").get_by_text(task_id, exact=True).click()
        expect(page.locator("#task-id")).to_have_text(task_id)
        page.locator('[data-action="cancel"]').click()
        expect(page.locator(".flash.ok")).to_contain_text(f"cancelled {task_id}")
        expect(page.locator("#task-id")).to_have_text(task_id)
        assert store.get(task_id).status.value == "CANCELLED"


def test_the_groups_page_shows_a_noisy_group_first_and_pauses_it(stack, board_url, page):
    """Fair share's groups (issue 30): the page is read in the background and filled in by the refresh; a group's
    Pause button pauses it (the store says so) and the page marks it paused, then Resume ends it."""
    from playwright.sync_api import expect

    store = stack["store"]
    now = int(time.time() * 1000)
    create(store, now, 5, group="browser-noisy", payload={"from": "browser test"})
    create(store, now, 1, group="browser-quiet", payload={"from": "browser test"})
    page.goto(board_url + "groups")
    noisy = page.locator('tr[data-group="work:browser-noisy"]')
    expect(noisy).to_be_visible()
    rows = page.locator('table[data-groups="work"] tbody tr').evaluate_all("rows => rows.map(r => r.dataset.group)")
    assert rows.index("work:browser-noisy") < rows.index("work:browser-quiet")
    expect(page.locator('[data-count="work:browser-noisy:waiting"]')).to_have_text("5")
    page.locator('[data-action="pause-group-work-browser-noisy"]').click()
    expect(page.locator(".flash.ok")).to_contain_text("paused group 'browser-noisy'")
    expect(page.locator('[data-paused="work:browser-noisy"]')).to_be_visible()
    assert store.group_view("work", "browser-noisy").limits.paused_until_ms is not None
    page.locator('[data-action="resume-group-work-browser-noisy"]').click()
    expect(page.locator(".flash.ok")).to_contain_text("resumed group 'browser-noisy'")
    expect(page.locator('[data-paused="work:browser-noisy"]')).to_have_count(0)
    assert store.group_view("work", "browser-noisy").limits.paused_until_ms is None


def test_the_queue_metrics_show_the_oldest_waiting_task_and_the_noisy_groups(stack, board_url, page):
    """The figures the safety net publishes to CloudWatch, on the queues page (read in the background by the board
    as the safety net reads them): the oldest waiting task's age, waiting / running / delayed (three tasks claimed
    here: the queues are paused), and a queue with groups' noisy group by name beside the quiet groups'."""
    from playwright.sync_api import expect

    store, now = stack["store"], int(time.time() * 1000)
    create(store, now - 95_000, 2, payload={"from": "metrics test"})
    create(store, now - 40_000, 8, group="tenant-noisy")
    create(store, now - 20_000, 1, group="tenant-quiet")
    create(store, now, 2, delaySeconds=600)
    create(store, now - 10_000, 3)  # the newest of the default group: LIFO claims them first
    running = [store.claim(c, "browser-test") for c in store.candidates("work", 3, fair=FairTurn(groups=False))]
    assert all(running)
    page.goto(board_url)
    expect(page.locator('[data-metrics-group="work:tenant-noisy"]')).to_contain_text("noisy group tenant-noisy")
    waiting = float(page.locator('[data-metric="work:tenant-noisy:TasksWaiting"]').get_attribute("data-value"))
    assert waiting >= 8
    assert float(page.locator('[data-metric="work:TasksRunning"]').get_attribute("data-value")) >= 3
    oldest = float(page.locator('[data-metric="work:OldestTaskAge"]').get_attribute("data-value"))
    assert oldest >= 95
    expect(page.locator('[data-metrics-group="work:quiet"]')).to_be_visible()
    page.locator("#queue-metrics").scroll_into_view_if_needed()
