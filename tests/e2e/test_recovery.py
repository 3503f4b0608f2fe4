"""A worker killed between claim and finish: the task is still completed exactly once.

Runs on the local engine's emulator (``local.emulator.server.Emulator``: moto's server behind one request lock,
so conditional writes are atomic under concurrency, unlike in-process moto) with Worker instances and an
injected FakeClock for lease expiry. Worker 1 claims and dies (its runner never returns to record an
outcome); after the lease passes, several recovering workers race in threads; exactly one runs and
completes the task; the dead worker's late finish is refused."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.core.states import TaskStatus
from taskqueue.store import TaskStore
from taskqueue.work.worker import Worker
from tests.conftest import make_settings
from tests.support import FakeClock, create_queue_table

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    from local.emulator.server import Emulator

    emulator = Emulator()
    url = emulator.start()
    try:
        yield url
    finally:
        emulator.stop()


class Killed(BaseException):
    """Stands for the process dying: not an Exception, so no outcome is recorded for the task."""


class CountingRunner:
    def __init__(self, kill_first: bool = False) -> None:
        self.runs: list[str] = []
        self._kill_first = kill_first
        self._lock = threading.Lock()

    def __call__(self, task: Any) -> dict[str, Any]:
        with self._lock:
            self.runs.append(task.task_id)
            if self._kill_first:
                self._kill_first = False
                raise Killed()
        return {"by": threading.current_thread().name}


def test_worker_killed_between_claim_and_finish_task_completed_exactly_once(endpoint):
    client = boto3.client("dynamodb", endpoint_url=endpoint)
    table = f"recovery-{random.randrange(10**9)}"
    create_queue_table(client, table)
    clock = FakeClock()
    settings = make_settings(queue_table_name=table, lease_seconds=30)
    store = TaskStore(client, settings, clock)
    tasks = new_tasks(parse_create_request({"count": 3}, settings), clock.now_ms(), settings)
    store.put_tasks(tasks)

    # Worker 1 claims one task, starts running it and is killed before it can record anything (the run
    # is driven step by step: Worker.run would go on claiming the other tasks on the frozen clock).
    doomed = CountingRunner(kill_first=True)
    claimed = store.claim(store.candidates("work", 1)[0], "worker-1")
    with pytest.raises(Killed):
        doomed(claimed)
    killed_id = claimed.task_id
    stuck = store.get(killed_id)
    assert stuck.status is TaskStatus.TAKEN and stuck.lease_owner == "worker-1"

    # Within the lease nobody may touch it.
    clock.advance(10)
    early = CountingRunner()
    Worker(store, early, capacity=1, owner="early", clock=clock).run("work", 5)
    assert killed_id not in early.runs and store.get(killed_id).status is TaskStatus.TAKEN

    # After the lease: four workers race (each its own client), recovery + claim are conditional writes.
    clock.advance(30)
    runners = [CountingRunner() for _ in range(4)]
    reports: list[Any] = []

    def work(n: int) -> None:
        own = TaskStore(boto3.client("dynamodb", endpoint_url=endpoint), settings, clock)
        reports.append(Worker(own, runners[n], capacity=1, owner=f"rescuer-{n}", clock=clock).run("work", 5))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    runs = [task_id for r in runners for task_id in r.runs]
    assert runs.count(killed_id) == 1, runs
    assert sum(r.recovered for r in reports) == 1
    done = store.get(killed_id)
    assert done.status is TaskStatus.SUCCESS and done.attempts == 2
    assert "lease of worker-1 expired" in (done.last_error or "")

    # The killed worker comes back and tries to finish: refused, the outcome stands.
    assert store.complete(stuck, "worker-1", {"late": True}) is False
    assert store.get(killed_id).result != {"late": True}
    # Every task completed, each exactly once over all runners (the killed attempt aside).
    for task in tasks:
        assert store.get(task.task_id).status is TaskStatus.SUCCESS
    assert sorted(early.runs + runs) == sorted(t.task_id for t in tasks)
