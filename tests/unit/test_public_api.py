"""The names a team's code imports (README.md, docs/runner.md) stay importable as written, whatever package of the
layer holds them now: each is imported here the way a runner or an application does, in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# (import statement as a user writes it, a check that it is the real thing)
PUBLIC = [
    ("from taskqueue.client import TaskQueueClient", "TaskQueueClient.connect"),
    ("from taskqueue.errors import PermanentTaskError, TaskQueueError, WaitTimedOut, InvalidTaskInput, InvalidField",
     "issubclass(PermanentTaskError, Exception) and issubclass(InvalidField, InvalidTaskInput)"),
    ("from taskqueue.model import Task", "Task.__dataclass_fields__['task_id']"),
    ("from taskqueue.lease import extend_lease", "extend_lease.__call__"),
    ("from taskqueue.progress import report_progress", "report_progress(1) is False"),
    ("from taskqueue.runner import runner_factory, fake_legacy_system, load_runner",
     "load_runner('taskqueue.runner:fake_legacy_system') is fake_legacy_system"),
    ("import taskqueue.errors", "taskqueue.errors.PermanentTaskError"),
    ("from taskqueue import tracing", "tracing.headers() == {} and tracing.current() is None"),
    ("from taskqueue.tracing import span, headers, current, TraceContext", "TraceContext.__dataclass_fields__"),
]


def run_fresh(code: str) -> subprocess.CompletedProcess[str]:
    path = str(ROOT / "layers" / "taskqueue")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": path,
                          "AWS_DEFAULT_REGION": "us-east-1", "PATH": "/usr/bin:/bin"}, timeout=60)


@pytest.mark.parametrize(("statement", "check"), PUBLIC)
def test_a_public_name_imports_as_a_user_writes_it(statement: str, check: str) -> None:
    result = run_fresh(f"{statement}\nassert {check}\n")
    assert result.returncode == 0, result.stderr


def test_a_short_name_is_the_same_module_as_its_home() -> None:
    """One module, not a copy: a runner's PermanentTaskError is the one the worker catches."""
    code = (
        "import taskqueue.errors, taskqueue.core.errors, taskqueue.lease, taskqueue.work.lease\n"
        "assert taskqueue.errors is taskqueue.core.errors\n"
        "assert taskqueue.lease is taskqueue.work.lease\n"
        "from taskqueue.progress import report_progress\n"
        "from taskqueue.work.progress import report_progress as home\n"
        "assert report_progress is home\n"
    )
    result = run_fresh(code)
    assert result.returncode == 0, result.stderr


def test_an_unknown_short_name_is_refused() -> None:
    result = run_fresh("import taskqueue.worker\n")
    assert result.returncode != 0 and "ModuleNotFoundError" in result.stderr
