"""Long tasks on the local engine, with the functions' clocks scaled like the platform's (``scale_clocks``: a 900 s
Timeout passes in 900 x time_scale real seconds, a 300 s run in 300 x time_scale): a 5-minute task finishes exactly
once under a 900 s Timeout; a 20-minute task is refused at creation; progress a runner reports reaches the table's
stream and the task, and wakes nothing."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import invocations, table_items

pytestmark = pytest.mark.e2e

SCALE = 1 / 30  # a 300 s run in 10 s, a 900 s Timeout in 30 s

PROGRESS_RUNNER = '''
import time

from taskqueue.work.progress import report_progress


def run(task):
    steps = task.payload["steps"]
    for step in range(1, steps + 1):
        time.sleep(task.payload["step_seconds"])  # the work (the function's clock: scaled on the local engine)
        report_progress(100 * step / steps, f"step {step} of {steps}")
    return {"steps": steps}
'''


class StreamRecords:
    """Every record of the queue table's stream (what any stream consumer sees, before Trigger's filter)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def consume(self, records: list[dict[str, Any]]) -> None:
        with self._lock:
            self.records += records

    def of(self, task_id: str) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.records
                    if (r["dynamodb"].get("NewImage") or r["dynamodb"].get("OldImage") or {}).get("taskId", {}).get("S") == task_id]


def watch_stream(engine) -> StreamRecords:
    seen = StreamRecords()
    engine.readers[engine.template.resolver.attrs["QueueTable.StreamArn"]].consumers.append(seen.consume)
    return seen


def test_a_five_minute_task_finishes_exactly_once_with_a_900_s_timeout(start_engine):
    engine = start_engine(
        {"ProcessTasksTimeout": 900, "FakeRunnerDurationSeconds": 300, "RunnerCapacity": 1, "TimeBudgetSeconds": 60,
         "CreateTasksScheduleState": "DISABLED"},
        time_scale=SCALE, scale_clocks=True,
    )
    created = engine.invoke("CreateTasksFunction", {"queue": "work", "runSeconds": 330})
    assert created.ok, created.error
    (task_id,) = created.result["taskIds"]
    assert engine.wait_for(lambda: engine.observer.outcome_of(task_id) == "SUCCESS", timeout=60), (
        engine.observer.outcome_of(task_id), invocations(engine, "ProcessTasksFunction"))
    item = table_items(engine)[task_id]
    assert item["attempts"]["N"] == "1" and item["runSeconds"]["N"] == "330"
    assert engine.observer.tasks[task_id].claims == 1  # claimed once, never recovered and run again
    assert "lastError" not in item
    # The invocation that ran it outlived the run: no timeout, no error; the claim's lease outlasted the invocation.
    process = invocations(engine, "ProcessTasksFunction")
    assert process and all(i["ok"] and not i["timed_out"] for i in process), process
    ran = next(i for i in process if (i["result"] or {}).get("succeeded"))
    assert ran["result"]["claimed"] == 1 and ran["result"]["too_long"] == 0
    assert ran["duration"] >= 300 * SCALE  # five minutes of the function's (scaled) time


def test_a_twenty_minute_task_is_refused_at_creation_and_nothing_is_written(start_engine):
    engine = start_engine({"ProcessTasksTimeout": 900, "CreateTasksScheduleState": "DISABLED"})
    twenty = engine.invoke("CreateTasksFunction", {"queue": "work", "runSeconds": 1200})
    assert not twenty.ok and twenty.error["errorType"] == "InvalidField"
    assert "runSeconds must be a whole number from 1 to 900, got 1200" in twenty.error["errorMessage"]
    past_timeout = engine.invoke("CreateTasksFunction", {"queue": "work", "runSeconds": 890})
    assert not past_timeout.ok and "leaves 885 s" in past_timeout.error["errorMessage"]
    assert table_items(engine) == {}


def test_progress_reaches_the_stream_and_the_task_and_wakes_nothing(start_engine, template_copy, tmp_path: Path):
    layer = tmp_path / "progresslayer"
    (layer / "python").mkdir(parents=True)
    (layer / "python" / "progress_runner.py").write_text(PROGRESS_RUNNER)
    template = template_copy(lambda text: text.replace(
        "  QueueTable:\n",
        "  ProgressLayer:\n    Type: AWS::Serverless::LayerVersion\n    Properties:\n      ContentUri: progresslayer/\n\n"
        "  QueueTable:\n", 1,
    ).replace("      Layers:\n        - !Ref RunnerLayer\n", "      Layers:\n        - !Ref RunnerLayer\n        - !Ref ProgressLayer\n", 1))
    engine = start_engine({"TaskRunner": "progress_runner:run", "CreateTasksScheduleState": "DISABLED",
                           "TimeBudgetSeconds": 60},
                          template=template, time_scale=SCALE, scale_clocks=True)
    stream = watch_stream(engine)
    # 20 steps of 1.5 s: a report every 1.5 s, written at most every 5 s (taskqueue/progress.py).
    created = engine.invoke("CreateTasksFunction", {"queue": "work", "runSeconds": 40,
                                                    "payload": {"steps": 20, "step_seconds": 1.5}})
    assert created.ok, created.error
    (task_id,) = created.result["taskIds"]
    assert engine.wait_for(lambda: engine.observer.outcome_of(task_id) == "SUCCESS", timeout=60)
    assert engine.wait_for(lambda: not engine.busy(), timeout=30)
    progress = [r["dynamodb"]["NewImage"] for r in stream.of(task_id)
                if r["eventName"] == "MODIFY" and r["dynamodb"]["NewImage"]["taskStatus"]["S"] == "TAKEN"
                and "progress" in r["dynamodb"]["NewImage"]]
    values = [float(image["progress"]["N"]) for image in progress]
    assert values == sorted(values) and values[0] == 5.0, values  # the first report is written at once
    assert 3 <= len(values) <= 30 * 1.5 / 5 + 2, values  # 20 reports, about one write per 5 s of the 30 s run
    assert progress[0]["progressMessage"]["S"] == "step 1 of 20"
    item = table_items(engine)[task_id]
    assert item["taskStatus"]["S"] == "SUCCESS" and float(item["progress"]["N"]) == values[-1]
    # The TaskStream filter passes the task's INSERT only: the progress writes started nothing.
    mapping = next(m for m in engine.mappings if m.function == "ProcessTasksFunction")
    assert mapping.stats["records_delivered"] == 1, mapping.stats
