"""`taskq watch`: the refresh computation on its own (pure), the loop, and the command against moto."""

from __future__ import annotations

import json
import sys

import pytest

from taskq import watch_command as watch
from taskq.main import main
from taskq.watch_command import QueueSample, Sample, refresh, render
from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.store import TaskStore
from tests.conftest import TABLE, make_settings


@pytest.fixture(autouse=True)
def no_local_stack(tmp_path, monkeypatch):
    """A local stack someone runs in this checkout (`make up`) must not become these tests' target."""
    monkeypatch.setenv("TASKQ_LOCAL_STACK_FILE", str(tmp_path / "no-local-stack.json"))


def queue(name: str = "work", success: int | None = 10, failure: int = 0, claims: dict[str, int] | None = None,
          paused: bool = False) -> QueueSample:
    counts = {"PENDING": 4, "TAKEN": len(claims or {}), "FAILURE": failure, "CANCELLED": 0}
    if success is not None:
        counts["SUCCESS"] = success
    return QueueSample(name, counts, claimable=3, delayed=1, paused=paused, claims=claims or {})


# ---- refresh: pure ---------------------------------------------------------------------------------------------

def test_the_first_refresh_has_no_throughput_and_takes_every_claim_it_sees():
    (view,) = refresh(None, Sample(1_000, [queue(claims={"a": 400, "b": 1_000, "c": 100})]))
    assert view.finished_per_second is None
    assert (view.new_claims, view.age_at_claim_p50_ms, view.age_at_claim_max_ms) == (3, 400, 1_000)
    assert (view.counts["PENDING"], view.claimable, view.delayed, view.paused) == (4, 3, 1, False)


def test_throughput_is_finished_tasks_per_second_between_refreshes():
    before = Sample(10_000, [queue(success=10, failure=1), queue("calls", success=0)])
    after = Sample(12_000, [queue(success=16, failure=3), queue("calls", success=0)])
    work, calls = refresh(before, after)
    assert work.finished_per_second == pytest.approx((6 + 2) / 2.0)
    assert calls.finished_per_second == 0.0


def test_finished_tasks_that_left_never_make_throughput_negative():
    # SUCCESS items deleted by TTL after the retention, FAILURE redriven: the count drops.
    (view,) = refresh(Sample(0, [queue(success=50, failure=5)]), Sample(5_000, [queue(success=40, failure=0)]))
    assert view.finished_per_second == 0.0


def test_without_a_success_count_there_is_no_throughput():
    (view,) = refresh(Sample(0, [queue(success=None)]), Sample(2_000, [queue(success=None)]))
    assert view.finished_per_second is None


def test_age_at_claim_counts_only_claims_first_seen_at_this_refresh():
    before = Sample(0, [queue(claims={"old": 90_000})])
    (view,) = refresh(before, Sample(2_000, [queue(claims={"old": 95_000, "new1": 200, "new2": 600})]))
    assert (view.new_claims, view.age_at_claim_p50_ms, view.age_at_claim_max_ms) == (2, 400, 600)
    (quiet,) = refresh(before, Sample(2_000, [queue(claims={"old": 90_000})]))
    assert (quiet.new_claims, quiet.age_at_claim_p50_ms) == (0, None)


def test_a_queue_that_appears_later_is_shown_without_throughput():
    work, calls = refresh(Sample(0, [queue()]), Sample(1_000, [queue(success=12), queue("calls", success=3)]))
    assert work.finished_per_second == 2.0 and calls.finished_per_second is None


def test_render_shows_every_column():
    views = refresh(Sample(0, [queue(success=1)]), Sample(2_000, [queue(success=5, claims={"x": 61_000}, paused=True)]))
    text = render(views, 2_000, "taskqueue-local (local)", 2.0)
    title, blank, header, row = text.splitlines()
    assert title == "taskq watch: taskqueue-local (local), every 2s, 1970-01-01T00:00:02Z (Ctrl-C to stop)" and blank == ""
    assert header.split() == ["QUEUE", "PENDING", "CLAIMABLE", "DELAYED", "TAKEN", "FAILURE", "CANCELLED", "SUCCESS",
                              "DONE/S", "CLAIMS", "AGE", "AT", "CLAIM", "p50/max", "PAUSED"]
    assert row.split() == ["work", "4", "3", "1", "1", "0", "0", "5", "2.0", "1", "1m01s/1m01s", "yes"]


# ---- the loop --------------------------------------------------------------------------------------------------

def test_the_loop_stops_after_count_refreshes_and_waits_between_them(monkeypatch):
    waits: list[float] = []
    monkeypatch.setattr(watch, "sleep", waits.append)
    samples = iter([Sample(0, [queue(success=0)]), Sample(1_000, [queue(success=3)]), Sample(2_000, [queue(success=4)])])
    shown: list[float | None] = []
    status = watch.watch(lambda: next(samples), lambda views, s: shown.append(views[0].finished_per_second), 1.5, 3)
    assert status == 0 and shown == [None, 3.0, 1.0] and waits == [1.5, 1.5]


def test_ctrl_c_ends_the_loop_cleanly(monkeypatch):
    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(watch, "sleep", interrupted)
    shown: list[int] = []
    assert watch.watch(lambda: Sample(0, [queue()]), lambda views, s: shown.append(1), 1.0, None) == 0
    assert shown == [1]


# ---- the command -----------------------------------------------------------------------------------------------

@pytest.fixture
def tasks(dynamodb) -> TaskStore:
    store = TaskStore(dynamodb, make_settings())
    now = store._clock.now_ms()
    store.put_tasks(new_tasks(parse_create_request({"count": 3}, store.settings), now, store.settings))
    return store


def test_watch_prints_one_json_line_per_refresh(tasks, capsys, monkeypatch):
    monkeypatch.setattr(watch, "sleep", lambda seconds: None)
    claimed = tasks.claim(tasks.candidates("work", 1)[0], "w")
    assert claimed is not None
    assert main(["--table-name", TABLE, "watch", "--count", "2", "--json", "--interval", "0.5"]) == 0
    lines = capsys.readouterr().out.splitlines()
    first, second = (json.loads(line) for line in lines)
    work = {q["queue"]: q for q in first["queues"]}["work"]
    assert work["counts"] == {"PENDING": 2, "TAKEN": 1, "FAILURE": 0, "CANCELLED": 0, "SUCCESS": 0}
    assert work["newClaims"] == 1 and work["ageAtClaimP50Ms"] == claimed.updated_ms - claimed.created_ms
    assert work["paused"] is False and work["finishedPerSecond"] is None
    again = {q["queue"]: q for q in second["queues"]}["work"]
    assert again["newClaims"] == 0 and again["finishedPerSecond"] == 0.0


def test_watch_redraws_in_place_on_a_terminal_and_prints_plainly_otherwise(tasks, capsys, monkeypatch):
    monkeypatch.setattr(watch, "sleep", lambda seconds: None)
    assert main(["--table-name", TABLE, "watch", "--count", "2", "--no-success"]) == 0
    plain = capsys.readouterr().out
    assert watch.CLEAR not in plain and plain.count("taskq watch: test-queue-table, every 2s") == 2
    assert "SUCCESS" not in plain and "DONE/S" not in plain
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert main(["--table-name", TABLE, "watch", "--count", "2"]) == 0
    drawn = capsys.readouterr().out
    assert drawn.count(watch.CLEAR) == 2 and drawn.startswith(watch.CLEAR + "taskq watch: ")
