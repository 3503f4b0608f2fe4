"""Operator operations against moto: cancel, reprioritize, touch, redrive; peek, list, stats.

Each operation has its allowed source states and refuses every other one with a message naming the
task's actual state; each is one conditional write that names the source state."""

from typing import Any

import pytest

from taskqueue.core.errors import ConditionFailed, InvalidPageToken, InvalidTaskInput, InvalidTransition, TaskNotFound
from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.core.states import TaskStatus
from taskqueue.store import TaskStore
from tests.conftest import make_settings

TABLE_KEY = "taskId"


def create(store: TaskStore, clock, n: int = 1, **body: Any) -> list:
    tasks = new_tasks(parse_create_request({"count": n, **body}, store.settings), clock.now_ms(), store.settings)
    store.put_tasks(tasks, idempotent="taskIds" in body)
    return tasks


def one(store, clock, **body) -> str:
    return create(store, clock, **body)[0].task_id


def take(store, queue="work", owner="worker-1"):
    return store.claim(store.candidates(queue, 1)[0], owner)


def in_state(store, clock, status: TaskStatus, **body) -> str:
    """A task brought to ``status`` through the real transitions."""
    if status is TaskStatus.WAITING:  # a workflow's task waiting for its dependency (docs/workflows.md)
        from tests.workflow_support import create as create_workflow
        from tests.workflow_support import workflow_body

        name = f"wf-{len(store.candidates('work', 1000))}-{clock.now_ms()}"
        create_workflow(store, clock, workflow_body(name, [{"key": "a"}, {"key": "b", "dependsOn": ["a"]}]))
        return f"{name}/b"
    task_id = one(store, clock, **({"ttlSeconds": 1, **body} if status is TaskStatus.SHED else body))
    if status is TaskStatus.PENDING:
        return task_id
    if status is TaskStatus.SHED:
        clock.advance(2)  # past its ttl: the next reader that meets it sheds it
        store.candidates(body.get("queue", "work"), 100)
        assert store.get(task_id).status is TaskStatus.SHED
        return task_id
    if status is TaskStatus.CANCELLED:
        store.cancel(task_id)
        return task_id
    queue = body.get("queue", "work")
    candidate = next(c for c in store.candidates(queue, 100, shed=False) if c.task_id == task_id)
    task = store.claim(candidate, "worker-1")
    if status is TaskStatus.SUCCESS:
        assert store.complete(task, "worker-1")
    elif status is TaskStatus.FAILURE:
        assert store.fail(task, "worker-1", "boom")
    return task_id


def raw(dynamodb, store, task_id) -> dict:
    return dynamodb.get_item(TableName=store.settings.queue_table_name, Key={TABLE_KEY: {"S": task_id}})["Item"]


def ids(tasks) -> list[str]:
    return [t.task_id for t in tasks]


# ---- which state each operation accepts --------------------------------------------------------

ALLOWED = {
    "cancel": {TaskStatus.PENDING, TaskStatus.WAITING},
    "reprioritize": {TaskStatus.PENDING},
    "touch": {TaskStatus.PENDING},
    "redrive": {TaskStatus.FAILURE, TaskStatus.CANCELLED},
}


def run_op(store, name, task_id):
    if name == "reprioritize":
        return store.reprioritize(task_id, 7)
    return getattr(store, name)(task_id)


@pytest.mark.parametrize("operation", sorted(ALLOWED))
@pytest.mark.parametrize("status", list(TaskStatus))
def test_each_operation_acts_only_on_its_source_states(store, clock, operation, status):
    task_id = in_state(store, clock, status)
    before = store.get(task_id)
    if status in ALLOWED[operation]:
        after = run_op(store, operation, task_id)
        assert after.status is (TaskStatus.CANCELLED if operation == "cancel" else TaskStatus.PENDING)
    else:
        with pytest.raises(InvalidTransition) as refused:
            run_op(store, operation, task_id)
        message = str(refused.value)
        assert f"cannot {operation} task {task_id!r}: it is {status}" in message
        assert " or ".join(sorted(ALLOWED[operation])) in message
        assert store.get(task_id) == before  # nothing written


def test_unknown_task_is_task_not_found(store):
    for operation in ALLOWED:
        with pytest.raises(TaskNotFound, match="no task 'ghost'"):
            run_op(store, operation, "ghost")


# ---- cancel ------------------------------------------------------------------------------------


def test_cancel_leaves_the_ready_index_and_enters_the_cancelled_partition(store, clock, dynamodb):
    task_id = one(store, clock, delaySeconds=30)
    clock.advance(5)
    cancelled = store.cancel(task_id)
    assert cancelled.status is TaskStatus.CANCELLED
    # A dead letter: kept for the dead-letter retention (14 days), not the 1 day of a success.
    assert cancelled.delete_at == clock.now_ms() // 1000 + store.settings.dead_letter_retention_seconds
    item = raw(dynamodb, store, task_id)
    assert "readyKey" not in item and "readySort" not in item and "notBefore" not in item
    assert item["statusKey"]["S"] == "work#CANCELLED#0" and item["statusSort"]["N"] == str(clock.now_ms())
    assert store.candidates("work", 10) == [] and store.peek("work") is None
    assert store.dead_letters("work", TaskStatus.CANCELLED) == [task_id]


def test_a_cancelled_task_can_not_be_claimed_by_a_stale_candidate(store, clock):
    task_id = one(store, clock)
    candidate = store.candidates("work", 1)[0]
    store.cancel(task_id)
    assert store.claim(candidate, "worker-1") is None
    assert store.get(task_id).status is TaskStatus.CANCELLED


def test_cancel_of_a_task_claimed_meanwhile_is_refused_by_the_condition(store, clock, dynamodb):
    task_id = one(store, clock)
    real_get = store.get
    pending = real_get(task_id)
    # The read happens, then a worker claims, then cancel writes: the source-state condition refuses it.
    calls = []

    def racing_get(tid):
        calls.append(tid)
        if len(calls) == 1:
            take(store)
            return pending
        return real_get(tid)

    store.get = racing_get
    with pytest.raises(ConditionFailed, match="it was PENDING, it is TAKEN now"):
        store.cancel(task_id)
    store.get = real_get
    assert store.get(task_id).status is TaskStatus.TAKEN


# ---- reprioritize ------------------------------------------------------------------------------


def test_reprioritize_moves_a_task_ahead_and_keeps_its_age(store, clock):
    older = one(store, clock, priority=1)
    clock.advance(1)
    newer = one(store, clock, priority=1)
    assert store.peek("work").task_id == newer
    moved = store.reprioritize(older, 5)
    assert moved.priority == 5 and moved.enqueued_ms == moved.created_ms
    assert ids(store.candidates("work", 10)) == [older, newer]
    store.reprioritize(older, 0)
    assert ids(store.candidates("work", 10)) == [newer, older]


def test_reprioritize_validates_the_priority_before_any_write(store, clock):
    task_id = one(store, clock)
    for bad in (-1, 1000, "5", True):
        with pytest.raises(InvalidTaskInput, match="priority must be a whole number from 0 to 999"):
            store.reprioritize(task_id, bad)


def test_reprioritize_and_touch_refuse_an_expired_pending_task(store, clock):
    task_id = one(store, clock, ttlSeconds=10)
    clock.advance(11)
    for operation in ("reprioritize", "touch"):
        with pytest.raises(InvalidTransition, match=r"ttl passed .* \(it is shed\)"):
            run_op(store, operation, task_id)
    assert store.cancel(task_id).status is TaskStatus.CANCELLED  # cancelling shed work is harmless


# ---- touch -------------------------------------------------------------------------------------


def test_touch_puts_a_task_where_a_new_one_would_go(store, clock):
    lifo_old = one(store, clock)
    fifo_old = one(store, clock, queue="calls")
    clock.advance(1)
    lifo_new = one(store, clock)
    fifo_new = one(store, clock, queue="calls")
    clock.advance(1)
    assert store.peek("work").task_id == lifo_new and store.peek("calls").task_id == fifo_old
    touched = store.touch(lifo_old)
    assert touched.enqueued_ms == clock.now_ms() and touched.created_ms < touched.enqueued_ms
    store.touch(fifo_old)
    # LIFO: the touched task is now the newest, served first. FIFO: it is the newest, served last.
    assert ids(store.candidates("work", 10)) == [lifo_old, lifo_new]
    assert ids(store.candidates("calls", 10)) == [fifo_new, fifo_old]


def test_touch_keeps_priority_ttl_attempts_and_backoff(store, clock):
    task_id = one(store, clock, priority=3, ttlSeconds=100)
    task = take(store)
    store.release(task, "worker-1", not_before_ms=clock.now_ms() + 60_000, error="busy")
    clock.advance(1)
    touched = store.touch(task_id)
    assert (touched.priority, touched.ttl, touched.attempts, touched.not_before_ms, touched.last_error) == (
        3, task.ttl, 1, task.not_before_ms or clock.now_ms() - 1000 + 60_000, "busy"
    )
    assert store.candidates("work", 10) == []  # still in backoff


# ---- redrive -----------------------------------------------------------------------------------


def test_redrive_of_a_failed_task_resets_attempts_keeps_last_error_and_renews_ttl(store, clock, dynamodb):
    task_id = one(store, clock, maxAttempts=1, ttlSeconds=60)
    task = take(store)
    store.fail(task, "worker-1", "legacy system said no")
    assert store.dead_letters("work") == [task_id]
    clock.advance(3600)
    back = store.redrive(task_id)
    assert back.status is TaskStatus.PENDING and back.attempts == 0
    assert back.last_error == "legacy system said no"
    assert back.ttl == clock.now_ms() // 1000 + store.settings.default_ttl_seconds
    assert back.enqueued_ms == clock.now_ms() and back.lease_owner is None
    item = raw(dynamodb, store, task_id)
    assert "statusKey" not in item and item["readyKey"]["S"] == "work#0"
    assert store.dead_letters("work") == []
    again = take(store)
    assert again.task_id == task_id and again.attempts == 1


def test_redrive_of_a_cancelled_task_with_its_own_ttl(store, clock):
    task_id = in_state(store, clock, TaskStatus.CANCELLED)
    back = store.redrive(task_id, ttl_seconds=30)
    assert back.ttl == clock.now_ms() // 1000 + 30
    assert store.peek("work").task_id == task_id
    with pytest.raises(InvalidTaskInput, match="ttl_seconds"):
        store.redrive(in_state(store, clock, TaskStatus.CANCELLED), ttl_seconds=0)


def test_dead_letters_of_a_queue_are_listed_newest_first_and_only_that_queue(store, clock):
    failed = []
    for _ in range(3):
        failed.append(in_state(store, clock, TaskStatus.FAILURE))
        clock.advance(1)
    in_state(store, clock, TaskStatus.FAILURE, queue="calls")
    assert store.dead_letters("work") == list(reversed(failed))
    assert store.dead_letters("work", limit=2) == list(reversed(failed))[:2]
    with pytest.raises(InvalidTaskInput):
        store.dead_letters("work", TaskStatus.PENDING)


# ---- peek --------------------------------------------------------------------------------------


def test_peek_shows_the_next_task_without_claiming_it(store, clock):
    assert store.peek("work") is None
    one(store, clock, priority=1)
    clock.advance(1)
    best = one(store, clock, priority=2)
    clock.advance(1)
    one(store, clock, priority=2, delaySeconds=60)
    peeked = store.peek("work")
    assert peeked.task_id == best and peeked.status is TaskStatus.PENDING
    assert store.peek("work").task_id == best  # still there: peek claims nothing
    assert take(store).task_id == best


# ---- list --------------------------------------------------------------------------------------


def test_list_pending_in_serving_order_across_pages(store, clock):
    made = []
    for n in range(7):
        made.append(one(store, clock, priority=n % 2))
        clock.advance(1)
    expected = [t for t in reversed(made) if made.index(t) % 2 == 1] + [t for t in reversed(made) if made.index(t) % 2 == 0]
    seen, token = [], None
    while True:
        page = store.list_tasks("work", "PENDING", limit=3, page_token=token)
        assert len(page.tasks) <= 3
        seen += ids(page.tasks)
        token = page.next_token
        if token is None:
            break
    assert seen == expected


def test_list_by_status_newest_first_and_all_states(store, clock):
    failed_old = in_state(store, clock, TaskStatus.FAILURE)
    clock.advance(1)
    failed_new = in_state(store, clock, TaskStatus.FAILURE)
    clock.advance(1)
    cancelled = in_state(store, clock, TaskStatus.CANCELLED)
    taken = in_state(store, clock, TaskStatus.TAKEN)
    done = in_state(store, clock, TaskStatus.SUCCESS)
    waiting = one(store, clock)
    assert ids(store.list_tasks("work", "FAILURE").tasks) == [failed_new, failed_old]
    assert ids(store.list_tasks("work", TaskStatus.CANCELLED).tasks) == [cancelled]
    assert ids(store.list_tasks("work", "taken").tasks) == [taken]
    assert ids(store.list_tasks("work", "SUCCESS").tasks) == [done]
    everything = store.list_tasks("work")
    assert ids(everything.tasks) == [waiting, taken, failed_new, failed_old, cancelled]
    assert everything.next_token is None


def test_list_all_queues_pages_through_segments(store, clock):
    work = [one(store, clock) for _ in range(2)]
    calls = [one(store, clock, queue="calls") for _ in range(2)]
    first = store.list_tasks(None, "PENDING", limit=3)
    second = store.list_tasks(None, "PENDING", limit=3, page_token=first.next_token)
    assert sorted(ids(first.tasks) + ids(second.tasks)) == sorted(work + calls)
    assert len(first.tasks) == 3 and second.next_token is None


def test_list_success_by_scan_pages_until_the_end(store, clock):
    done = []
    for _ in range(5):
        done.append(in_state(store, clock, TaskStatus.SUCCESS))
        clock.advance(1)
    in_state(store, clock, TaskStatus.SUCCESS, queue="calls")
    seen, token = [], None
    for _ in range(10):
        page = store.list_tasks("work", "SUCCESS", limit=2, page_token=token)
        seen += ids(page.tasks)
        token = page.next_token
        if token is None:
            break
    assert sorted(seen) == sorted(done) and len(seen) == 5


def test_list_merges_shards_newest_first(dynamodb, topics, clock):
    store = TaskStore(dynamodb, make_settings(topics, queue_shards=4), clock)
    made = []
    for n in range(12):
        made += [t.task_id for t in create(store, clock, taskIds=[f"task-{n:02d}"])]
        clock.advance(1)
    seen, token = [], None
    while True:
        page = store.list_tasks("work", "PENDING", limit=5, page_token=token)
        seen += ids(page.tasks)
        if not (token := page.next_token):
            break
    assert seen == list(reversed(made))


def test_list_refuses_bad_input(store):
    with pytest.raises(InvalidTaskInput, match="unknown state 'DONE'"):
        store.list_tasks("work", "DONE")
    with pytest.raises(InvalidPageToken, match="page token is not valid"):
        store.list_tasks("work", "PENDING", page_token="garbage!")
    with pytest.raises(InvalidTaskInput, match="queue 'nope' is not configured"):
        store.list_tasks("nope")
    with pytest.raises(InvalidTaskInput, match="limit"):
        store.list_tasks("work", limit=0)


# ---- stats -------------------------------------------------------------------------------------


def test_stats_counts_states_and_waiting_ages_without_scanning(store, clock, dynamodb):
    oldest = one(store, clock)  # noqa: F841
    clock.advance(10)
    one(store, clock, delaySeconds=600)
    one(store, clock, ttlSeconds=5)
    clock.advance(20)
    one(store, clock)
    in_state(store, clock, TaskStatus.TAKEN)
    in_state(store, clock, TaskStatus.FAILURE)
    in_state(store, clock, TaskStatus.CANCELLED)
    in_state(store, clock, TaskStatus.SUCCESS)
    clock.advance(1)

    scans = []
    real_scan = dynamodb.scan

    def counting_scan(**kwargs):
        scans.append(kwargs)
        return real_scan(**kwargs)

    dynamodb.scan = counting_scan
    calls, work = store.stats()
    assert scans == []
    assert work.queue == "work" and calls.queue == "calls"
    assert work.counts == {"PENDING": 4, "TAKEN": 1, "FAILURE": 1, "CANCELLED": 1}
    assert (work.claimable, work.delayed, work.expired) == (2, 1, 1)
    assert work.oldest_waiting_ms == 31_000 and work.newest_waiting_ms == 1_000
    assert calls.counts == {"PENDING": 0, "TAKEN": 0, "FAILURE": 0, "CANCELLED": 0}
    assert calls.oldest_waiting_ms is None
    (with_success,) = store.stats(["work"], include_success=True)
    assert with_success.counts["SUCCESS"] == 1 and len(scans) >= 1
