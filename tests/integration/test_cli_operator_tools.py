"""`taskq pause / resume / purge / retry-all`, and what `list` says when only finished tasks exist, against moto."""

from __future__ import annotations

import json
from typing import Any

import pytest

from taskq import queue_commands
from taskq.main import main
from taskqueue.core.errors import InvalidTransition
from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.core.states import TaskStatus
from taskqueue.store import TaskStore
from taskqueue.work.worker import Worker
from tests.conftest import TABLE, make_settings

# The conditional deletes and transitions also run on DynamoDB Local (`make test`; docs/testing.md).
pytestmark = pytest.mark.dynamodb_engines


@pytest.fixture(autouse=True)
def no_local_stack(tmp_path, monkeypatch):
    """A local stack someone runs in this checkout (`make up`) must not become these tests' target."""
    monkeypatch.setenv("TASKQ_LOCAL_STACK_FILE", str(tmp_path / "no-local-stack.json"))


@pytest.fixture
def cli(dynamodb, topics, capsys):
    """Run the CLI against the moto table; returns (exit status, stdout, stderr)."""

    def run(*argv: str) -> tuple[int, str, str]:
        status = main(["--table-name", TABLE, *argv])
        out, err = capsys.readouterr()
        return status, out, err

    return run


@pytest.fixture
def asked(monkeypatch) -> list[str]:
    """Answer yes to purge's question, and record it."""
    questions: list[str] = []
    monkeypatch.setattr(queue_commands, "confirm", lambda question: questions.append(question) or True)
    return questions


def as_json(cli, *argv: str) -> Any:
    status, out, err = cli(*argv, "--json")
    assert status == 0, err
    return json.loads(out)


def store_of(dynamodb, clock=None) -> TaskStore:
    return TaskStore(dynamodb, make_settings(), clock)


def create(store: TaskStore, now_ms: int, n: int = 1, **body: Any) -> list[str]:
    tasks = new_tasks(parse_create_request({"count": n, **body}, store.settings), now_ms, store.settings)
    store.put_tasks(tasks)
    return [t.task_id for t in tasks]


def dead_letter(store: TaskStore, queue: str, n: int) -> list[str]:
    """``n`` tasks of ``queue`` that failed their only attempt."""
    ids = create(store, store._clock.now_ms(), n, queue=queue, maxAttempts=1)
    for _ in ids:
        task = store.claim(store.candidates(queue, 1)[0], "w")
        assert task is not None and store.fail(task, "w", "boom")
    return ids


def states(store: TaskStore, ids: list[str]) -> list[str]:
    found = {t.task_id: t.status.value for t in store._get_many(ids)}
    return [found.get(i, "gone") for i in ids]


# ---- pause / resume --------------------------------------------------------------------------------------------

def test_a_paused_queue_keeps_its_tasks_and_no_worker_claims_them(cli, dynamodb, topics, clock):
    store = store_of(dynamodb, clock)
    ids = create(store, clock.now_ms(), 2)
    before = {t.task_id: (t.ttl, t.enqueued_ms) for t in store._get_many(ids)}
    status, out, _ = cli("pause", "work")
    assert status == 0 and out.startswith("paused queue 'work': workers claim nothing from it")
    report = Worker(store, lambda task: None, capacity=1, owner="w1", clock=clock).run("work", 5)
    assert report.claimed == 0 and report.stopped_by == "paused"
    assert {t.task_id: (t.ttl, t.enqueued_ms) for t in store._get_many(ids)} == before
    assert states(store, ids) == ["PENDING", "PENDING"]

    stats = {s["queue"]: s for s in as_json(cli, "stats", "--no-shed")["stats"]}
    assert (stats["work"]["paused"], stats["calls"]["paused"]) == (True, False)
    status, out, _ = cli("stats", "--no-shed")
    lines = out.splitlines()
    assert lines[0].split()[-1] == "PAUSED" and lines[-1].startswith("paused: work")
    assert [line.split()[-1] for line in lines[1:3]] == ["no", "yes"]  # calls, work

    resumed = as_json(cli, "resume", "work")
    assert resumed == {"resumed": ["work"]} and topics.wakeups() == []
    # The resume's mark: its INSERT reaches the table's stream, which starts the worker for the waiting tasks.
    assert [i for i in dynamodb.scan(TableName=TABLE)["Items"] if i["taskId"]["S"].startswith("queue#work#resume#")]
    assert Worker(store, lambda task: None, capacity=1, owner="w1", clock=clock).run("work", 5).succeeded == 2


def test_stats_has_no_paused_column_while_nothing_is_paused(cli):
    status, out, _ = cli("stats", "--no-shed")
    assert status == 0 and "PAUSED" not in out and "paused:" not in out


def test_pausing_an_unknown_queue_names_the_known_ones(cli):
    status, _, err = cli("pause", "nope")
    assert status == 1 and "queue 'nope' is not configured; known queues: calls, work" in err


# ---- purge -----------------------------------------------------------------------------------------------------

def test_purge_asks_with_the_count_and_deletes_only_that_state_of_that_queue(cli, dynamodb, asked):
    store = store_of(dynamodb)
    failed = dead_letter(store, "work", 3)
    other_queue = dead_letter(store, "calls", 1)
    waiting = create(store, store._clock.now_ms(), 2)
    status, out, _ = cli("purge", "work", "--state", "failure")
    assert status == 0 and out.strip() == "purged 3 FAILURE task(s) of queue 'work'"
    assert asked == ["delete 3 FAILURE task(s) of queue 'work'? This cannot be undone. [y/N] "]
    assert states(store, failed) == ["gone"] * 3
    assert states(store, other_queue + waiting) == ["FAILURE", "PENDING", "PENDING"]


def test_purge_not_confirmed_deletes_nothing(cli, dynamodb, monkeypatch):
    store = store_of(dynamodb)
    ids = dead_letter(store, "work", 2)
    monkeypatch.setattr(queue_commands, "confirm", lambda question: False)
    status, out, err = cli("purge", "work", "--state", "FAILURE")
    assert status == 1 and out == "" and err.strip() == "taskq: error: purge not confirmed: nothing deleted"
    assert states(store, ids) == ["FAILURE", "FAILURE"]


def test_purge_without_a_terminal_needs_yes(cli, dynamodb):
    store = store_of(dynamodb)
    ids = create(store, store._clock.now_ms(), 3)
    status, _, err = cli("purge", "work", "--state", "PENDING")  # pytest's stdin is not a terminal
    assert status == 1 and "there is no terminal to ask on: pass --yes to confirm" in err
    assert states(store, ids) == ["PENDING"] * 3
    assert as_json(cli, "purge", "work", "--state", "PENDING", "--yes", "--limit", "2") == {
        "queue": "work", "state": "PENDING", "deleted": 2, "skipped": 0,
    }
    assert sorted(states(store, ids)) == ["PENDING", "gone", "gone"]
    assert as_json(cli, "stats", "--no-shed")["stats"][1]["counts"]["PENDING"] == 1


def test_purge_refuses_taken_tasks_before_asking(cli, dynamodb, monkeypatch):
    store = store_of(dynamodb)
    (task_id,) = create(store, store._clock.now_ms())
    assert store.claim(store.candidates("work", 1)[0], "w") is not None
    monkeypatch.setattr(queue_commands, "confirm", lambda question: pytest.fail("asked before refusing TAKEN"))
    status, _, err = cli("purge", "work", "--state", "TAKEN", "--yes")
    assert status == 1 and err.startswith("taskq: error: cannot purge TAKEN tasks: TAKEN tasks are being run by a worker")
    assert states(store, [task_id]) == ["TAKEN"]


def test_purge_of_finished_states_scans_and_says_so(cli, dynamodb, asked, clock):
    store = store_of(dynamodb, clock)
    (done,) = create(store, clock.now_ms())
    task = store.claim(store.candidates("work", 1)[0], "w")
    assert task is not None and store.complete(task, "w", {"ok": True})
    (late,) = create(store, clock.now_ms(), ttlSeconds=5)
    clock.advance(10)
    assert store.candidates("work", 1) == []  # the reader sheds the expired task: PENDING -> SHED
    assert states(store, [done, late]) == ["SUCCESS", "SHED"]
    assert as_json(cli, "purge", "work", "--state", "SHED")["deleted"] == 1
    assert asked[-1] == "delete 1 SHED task(s) of queue 'work' (SUCCESS and SHED are found by a table scan)? This cannot be undone. [y/N] "
    assert as_json(cli, "purge", "work", "--state", "SUCCESS")["deleted"] == 1
    assert states(store, [done, late]) == ["gone", "gone"]
    status, out, _ = cli("purge", "work", "--state", "CANCELLED")
    assert status == 0 and out.strip() == "queue 'work' has no CANCELLED tasks: nothing to purge"


def test_a_task_claimed_while_purging_is_skipped_not_deleted(dynamodb):
    store = store_of(dynamodb)
    ids = create(store, store._clock.now_ms(), 3)
    claimed: list[str] = []

    class ClaimFirst:
        """The table, where a worker claims the first task between the purge's listing and its delete."""

        def __getattr__(self, name: str) -> Any:
            real = getattr(dynamodb, name)
            if name != "delete_item":
                return real

            def delete_item(**kwargs: Any) -> Any:
                if not claimed:
                    candidate = next(c for c in store.candidates("work", 3) if c.task_id == kwargs["Key"]["taskId"]["S"])
                    assert store.claim(candidate, "worker") is not None
                    claimed.append(candidate.task_id)
                return real(**kwargs)

            return delete_item

    result = TaskStore(ClaimFirst(), store.settings).purge("work", TaskStatus.PENDING)
    assert (result.deleted, result.skipped) == (2, 1)
    assert states(store, claimed) == ["TAKEN"]
    assert sorted(states(store, ids)) == ["TAKEN", "gone", "gone"]
    with pytest.raises(InvalidTransition, match="cannot purge TAKEN tasks"):
        store.purge("work", "taken")


# ---- retry-all -------------------------------------------------------------------------------------------------

def test_retry_all_returns_every_queues_dead_letters_to_pending(cli, dynamodb, topics):
    store = store_of(dynamodb)
    work, calls = dead_letter(store, "work", 2), dead_letter(store, "calls", 1)
    result = as_json(cli, "retry-all")
    assert result == {"state": "FAILURE", "retried": {"calls": 1, "work": 2}, "refused": []}
    assert topics.wakeups() == []  # each write into PENDING reaches the table's stream, which starts the workers
    again = store._get_many(work + calls)
    assert {(t.status, t.attempts) for t in again} == {(TaskStatus.PENDING, 0)}
    status, out, _ = cli("retry-all", "--queue", "work")
    assert status == 0 and out.strip() == "retried 0 FAILURE task(s) of queue 'work': now PENDING, attempts reset"


def test_retry_all_cancelled(cli, dynamodb):
    store = store_of(dynamodb)
    (task_id,) = create(store, store._clock.now_ms())
    store.cancel(task_id)
    status, out, _ = cli("retry-all", "--state", "cancelled", "--queue", "work")
    assert status == 0 and "retried 1 CANCELLED task(s) of queue 'work'" in out
    assert states(store, [task_id]) == ["PENDING"]


# ---- list says what it looked at -------------------------------------------------------------------------------

def test_list_with_only_finished_tasks_says_where_they_are(cli, dynamodb, clock):
    store = store_of(dynamodb, clock)
    (done,) = create(store, clock.now_ms())
    task = store.claim(store.candidates("work", 1)[0], "w")
    assert task is not None and store.complete(task, "w", None)
    status, out, _ = cli("list")
    assert status == 0 and out.strip() == (
        "no PENDING, TAKEN, FAILURE or CANCELLED tasks in any queue; finished tasks are listed by name "
        "(--state SUCCESS or --state SHED: a table scan)"
    )
    assert [t["taskId"] for t in as_json(cli, "list", "--state", "SUCCESS")["tasks"]] == [done]
    status, out, _ = cli("list", "--queue", "calls", "--state", "FAILURE")
    assert out.strip() == "no FAILURE tasks in queue 'calls'"


def test_list_shows_shed_tasks_by_name(cli, dynamodb, clock):
    store = store_of(dynamodb, clock)
    (late,) = create(store, clock.now_ms(), ttlSeconds=5)
    clock.advance(10)
    store.candidates("work", 1)
    assert [t["taskId"] for t in as_json(cli, "list", "--state", "SHED", "--queue", "work")["tasks"]] == [late]
