"""The real ProcessTasks, killed between claim and finish on the local engine: the task is still done once.

A test-only layer adds a runner that ends its process (``os._exit``) the first time it sees a task, after
the task was claimed: the execution environment dies with the lease held, as a Lambda crash or timeout
would leave it. The lease expires, the safety-net schedule (or the async retry) recovers the task, and
the next invocation completes it; the queue-wide running limit's one slot, which the dead invocation held, lapses
with the lease, so the retry may run. The runner records every run in a file, so "exactly once" is checked
on what actually ran, not on what the table says.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.e2e.conftest import invocations, table_items

pytestmark = pytest.mark.e2e

CRASH_RUNNER = '''
import os
from pathlib import Path


def run(task):
    ledger = Path(task.payload["ledger"])
    with ledger.open("a") as f:
        f.write(f"{task.task_id} attempt={task.attempts}\\n")
    if task.attempts == 1:
        os._exit(137)  # the execution environment dies: no outcome recorded, the lease stays held
    return {"completedAtAttempt": task.attempts}
'''


def with_crash_layer(tmp_path: Path):
    layer = tmp_path / "crashlayer"
    # Under python/, where Lambda looks in a layer built without a BuildMethod (the engine refuses a layer's root).
    (layer / "python").mkdir(parents=True)
    (layer / "python" / "crash_runner.py").write_text(CRASH_RUNNER)

    def edit(text: str) -> str:
        text = text.replace(
            "  QueueTable:\n",
            "  CrashLayer:\n    Type: AWS::Serverless::LayerVersion\n    Properties:\n      ContentUri: crashlayer/\n\n"
            "  QueueTable:\n",
            1,
        )
        # The shortest lease and Timeout a worker accepts, so recovery is seen within seconds: the template's floors
        # are lowered in the copy (a worker's claim holds a lease of at least its Timeout, 16 s here).
        for parameter, floor in (("LeaseSeconds", 1), ("ProcessTasksTimeout", 16)):
            text, lowered = re.subn(rf"(\n  {parameter}:\n(?:    .*\n)*?    MinValue: )\d+", rf"\g<1>{floor}", text, count=1)
            assert lowered == 1, parameter
        # ProcessTasksTimeout takes its values from a list (the template's Rules compare it with DefaultRunSeconds):
        # 16 joins it; DefaultRunSeconds 1 fits every timeout, so no rule refuses the pair.
        text, listed = re.subn(r"(\n  ProcessTasksTimeout:\n(?:    .*\n)*?    AllowedValues: \[)", r"\g<1>16, ", text, count=1)
        assert listed == 1
        return text.replace(
            "      Layers:\n        - !Ref RunnerLayer\n",
            "      Layers:\n        - !Ref RunnerLayer\n        - !Ref CrashLayer\n",
            1,
        )

    return edit


def test_killed_worker_task_is_completed_exactly_once_and_its_running_limit_slot_comes_back(
        start_engine, template_copy, tmp_path):
    template = template_copy(with_crash_layer(tmp_path))
    engine = start_engine(
        {
            "TaskRunner": "crash_runner:run",
            "LeaseSeconds": 1,
            "ProcessTasksTimeout": 16,
            "DefaultRunSeconds": 1,
            # One slot of the queue-wide running limit: the dead invocation held it; the retry runs only if it lapsed.
            "WorkRunningLimit": "1",
            "SafetyNetScheduleRate": "rate(1 minute)",
            "CreateTasksScheduleState": "DISABLED",
        },
        template=template,
        schedules=True,
        time_scale=0.1,  # the safety net every 6 s; the functions' clocks 10 times as fast (a 16 s lease in 1.6 s)
        scale_clocks=True,
    )
    ledger = tmp_path / "ledger.txt"
    created = engine.invoke("CreateTasksFunction", {"queue": "work", "count": 1, "payload": {"ledger": str(ledger)}})
    assert created.ok, created.error
    (task_id,) = created.result["taskIds"]

    assert engine.wait_for(lambda: engine.observer.outcome_of(task_id) == "SUCCESS", timeout=60), (
        engine.observer.outcome_of(task_id),
        ledger.read_text() if ledger.exists() else "no run",
        [(i["source"], i["ok"], i.get("error")) for i in invocations(engine, "ProcessTasksFunction")][:5],
    )
    runs = ledger.read_text().splitlines()
    assert runs == [f"{task_id} attempt=1", f"{task_id} attempt=2"]  # died once, completed once
    item = table_items(engine)[task_id]
    assert item["taskStatus"]["S"] == "SUCCESS" and item["attempts"]["N"] == "2"
    assert "lease of" in item.get("lastError", {}).get("S", "")
    # The crash really was an invocation that failed, not a handled error.
    process = invocations(engine, "ProcessTasksFunction")
    assert any(not i["ok"] for i in process), process
