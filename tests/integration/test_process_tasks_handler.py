"""ProcessTasks against moto: newest first, capacity respected, outcomes recorded, tail calls."""

import threading
import time
from typing import Any

import pytest

from taskqueue.core.errors import PermanentTaskError
from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.core.states import TaskStatus
from taskqueue.services import Services
from taskqueue.store import TaskStore
from taskqueue.work.runner import FakeLegacySystem
from tests.conftest import make_settings
from tests.support import load_event, load_function

app = load_function("process_tasks")


def seed(svc: Services, clock, n: int, **body: Any) -> list[str]:
    ids = []
    for _ in range(n):
        tasks = new_tasks(parse_create_request(body, svc.settings), clock.now_ms(), svc.settings)
        svc.store.put_tasks(tasks)
        ids.append(tasks[0].task_id)
        clock.advance(1)
    return ids


class RecordingRunner:
    def __init__(self, fail_with: Exception | None = None) -> None:
        self.seen: list[str] = []
        self._lock = threading.Lock()
        self._fail_with = fail_with

    def __call__(self, task):
        with self._lock:
            self.seen.append(task.task_id)
        if self._fail_with:
            raise self._fail_with
        return {"ok": task.task_id}


def test_processes_every_task_newest_first_and_records_success(services, clock, topics):
    ids = seed(services, clock, 6)
    runner = RecordingRunner()
    services = Services(make_settings(topics, runner_capacity=1), services.store, services.notifier, clock)
    report = app.handle(load_event("process_tasks-sns-wake.json"), 120, "req-1", services, runner)
    assert runner.seen == list(reversed(ids))
    assert (report.claimed, report.succeeded, report.stopped_by, report.work_remains) == (6, 6, "empty", False)
    assert all(services.store.get(i).status is TaskStatus.SUCCESS for i in ids)
    assert topics.tail_calls() == [] and topics.wakeups() == []


def test_claims_only_when_the_runner_has_capacity(services, clock):
    seed(services, clock, 9)
    fake = FakeLegacySystem(capacity=3, duration_seconds=0.05)
    report = app.handle({"queue": "work"}, 120, "req-1", services, fake)
    # No claim-then-bounce: never more in flight than capacity, so the fake never refused one.
    assert fake.peak_in_flight <= 3
    assert (report.claimed, report.succeeded, report.released) == (9, 9, 0)


def test_transient_failures_retry_then_dead_letter(services, clock):
    (task_id,) = seed(services, clock, 1, maxAttempts=3)
    runner = RecordingRunner(fail_with=RuntimeError("legacy system timed out"))
    report = app.handle({"queue": "work"}, 120, "req-1", services, runner)
    # retry_base_seconds is 0 in tests, so each retry is claimable at once.
    assert runner.seen == [task_id] * 3
    assert (report.released, report.failed) == (2, 1)
    dead = services.store.get(task_id)
    assert dead.status is TaskStatus.FAILURE and dead.attempts == 3
    assert "attempts exhausted (3)" in dead.last_error and "legacy system timed out" in dead.last_error


def test_permanent_error_fails_at_once(services, clock):
    (task_id,) = seed(services, clock, 1)
    report = app.handle({"queue": "work"}, 120, "req-1", services, RecordingRunner(PermanentTaskError("bad ip")))
    assert (report.claimed, report.failed, report.released) == (1, 1, 0)
    assert services.store.get(task_id).last_error == "permanent error: bad ip"


def test_tail_calls_when_claimable_work_remains_at_the_budget(services, clock, topics):
    seed(services, clock, 5)
    svc = Services(make_settings(topics, runner_capacity=1, time_budget_seconds=0.01), services.store, services.notifier, clock)

    class SlowRunner(RecordingRunner):
        def __call__(self, task):
            result = super().__call__(task)
            clock.advance(1)  # the task takes a second on the injected clock: past the budget
            return result

    report = app.handle({"queue": "work"}, 120, "req-1", svc, SlowRunner())
    assert report.stopped_by == "budget" and report.work_remains is True
    assert 1 <= report.claimed < 5
    assert topics.wakeups() == ["work"]  # a tail call goes straight to WorkerWakeUpTopic


def test_tail_calls_once_after_its_last_task_ends(services, clock, topics):
    """One tail call per run, at its end: the successor finds the run's slots free (they go back as the run ends)."""
    seed(services, clock, 5)
    svc = Services(make_settings(topics, runner_capacity=1, time_budget_seconds=0.01), services.store, services.notifier, clock)
    seen_while_running: list[str] = []

    class LooksForTheTailCall(RecordingRunner):
        def __call__(self, task):
            result = super().__call__(task)
            clock.advance(1)  # past the budget: claiming stops while this task runs
            seen_while_running.extend(topics.wakeups())  # (reading drains the probe queue)
            return result

    report = app.handle({"queue": "work"}, 120, "req-1", svc, LooksForTheTailCall())
    assert (report.stopped_by, report.claimed, report.work_remains) == ("budget", 1, True)
    assert seen_while_running == [] and topics.wakeups() == ["work"]


def test_past_its_budget_a_run_tail_calls_as_its_first_slot_comes_free_not_after_its_long_last_task(
        services, clock, topics):
    """A stream start that came while this run held the running limit found it full and ended: the tasks it was for
    wait for this run's tail call. Sent only after the run's last task (which may run for minutes), they waited that
    long; sent as the first slot comes free, the next invocation can take it."""
    seed(services, clock, 5)
    svc = Services(make_settings(topics, runner_capacity=2, time_budget_seconds=0.01), services.store,
                   services.notifier, clock)
    seen_by_the_long_task: list[str] = []
    calls = [0]
    lock = threading.Lock()

    class OneLongOneShort(RecordingRunner):
        def __call__(self, task):
            result = super().__call__(task)
            with lock:
                calls[0] += 1
                first = calls[0] == 1
            if first:  # the long one: still running when the tail call goes out
                deadline = time.monotonic() + 5
                while not seen_by_the_long_task and time.monotonic() < deadline:
                    seen_by_the_long_task.extend(topics.wakeups())
                    time.sleep(0.01)
            else:
                clock.advance(1)  # the short one ends past the budget: its slot comes free
            return result

    report = app.handle({"queue": "work"}, 120, "req-1", svc, OneLongOneShort())
    assert (report.stopped_by, report.claimed, report.work_remains, report.tail_called_early) == ("budget", 2, True, True)
    assert seen_by_the_long_task == ["work"]
    assert topics.wakeups() == []  # one tail call a run: none more at its end


def test_recovers_expired_leases_before_claiming(services, clock):
    (task_id,) = seed(services, clock, 1)
    crashed = services.store.claim(services.store.candidates("work", 1)[0], "crashed-worker")
    clock.advance(services.settings.lease_seconds + 1)
    report = app.handle({"queue": "work"}, 120, "req-2", services, RecordingRunner())
    assert (report.recovered, report.succeeded) == (1, 1)
    assert services.store.complete(crashed, "crashed-worker") is False
    done = services.store.get(task_id)
    assert done.status is TaskStatus.SUCCESS and done.attempts == 2


def test_wake_up_without_a_queue_is_refused(services):
    with pytest.raises(Exception, match="wake-up must be an SNS notification"):
        app.handle({}, 120, "req-1", services, RecordingRunner())


class FailsFirstAttempt(RecordingRunner):
    def __call__(self, task):
        super().__call__(task)
        if task.attempts == 1:
            raise RuntimeError("legacy system busy")
        return {"ok": task.task_id}


def test_waits_for_a_retry_that_falls_due_inside_the_budget(services, dynamodb, clock, topics):
    (task_id,) = seed(services, clock, 1)
    settings = make_settings(topics, retry_base_seconds=2.0, time_budget_seconds=30)
    svc = Services(settings, TaskStore(dynamodb, settings, clock), services.notifier, clock)
    runner = FailsFirstAttempt()
    report = app.handle({"queue": "work"}, 120, "req-1", svc, runner)
    # The backoff (at most 2 s on the injected clock) ends inside the budget: the same invocation retries it.
    assert runner.seen == [task_id, task_id]
    assert (report.released, report.succeeded, report.stopped_by, report.work_remains) == (1, 1, "empty", False)
    assert services.store.get(task_id).status is TaskStatus.SUCCESS
    assert topics.tail_calls() == [] and topics.wakeups() == []


@pytest.mark.parametrize("delay,tail_call", [(8, True), (20, False)])
def test_tail_calls_only_for_delayed_work_the_next_budget_reaches(services, dynamodb, clock, topics, delay, tail_call):
    seed(services, clock, 1, delaySeconds=delay)
    settings = make_settings(topics, time_budget_seconds=15)
    svc = Services(settings, TaskStore(dynamodb, settings, clock), services.notifier, clock)
    # 16 s left in the invocation: it claims for 5 s (the shortest task, 1 s, must still finish with 10 s to record
    # it: taskqueue/run_time.py), so a task due in 8 s is the next invocation's; one due in 20 s is beyond that
    # budget too and is left to the safety net.
    report = app.handle({"queue": "work"}, 16, "req-1", svc, RecordingRunner())
    assert (report.claimed, report.stopped_by, report.work_remains) == (0, "empty", tail_call)
    assert topics.wakeups() == (["work"] if tail_call else [])


def test_without_a_runner_it_claims_nothing_says_so_and_returns_at_once(services, clock, topics, caplog):
    """A stack deployed without TaskRunner: the wake-up claims nothing, the tasks wait PENDING, the log says why, and
    the run neither waits nor tail-calls."""
    ids = seed(services, clock, 3)
    started_ms = clock.now_ms()
    report = app.handle(load_event("process_tasks-sns-wake.json"), 120, "req-1", services, None)
    assert (report.claimed, report.stopped_by, report.work_remains) == (0, "no-runner", False)
    assert all(services.store.get(i).status is TaskStatus.PENDING for i in ids)
    assert topics.tail_calls() == [] and topics.wakeups() == []
    assert clock.now_ms() == started_ms  # returned at once: no wait on the queue
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("no task runner is configured" in w and "TaskRunner" in w for w in warnings), warnings
    app.metrics.clear_metrics()  # what this run added is flushed by lambda_handler, which this test does not call


def test_without_a_runner_the_handler_counts_NoTaskRunner(services, clock, topics, capsys, monkeypatch):
    """Through lambda_handler with TASK_RUNNER empty (the template's default): the runner loader gives no runner,
    and the invocation emits NoTaskRunner (queue work), the metric NoTaskRunnerAlarm watches."""
    from tests.support import LambdaContextStub, emitted

    (task_id,) = seed(services, clock, 1)
    monkeypatch.setattr(app, "services", lambda: Services(make_settings(topics, task_runner=""), services.store,
                                                          services.notifier, clock))
    app.runner.cache_clear()
    app.metrics.clear_metrics()
    try:
        capsys.readouterr()
        result = app.lambda_handler(load_event("process_tasks-sns-wake.json"), LambdaContextStub())
    finally:
        app.runner.cache_clear()
    assert (result["claimed"], result["stopped_by"]) == (0, "no-runner")
    counted = [(m.value, m.dims.get("queue")) for m in emitted(capsys.readouterr().out) if m.name == "NoTaskRunner"]
    assert counted == [(1, "work")]
    assert services.store.get(task_id).status is TaskStatus.PENDING
