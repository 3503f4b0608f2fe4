import random
import threading

import pytest

from taskqueue.errors import ConfigError, RunnerBusy
from taskqueue.model import Task
from taskqueue.runner import FakeLegacySystem, LegacySystemError, load_runner
from taskqueue.states import TaskStatus
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


@pytest.mark.parametrize("spec,message", [("no.such.module:run", "cannot import"), ("taskqueue.runner:nothing", "no callable")])
def test_load_runner_errors_name_the_setting(spec, message):
    with pytest.raises(ConfigError, match=f"TASK_RUNNER='{spec}'.*{message}"):
        load_runner(spec)
