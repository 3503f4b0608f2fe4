import random
import threading

import pytest

from taskqueue.core.errors import ConfigError, RunnerBusy
from taskqueue.core.model import Task
from taskqueue.core.settings import Settings
from taskqueue.core.states import TaskStatus
from taskqueue.work.runner import FakeLegacySystem, LegacySystemError, build_runner, load_runner
from tests.support import FakeClock

TASK = Task("t", "work", TaskStatus.TAKEN, 0, 0, 0, 0, 0, attempts=1)


def test_fake_takes_its_duration_on_the_clock():
    clock = FakeClock()
    before = clock.monotonic()
    assert FakeLegacySystem(3, 15, clock=clock)(TASK) == {"processedBy": "fake-legacy-system"}
    assert clock.monotonic() - before == 15


def test_fake_refuses_above_capacity():
    release = threading.Event()
    started = threading.Barrier(3)

    class BlockingClock(FakeClock):
        def sleep(self, seconds):
            started.wait()
            release.wait(5)

    fake = FakeLegacySystem(2, 1, clock=BlockingClock())
    threads = [threading.Thread(target=fake, args=(TASK,)) for _ in range(2)]
    for t in threads:
        t.start()
    started.wait()
    with pytest.raises(RunnerBusy, match="capacity \\(2 tasks at once\\)"):
        fake(TASK)
    release.set()
    for t in threads:
        t.join()
    assert fake.peak_in_flight == 2 and fake.in_flight == 0


def test_failure_rate_is_honoured():
    fake = FakeLegacySystem(1, 0, failure_rate=0.3, clock=FakeClock(), rng=random.Random(7))
    failures = 0
    for _ in range(2000):
        try:
            fake(TASK)
        except LegacySystemError:
            failures += 1
    assert 500 < failures < 700


def test_load_runner_imports_module_callable():
    assert load_runner("taskqueue.runner:fake_legacy_system").__name__ == "fake_legacy_system"


@pytest.mark.parametrize("spec,message", [("no.such.module:run", "there is no module 'no.such.module'.*put it in runner/"),
                                          ("taskqueue.work.runner:nothing", "no callable named 'nothing'.*fix the part after ':'")])
def test_load_runner_errors_name_the_setting(spec, message):
    with pytest.raises(ConfigError, match=f"TASK_RUNNER='{spec}'.*{message}"):
        load_runner(spec)


def test_the_fake_runner_is_built_from_the_settings_handed_in():
    settings = Settings(queue_table_name="t", task_runner="taskqueue.runner:fake_legacy_system", runner_capacity=7,
                        fake_runner_duration_seconds=2, fake_runner_failure_rate=0.25)
    runner = build_runner(settings)
    assert isinstance(runner, FakeLegacySystem)
    assert (runner.capacity, runner.duration_seconds, runner.failure_rate) == (7, 2, 0.25)


def plain_runner(task: Task) -> dict:
    return {"ran": task.task_id}


def test_a_runner_that_is_no_factory_is_used_as_it_is():
    assert build_runner(Settings(queue_table_name="t", task_runner=f"{__name__}:plain_runner")) is plain_runner
