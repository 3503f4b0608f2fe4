"""Workers racing for the same tasks on DynamoDB Local, where a conditional write is atomic as in DynamoDB
(plain moto is not under concurrent requests: it double-claims; see local/emulator/server.py).

8 threads, each with its own client and TaskStore, read the same queue heads (TaskStore.candidates) and race
to claim them (TaskStore.claim, one conditional UpdateItem from PENDING): every one of 500 tasks is claimed
exactly once, and the table agrees with what the winners were told.
"""

import threading
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from taskqueue.core.clock import SystemClock
from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.core.settings import Settings
from taskqueue.core.states import TaskStatus
from taskqueue.store import TaskStore
from tests import dynamodb_local
from tests.support import create_queue_table

pytestmark = pytest.mark.dynamodb_local_only

WORKERS = 8
TASKS = 500


@pytest.fixture
def settings():
    admin = dynamodb_local.client()
    name = f"race-{uuid.uuid4().hex[:8]}"
    create_queue_table(admin, name)
    yield Settings(queue_table_name=name, page_size=10)
    admin.delete_table(TableName=name)


def test_eight_workers_claim_500_tasks_each_exactly_once(settings):
    clock = SystemClock()
    tasks = new_tasks(parse_create_request({"count": TASKS}, settings), clock.now_ms(), settings)
    TaskStore(dynamodb_local.client(), settings, clock).put_tasks(tasks)
    # One client per worker, made here: creating boto3 clients is not thread-safe, using one is.
    stores = [TaskStore(dynamodb_local.client(max_pool_connections=4), settings, clock) for _ in range(WORKERS)]
    barrier = threading.Barrier(WORKERS)

    def work(index: int) -> tuple[list[str], int]:
        store, owner = stores[index], f"worker-{index}"
        won: list[str] = []
        lost = 0
        barrier.wait()
        while candidates := store.candidates("work", 10):
            for candidate in candidates:
                task = store.claim(candidate, owner)
                if task is None:
                    lost += 1
                else:
                    assert task.task_id == candidate.task_id and task.lease_owner == owner
                    won.append(task.task_id)
        return won, lost

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        results = list(pool.map(work, range(WORKERS)))

    claims = Counter(task_id for won, _ in results for task_id in won)
    assert set(claims) == {t.task_id for t in tasks}, "some tasks were never claimed"
    assert [task_id for task_id, n in claims.items() if n > 1] == [], "tasks claimed more than once"
    assert sum(claims.values()) == TASKS
    assert sum(lost for _, lost in results) > 0, "no claim was ever lost: the workers did not race"
    # The table says the same: each task TAKEN once (one attempt) by the worker that was told it won.
    owner_of = {task_id: f"worker-{i}" for i, (won, _) in enumerate(results) for task_id in won}
    reader = stores[0]
    for task in tasks:
        stored = reader.get(task.task_id)
        assert (stored.status, stored.attempts, stored.lease_owner) == (TaskStatus.TAKEN, 1, owner_of[task.task_id])
