"""Progress reports (taskqueue/core/progress_reports.py): what a report may hold, and which reports are written."""

from __future__ import annotations

import math

import pytest

from taskqueue.core.progress_reports import (
    MAX_MESSAGE_CHARS,
    PROGRESS_INTERVAL_SECONDS,
    ProgressThrottle,
    checked_progress,
)
from taskqueue.progress import report_progress
from tests.support import FakeClock


def test_a_report_is_a_finite_number_and_a_short_message():
    assert checked_progress(40, " page 2 of 5 ") == (40.0, "page 2 of 5")
    assert checked_progress(0.5, "") == (0.5, None)
    value, text = checked_progress(1, "x" * 1000)
    assert len(text) == MAX_MESSAGE_CHARS and text.endswith("…")
    for bad in (math.nan, math.inf, "40", None, True):
        with pytest.raises(ValueError, match="progress must be a finite number"):
            checked_progress(bad, "")
    with pytest.raises(ValueError, match="a progress message must be a string"):
        checked_progress(1, 42)


def test_the_first_report_is_written_then_one_per_interval():
    clock = FakeClock()
    throttle = ProgressThrottle(clock)
    written = []
    for _ in range(40):  # a report every half second for 20 s
        written.append(throttle.due())
        clock.advance(0.5)
    assert written[0] is True
    assert sum(written) == 20 / PROGRESS_INTERVAL_SECONDS
    assert [i * 0.5 for i, w in enumerate(written) if w] == [0, 5, 10, 15]


def test_outside_a_task_run_a_report_is_accepted_and_goes_nowhere():
    """A runner can be called by its own tests, without a worker: reporting is not an error there."""
    assert report_progress(50, "half way") is False
    with pytest.raises(ValueError):
        report_progress(math.nan)


def test_a_progress_write_never_passes_the_workers_stream_filter():
    """The MODIFY a progress write makes (a TAKEN task with progress) starts nothing: the TaskStream filter passes
    writes into PENDING, resume marks and TTL deletions of PENDING tasks only."""
    from local.template.filter_patterns import matches_any
    from tests.unit.test_local_patterns import template_filters

    filters = template_filters()
    image = {"taskId": {"S": "t"}, "queue": {"S": "work"}, "taskStatus": {"S": "TAKEN"}, "progress": {"N": "40"},
             "progressMessage": {"S": "2 of 5"}}
    record = {"eventName": "MODIFY", "dynamodb": {"NewImage": image, "OldImage": {**image, "progress": {"N": "20"}}}}
    assert not matches_any(filters, record)
    assert matches_any(filters, {"eventName": "INSERT", "dynamodb": {"NewImage": {**image, "taskStatus": {"S": "PENDING"}}}})
