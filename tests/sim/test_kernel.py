"""The kernel: one task at a time on virtual time, the same run for the same seed, kills at yield points,
deadlocks, locks held across a yield point and runaway schedules caught."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import Future
from typing import Any

import pytest

from sim.kernel import Deadlock, InvocationKilled, Kernel, LockHeldAcrossYield, RunawaySchedule
from sim.sync import SimLock, watched_locks


def _workload(kernel: Kernel, log: list[Any]) -> None:
    """Three invocations, each with two threads that sleep and send requests."""

    def worker(name: str) -> Any:
        def run() -> None:
            for step in range(3):
                kernel.sleep(kernel.rng.uniform(0, 0.01))
                kernel.request("svc.Op", lambda s=step: log.append((kernel.now_us, name, s)))

        return run

    def main(index: int) -> Any:
        def run() -> str:
            threads = kernel.current.invocation.threads  # type: ignore[union-attr]
            pending = [threads.start(worker(f"inv{index}.t{n}"), f"t{n}") for n in range(2)]
            while pending:
                threads.wait(pending, 1.0)
                pending = [f for f in pending if not f.done()]
            return f"done {index}"

        return run

    for index in range(3):
        kernel.invoke(main(index), f"inv{index}")


def _run(seed: int) -> tuple[list[Any], list[Any]]:
    kernel, log = Kernel(seed), []
    _workload(kernel, log)
    kernel.run()
    assert kernel.trace is not None
    return kernel.trace, log


def test_the_same_seed_gives_the_same_run_step_for_step() -> None:
    first, second = _run(7), _run(7)
    assert first == second
    assert len(first[0]) > 40 and len(first[1]) == 18


def test_another_seed_gives_another_interleaving() -> None:
    assert _run(7)[1] != _run(8)[1]


def test_time_moves_only_when_every_task_is_parked() -> None:
    kernel = Kernel(1)
    seen: list[float] = []

    def busy() -> None:
        total = sum(range(10_000))  # work without a yield point takes no virtual time
        seen.append(kernel.now)
        kernel.sleep(2.5)
        seen.append(kernel.now)
        assert total

    kernel.invoke(busy)
    kernel.run()
    assert seen == [0.0, 2.5]


def test_a_wait_ends_at_its_timeout_or_when_a_future_completes() -> None:
    kernel = Kernel(2)
    ended: dict[str, float] = {}

    def main() -> None:
        threads = kernel.current.invocation.threads  # type: ignore[union-attr]
        never: Future[None] = Future()
        threads.wait([never], 3.0)
        ended["timeout"] = kernel.now
        slow = threads.start(lambda: kernel.sleep(1.0), "slow")
        threads.wait([slow], 10.0)
        ended["future"] = kernel.now

    kernel.invoke(main)
    kernel.run()
    assert ended == {"timeout": 3.0, "future": 4.0}


def test_a_killed_invocation_stops_at_its_next_yield_point_and_others_go_on() -> None:
    kernel = Kernel(3)
    events: list[str] = []

    def doomed() -> None:
        try:
            while True:
                try:
                    kernel.sleep(1.0)
                except Exception:  # the product's broad handlers do not stop a kill
                    events.append("caught")
                events.append(f"tick {kernel.now:.0f}")
        finally:
            events.append("finally")
            kernel.sleep(0.1)  # a yield point in a finally block raises again
            events.append("never")

    def survivor() -> None:
        kernel.sleep(10.0)
        events.append("survivor done")

    victim = kernel.invoke(doomed, "doomed")
    kernel.invoke(survivor, "survivor")
    kernel.call_at(3.5, lambda: kernel.kill(victim, "timeout"))
    kernel.run()
    assert events == ["tick 1", "tick 2", "tick 3", "finally", "survivor done"]
    assert isinstance(victim.future.exception(), InvocationKilled)
    assert not isinstance(victim.future.exception(), Exception)


def test_a_kill_after_a_request_applied_keeps_the_write_and_loses_the_answer() -> None:
    kernel = Kernel(4)
    applied: list[int] = []
    answers: list[int] = []

    def main() -> None:
        answers.append(kernel.request("svc.Write", lambda: applied.append(1) or 1, before_s=0.001, after_s=5.0))

    invocation = kernel.invoke(main)
    kernel.call_at(1.0, lambda: kernel.kill(invocation))
    kernel.run()
    assert applied == [1] and answers == []


def test_threads_left_running_when_the_main_task_ends_are_frozen_and_named() -> None:
    kernel = Kernel(5)

    def main() -> None:
        kernel.current.invocation.threads.start(lambda: kernel.sleep(60), "straggler")  # type: ignore[union-attr]

    invocation = kernel.invoke(main, "inv")
    kernel.run()
    assert invocation.leftovers == ["inv/straggler#1"] and invocation.done and kernel.now < 60


def test_a_deadlock_names_the_tasks_that_wait_forever() -> None:
    kernel = Kernel(6)
    first: Future[None] = Future()
    second: Future[None] = Future()
    kernel.invoke(lambda: kernel.wait([first], None), "a")
    kernel.invoke(lambda: kernel.wait([second], None), "b")
    with pytest.raises(Deadlock, match=r"waiting forever: a \(at wait\), b \(at wait\)"):
        kernel.run()


def test_a_lock_held_across_a_yield_point_fails_the_run_naming_the_task() -> None:
    kernel = Kernel(7)
    lock = SimLock(kernel)

    def careless() -> None:
        with lock:
            kernel.sleep(1.0)

    kernel.invoke(careless, "careless")
    with pytest.raises(LockHeldAcrossYield, match="careless reached a yield point \\(sleep\\) holding <SimLock held by careless"):
        kernel.run()


def test_the_products_locks_are_the_kernels_while_watched() -> None:
    import taskqueue.store.unmarked_leases as module

    kernel = Kernel(8)
    with watched_locks(kernel):
        made = module.threading.Lock()
        assert isinstance(made, SimLock)
        assert module.threading.current_thread is threading.current_thread  # every other name is the real one
    assert module.threading is threading


def test_a_busy_loop_runs_out_of_its_step_budget() -> None:
    kernel = Kernel(9, step_budget=1_000)

    def spin() -> None:
        while True:
            kernel.sleep(0)

    kernel.invoke(spin, "spinner")
    with pytest.raises(RunawaySchedule, match="spinner"):
        kernel.run()


def test_run_until_stops_the_clock_there_and_close_unwinds_every_task() -> None:
    kernel = Kernel(10)
    ended: list[str] = []

    def forever() -> None:
        try:
            while True:
                kernel.sleep(1.0)
        finally:
            ended.append("unwound")

    kernel.invoke(forever)
    kernel.run(until=5.5)
    assert kernel.now == 5.5 and kernel.tasks
    kernel.close()
    assert ended == ["unwound"] and not kernel.tasks


def test_randomness_and_ids_are_the_seeds_inside_the_kernel_and_real_after() -> None:
    def draw(seed: int) -> tuple[str, float]:
        with Kernel(seed):
            import random

            return str(uuid.uuid4()), random.Random().random()

    assert draw(11) == draw(11) and draw(11) != draw(12)
    assert uuid.uuid4() != uuid.uuid4()


def test_a_wait_for_the_last_sliver_of_a_deadline_lets_time_pass() -> None:
    with Kernel(1) as kernel:
        deadline = kernel.clock.monotonic() + 0.01 + 3e-7  # ends between two microseconds
        waits: list[float] = []

        def loop() -> None:
            while (left := deadline - kernel.clock.monotonic()) > 0:
                waits.append(left)
                kernel.wait([Future()], min(left, 0.004))

        kernel.invoke(loop, "main")
        kernel.run()
        assert len(waits) < 10 and kernel.now >= 0.01
