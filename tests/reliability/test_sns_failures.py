"""20 % of SNS publishes failing, on the local engine: no task is stranded, and a backlog drains within one
safety-net period plus one budget of the time it takes with SNS healthy.

The real functions run wired as template.yaml wires them (CreateTasks wakes an idle queue itself through
WorkerWakeUpTopic -> ProcessTasks -> tail call on WorkerWakeUpTopic -> ...; the stream -> Trigger and the safety
net as backstops). The tasks come in 25 requests 1.2 s apart and workers do not linger, so the queue goes idle
and is woken again and again: every wake-up is a publish. The emulator refuses a fifth of the Publish calls
with KMSThrottling, an error botocore does not retry: each refusal reaches the code. A refused wake-up is tried
again by the Notifier (bounded jittered backoff); a producer's wake-up still refused is withdrawn (the next
producer, the stream's Trigger or the safety net wakes the queue); a tail call still refused fails its
invocation, which Lambda retries (EventInvokeConfig MaximumRetryAttempts); a backstop's fails its Trigger
invocation, retried likewise.

Before the relay retried (Trigger's MaximumRetryAttempts 0, one publish attempt), 188 stranded tasks took 14
safety-net runs to drain with the same fault.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from local.engine.engine import REPO, Engine
from local.faults.faults import Faults
from local.scenarios.demo_defaults import RUNNER
from tests.reliability.support import record_figures

pytestmark = pytest.mark.reliability

TASKS = 300  # 100 per request
TIME_SCALE = 0.05  # the safety net's rate(1 minute) fires every 3 s; Lambda's async retries come 3 s and 6 s later
BUDGET = 1  # TimeBudgetSeconds: each ProcessTasks invocation claims for 1 s, then tail-calls if work remains
PARAMETERS = {
    "TimeBudgetSeconds": BUDGET,
    "RunnerCapacity": 2,  # with the running limit it sets (2), about 4 s of work: runs end at their budget and tail-call
    "FakeRunnerDurationSeconds": 0.025,
    "CreateTasksScheduleState": "DISABLED",
    "SafetyNetScheduleRate": "rate(1 minute)",
    **RUNNER,  # the fake legacy system (the template names no runner)
}
REQUESTS = 3  # TASKS come in this many CreateTasks invocations ...
REQUEST_GAP_SECONDS = 0.5  # ... this far apart
SNS_FAILING = Faults(seed=31, sns_publish_errors={"share": 0.20, "codes": ["KMSThrottling"], "per": "call"})


def drain(faults: Faults | None, log: Path) -> dict:
    """Start an engine, create TASKS at once, and time until every one of them succeeded."""
    engine = Engine(REPO / "template.yaml", PARAMETERS, time_scale=TIME_SCALE, schedules=True, faults=faults,
                    ttl_lateness=1.0, ttl_interval=0.5, log_file=log)
    try:
        engine.start()
        started = time.monotonic()
        for _ in range(REQUESTS):
            created = engine.invoke("CreateTasksFunction", {"queue": "work", "count": TASKS // REQUESTS})
            assert created.ok, created.error
            time.sleep(REQUEST_GAP_SECONDS)
        drained = engine.wait_for(lambda: engine.observer.counts()["SUCCESS"] >= TASKS, timeout=120, interval=0.1)
        seconds = time.monotonic() - started
        counts = engine.observer.counts()
        invocations = engine.invocations
        trigger = [i for i in invocations if i["function"] == "TriggerFunction"]
        process = [i for i in invocations if i["function"] == "ProcessTasksFunction"]
        report = engine.fault_report()
        refused = report.get("emulator", {}).get("errors", {}).get("refused_requests", {})
        figures = {
            "drained": drained, "seconds": round(seconds, 1), "succeeded": counts["SUCCESS"],
            "pending": counts["PENDING"], "taken": counts["TAKEN"], "failed": counts["FAILURE"],
            "publishes_refused": sum(refused.values()),
            "publishes_seen": sum(report.get("emulator", {}).get("errors", {}).get("requests_seen", {}).values()),
            "trigger_invocations": len(trigger),
            "trigger_failed": sum(1 for i in trigger if not i["ok"]),
            "trigger_async_retries": engine.invokers["TriggerFunction"].stats["retried"],
            "process_invocations": len(process),
            "process_failed": sum(1 for i in process if not i["ok"]),
            "tail_calls": sum(1 for i in process if (i.get("result") or {}).get("work_remains")),
            "safety_net_runs": sum(1 for i in trigger if i["source"] == "schedule"),
        }
    finally:
        engine.stop()
    text = log.read_text() if log.exists() else ""
    figures["notifier_retries"] = text.count("publish refused; trying again")
    return figures


def test_a_fifth_of_publishes_failing_strands_nothing_and_costs_at_most_a_safety_net_period(tmp_path):
    healthy = drain(None, tmp_path / "healthy.log")
    assert healthy["drained"], healthy
    faulty = drain(SNS_FAILING, tmp_path / "faulty.log")
    period = 60 * TIME_SCALE
    assert faulty["drained"], f"tasks stranded: {faulty}"
    assert faulty["pending"] == faulty["taken"] == faulty["failed"] == 0
    assert faulty["publishes_refused"] > 0 and faulty["notifier_retries"] > 0  # the fault really acted
    assert faulty["seconds"] <= healthy["seconds"] + period + BUDGET, (healthy, faulty)
    record_figures("sns_publishes_failing", {
        "fault": SNS_FAILING.describe(), "tasks": TASKS, "time_scale": TIME_SCALE,
        "safety_net_period_seconds": period, "budget_seconds": BUDGET,
        "target_seconds": round(healthy["seconds"] + period + BUDGET, 1), "healthy": healthy, "faulty": faulty,
        "stranded": 0,
        "rerun": ".venv/bin/python -m pytest -q tests/reliability/test_sns_failures.py",
    })


SNS_BURSTS = Faults(seed=37, sns_publish_errors={"share": 0.06, "codes": ["KMSThrottling"], "per": "call", "burst": 5})


def test_bursts_of_refused_publishes_fail_invocations_that_lambda_retries_and_strand_nothing(tmp_path):
    """Refusals in bursts of 5 outlast the Notifier's 4 attempts: the publish fails for good, the invocation that
    needed it fails (a tail call in ProcessTasks, a safety-net run), and what Lambda retries -- or the safety net --
    wakes the queue. Nothing is stranded; the time it costs is reported."""
    faulty = drain(SNS_BURSTS, tmp_path / "bursts.log")
    assert faulty["drained"], f"tasks stranded: {faulty}"
    assert faulty["pending"] == faulty["taken"] == faulty["failed"] == 0
    record_figures("sns_publishes_failing_in_bursts", {
        "fault": SNS_BURSTS.describe(), "tasks": TASKS, "time_scale": TIME_SCALE, "faulty": faulty, "stranded": 0,
        "rerun": ".venv/bin/python -m pytest -q tests/reliability/test_sns_failures.py"
                 "::test_bursts_of_refused_publishes_fail_invocations_that_lambda_retries_and_strand_nothing",
    })
