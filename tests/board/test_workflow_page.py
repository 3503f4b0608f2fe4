"""The board's workflow page (through Flask's test client, on both engines): a workflow's state, its picture (each
task a box coloured by its state, each dependency an arrow), its tasks with what each waits for; a task's page links to
its workflow; an unknown workflow is a 404 that says why."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from taskq.board.workflow_graph import picture
from tests.board.support import Browser, make_board
from tests.workflow_support import create, diamond, run_claimable

pytestmark = pytest.mark.dynamodb_engines


def boxes(page: str) -> dict[str, str]:
    """The picture's boxes: key -> state."""
    return dict(re.findall(r'<g data-key="([^"]+)" data-status="([A-Z]+)">', page))


def test_the_workflow_page_draws_each_task_in_its_state_with_its_dependencies(store, clock, tmp_path: Path):
    create(store, clock, diamond("wf-board", policy="ignore-failure", onFailure={"key": "alert"}))
    browser = Browser(make_board(store, clock, tmp_path / "log"))
    page = browser.get("/workflow?id=wf-board")
    assert 'id="workflow-state">RUNNING' in page
    assert boxes(page) == {"a": "PENDING", "b": "WAITING", "c": "WAITING", "d": "WAITING", "alert": "WAITING"}
    assert page.count("<line ") == 4 and page.count('stroke-dasharray') == 1  # c -> d may fail: dashed
    assert re.search(r'data-key="d">.*?<td class="mono">b, c\?</td>', page, re.S)  # what d waits for
    assert "every task (4)" in page
    run_claimable(store, fail=frozenset({"c"}))
    page = browser.get("/workflow?id=wf-board")
    assert boxes(page) == {"a": "SUCCESS", "b": "SUCCESS", "c": "FAILURE", "d": "SUCCESS", "alert": "SUCCESS"}
    assert 'id="workflow-state">FAILED' in page and "c broke" in page
    task_page = browser.get("/task?id=wf-board/d")
    assert 'id="task-workflow" href="/workflow?id=wf-board"' in task_page


def test_an_unknown_workflow_is_not_found_and_the_page_without_an_id_asks_for_one(store, clock, tmp_path: Path):
    browser = Browser(make_board(store, clock, tmp_path / "log"))
    assert "no workflow &#39;nope&#39;" in browser.get("/workflow?id=nope", status=404)
    assert "Give a workflow's id" in browser.get("/workflow")


def test_the_picture_puts_each_task_right_of_its_deepest_dependency(store, clock):
    create(store, clock, diamond("wf-pic"))
    views = store.workflow_tasks(store.workflow_record("wf-pic"))
    drawn = {n.key: n for n in picture(views).nodes}
    assert drawn["a"].x < drawn["b"].x == drawn["c"].x < drawn["d"].x and drawn["b"].y != drawn["c"].y
    assert picture(views, limit=2).left_out == 2
