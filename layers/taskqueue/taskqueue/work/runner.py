"""The task runner: the protocol, the loader for TASK_RUNNER, and the fake legacy system.

A runner is any callable taking one Task. Returning means the attempt succeeded (a returned dict is
kept as the task's result); raising means it failed: ``PermanentTaskError`` sends the task straight to
FAILURE, any other exception is retried with backoff until the task's attempts are used up.

TASK_RUNNER names such a callable, or a *runner factory* (marked with ``@runner_factory``) that takes the
function's ``Settings`` and returns one: the handler hands its settings in (``build_runner``), so nothing here
reads the environment.
"""

from __future__ import annotations

import importlib
import random
import threading
from collections.abc import Callable, MutableMapping
from typing import Any

from taskqueue.core.clock import Clock, SystemClock
from taskqueue.core.errors import ConfigError, RunnerBusy, TaskQueueError
from taskqueue.core.model import Task
from taskqueue.core.settings import Settings

TaskRunner = Callable[[Task], Any]
RunnerFactory = Callable[[Settings], TaskRunner]
_FACTORY_MARK = "_taskqueue_runner_factory"


class LegacySystemError(TaskQueueError):
    """The fake legacy system failed this attempt (transient: the task will be retried)."""


# Where a team's runner lives (README "Run your own work"): runner/ at the repository root, which `sam build` turns
# into the RunnerLayer (its code and requirements.txt under python/, on the function's import path).
_WHERE = "runner/ (the RunnerLayer; README \"Run your own work\")"


def load_runner(spec: str) -> TaskRunner:
    """Import ``module:callable`` (the TASK_RUNNER setting); a ConfigError says what is wrong and what to fix."""
    module_name, _, attribute = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if module_name == missing or module_name.startswith(missing + "."):
            raise ConfigError(
                f"TASK_RUNNER={spec!r}: there is no module {module_name!r} on the function's path ({exc}): put it in "
                f"{_WHERE}, or fix the TaskRunner parameter"
            ) from exc
        raise ConfigError(
            f"TASK_RUNNER={spec!r}: module {module_name!r} needs {missing!r}, which is not installed: add it to "
            "runner/requirements.txt (sam build installs it into the RunnerLayer)"
        ) from exc
    except Exception as exc:  # noqa: BLE001 - any error of the module's own code at import, reported as such
        raise ConfigError(
            f"TASK_RUNNER={spec!r}: importing {module_name!r} failed: {type(exc).__name__}: {exc} (fix the runner's "
            "module-level code, or give it what it reads there, e.g. RunnerEnvironment)"
        ) from exc
    runner = getattr(module, attribute, None)
    if not callable(runner):
        names = sorted(n for n in vars(module) if not n.startswith("_") and callable(getattr(module, n)))
        raise ConfigError(
            f"TASK_RUNNER={spec!r}: {module_name} has no callable named {attribute!r} (its callables: "
            f"{', '.join(names[:10]) or 'none'}): fix the part after ':' in the TaskRunner parameter"
        )
    return runner


def apply_runner_environment(settings: Settings, environ: MutableMapping[str, str]) -> None:
    """Put RUNNER_ENVIRONMENT's variables into the process environment (before the runner is imported, which may
    read them at import); a variable the function's own configuration already sets is left as it is."""
    for name, value in settings.runner_environment.items():
        environ.setdefault(name, value)


def runner_factory(factory: RunnerFactory) -> RunnerFactory:
    """Mark ``factory`` as building a runner from the Settings (for a runner that needs configuration)."""
    setattr(factory, _FACTORY_MARK, True)
    return factory


def build_runner(settings: Settings) -> TaskRunner:
    """The runner TASK_RUNNER names, built from ``settings`` when it names a runner factory."""
    loaded = load_runner(settings.task_runner)
    return loaded(settings) if getattr(loaded, _FACTORY_MARK, False) else loaded


class FakeLegacySystem:
    """A throughput-limited downstream system: ``capacity`` tasks at once, each taking ``duration`` seconds.

    Above capacity it refuses with RunnerBusy, which a well-behaved worker never sees because it claims
    a task only when it has a free slot.
    """

    def __init__(
        self,
        capacity: int,
        duration_seconds: float,
        failure_rate: float = 0.0,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.capacity = capacity
        self.duration_seconds = duration_seconds
        self.failure_rate = failure_rate
        self._clock = clock or SystemClock()
        self._rng = rng or random.Random()
        self._slots = threading.BoundedSemaphore(capacity)
        self._lock = threading.Lock()
        self.in_flight = 0
        self.peak_in_flight = 0

    def __call__(self, task: Task) -> dict[str, Any]:
        if not self._slots.acquire(blocking=False):
            raise RunnerBusy(f"the legacy system is at capacity ({self.capacity} tasks at once)")
        with self._lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            self._clock.sleep(self.duration_seconds)
            with self._lock:
                failed = self._rng.random() < self.failure_rate
            if failed:
                raise LegacySystemError(f"the legacy system failed task {task.task_id} (attempt {task.attempts})")
            return {"processedBy": "fake-legacy-system"}
        finally:
            with self._lock:
                self.in_flight -= 1
            self._slots.release()


@runner_factory
def fake_legacy_system(settings: Settings) -> TaskRunner:
    """The demo's and the tests' TASK_RUNNER (no stack runs it unless asked): a FakeLegacySystem configured by
    RUNNER_CAPACITY and FAKE_RUNNER_*."""
    return FakeLegacySystem(
        settings.runner_capacity, settings.fake_runner_duration_seconds, settings.fake_runner_failure_rate
    )
