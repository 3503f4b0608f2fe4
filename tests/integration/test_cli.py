"""The operator CLI through its entry point ``main(argv)`` against moto."""

import json
from typing import Any

import boto3
import pytest

from taskq.main import build_parser, main
from taskqueue.core.states import TaskStatus
from taskqueue.store import TaskStore
from tests.conftest import TABLE, make_settings

BASE = ["--table-name", TABLE]


@pytest.fixture(autouse=True)
def no_local_stack(tmp_path, monkeypatch):
    """A local stack someone runs in this checkout (`make up`) must not become these tests' target."""
    monkeypatch.setenv("TASKQ_LOCAL_STACK_FILE", str(tmp_path / "no-local-stack.json"))



@pytest.fixture
def cli(dynamodb, topics, capsys):
    """Run the CLI; returns (exit status, stdout, stderr)."""

    def run(*argv: str) -> tuple[int, str, str]:
        status = main([*BASE, *argv])
        out, err = capsys.readouterr()
        return status, out, err

    return run


def as_json(cli, *argv: str, **kwargs: Any) -> Any:
    status, out, err = cli(*argv, "--json", **kwargs)
    assert status == 0, err
    return json.loads(out)


def real_store(dynamodb) -> TaskStore:
    return TaskStore(dynamodb, make_settings())


def test_every_command_has_help(capsys):
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    assert set(commands) == {
        "stats", "list", "show", "peek", "create", "cancel", "reprioritize", "touch", "redrive", "agents",
        "failed-events",  # tests/integration/test_cli_failed_events.py
        "pause", "resume", "purge", "retry-all", "watch",  # tests/integration/test_cli_operator_tools.py
        "board",  # tests/board/
        "groups", "group",  # tests/integration/test_cli_groups.py
    }
    for name in commands:
        with pytest.raises(SystemExit) as done:
            main([name, "--help"])
        assert done.value.code == 0
        assert "--table-name" in capsys.readouterr().out


def test_create_show_peek_and_list(cli):
    made = as_json(cli, "create", "--count", "2", "--priority", "5", "--payload", '{"job": 1}')
    assert made["created"] == 2 and made["queue"] == "work"
    low = as_json(cli, "create", "--input", '{"queue": "work", "priority": 1}')["taskIds"][0]
    first = made["taskIds"][0]
    shown = as_json(cli, "show", first)
    assert shown["status"] == "PENDING" and shown["priority"] == 5 and shown["payload"] == {"job": 1}
    assert as_json(cli, "peek", "work")["next"]["priority"] == 5
    listed = as_json(cli, "list", "--queue", "work", "--state", "pending")
    assert [t["priority"] for t in listed["tasks"]] == [5, 5, 1] and listed["tasks"][-1]["taskId"] == low
    status, out, _ = cli("list", "--queue", "work")
    assert status == 0 and "TASK ID" in out.splitlines()[0] and low in out


def test_list_paginates_with_the_printed_token(cli):
    as_json(cli, "create", "--count", "5")
    page = as_json(cli, "list", "--queue", "work", "--limit", "2")
    seen = [t["taskId"] for t in page["tasks"]]
    while page["nextToken"]:
        page = as_json(cli, "list", "--queue", "work", "--limit", "2", "--page-token", page["nextToken"])
        seen += [t["taskId"] for t in page["tasks"]]
    assert len(seen) == len(set(seen)) == 5
    status, out, _ = cli("list", "--queue", "work", "--limit", "2")
    assert "more: add --page-token " in out


def test_idempotent_create_with_task_ids(cli):
    first = as_json(cli, "create", "--task-id", "order-1", "--task-id", "order-2")
    again = as_json(cli, "create", "--task-id", "order-1")
    assert (first["created"], again["created"], again["alreadyExisted"]) == (2, 0, 1)


def test_cancel_reprioritize_touch(cli):
    a, b = as_json(cli, "create", "--count", "2")["taskIds"]
    assert as_json(cli, "reprioritize", a, "9")["priority"] == 9
    assert as_json(cli, "peek", "work")["next"]["taskId"] == a
    touched = as_json(cli, "touch", b)
    assert touched["status"] == "PENDING"
    status, out, _ = cli("cancel", a)
    assert status == 0 and out.strip() == f"cancelled {a}: now CANCELLED, priority 9"
    assert as_json(cli, "list", "--state", "CANCELLED")["tasks"][0]["taskId"] == a


def test_refused_operation_is_one_line_and_exit_1(cli):
    task_id = as_json(cli, "create")["taskIds"][0]
    cli("cancel", task_id)
    status, out, err = cli("touch", task_id)
    assert status == 1 and out == ""
    assert err.strip() == (
        f"taskq: error: cannot touch task {task_id!r}: it is CANCELLED, and only a PENDING task can be touched "
        "(it was cancelled; redrive it first)"
    )
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "argv, message",
    [
        (["show", "nope"], "no task 'nope'"),
        (["peek", "unknown-queue"], "queue 'unknown-queue' is not configured"),
        (["create", "--priority", "1000"], "priority must be a whole number from 0 to 999"),
        (["create", "--payload", "{bad"], "--payload is not valid JSON"),
        (["list", "--page-token", "zzz"], "page token is not valid"),
        (["redrive"], "name one task"),
        (["redrive", "--all"], "--all needs --queue"),
    ],
)
def test_expected_errors_exit_1_with_a_clear_line(cli, argv, message):
    status, _, err = cli(*argv)
    assert status == 1 and message in err and err.startswith("taskq: error: ")


def test_missing_table_names_the_way_out(aws, capsys, monkeypatch):
    monkeypatch.delenv("QUEUE_TABLE_NAME", raising=False)
    monkeypatch.delenv("TASKQ_STACK_NAME", raising=False)
    assert main(["stats"]) == 1
    assert "pass --stack-name NAME or --table-name NAME" in capsys.readouterr().err
    assert main(["--table-name", "absent", "stats", "--no-shed"]) == 1
    assert "table 'absent' (or its index) does not exist" in capsys.readouterr().err


def test_usage_error_exits_2(cli):
    with pytest.raises(SystemExit) as done:
        cli("list", "--state", "DONE")
    assert done.value.code == 2


def test_stats_table_and_json(cli, dynamodb):
    as_json(cli, "create", "--count", "3")
    as_json(cli, "create", "--queue", "calls", "--delay-seconds", "600")
    stats = {s["queue"]: s for s in as_json(cli, "stats")["stats"]}
    assert stats["work"]["counts"] == {"PENDING": 3, "TAKEN": 0, "FAILURE": 0, "CANCELLED": 0}
    assert stats["calls"]["delayed"] == 1 and stats["work"]["claimable"] == 3
    assert stats["work"]["shed"] == 0  # CloudWatch TasksShed sum (none published in moto)
    status, out, _ = cli("stats")
    lines = out.splitlines()
    assert status == 0 and lines[0].split()[:3] == ["QUEUE", "PENDING", "CLAIMABLE"]
    assert any(line.startswith("work ") and " 3 " in line for line in lines)


def test_redrive_one_puts_the_task_back_and_publishes_nothing(cli, dynamodb, topics):
    store = real_store(dynamodb)
    task_id = as_json(cli, "create", "--max-attempts", "1")["taskIds"][0]
    task = store.claim(store.candidates("work", 1)[0], "w")
    store.fail(task, "w", "legacy said no")
    result = as_json(cli, "redrive", task_id)
    assert result == {"redriven": [task_id], "refused": []}
    assert topics.wakeups() == []  # its write into PENDING reaches the table's stream, which starts the worker
    again = store.get(task_id)
    assert again.status is TaskStatus.PENDING and again.attempts == 0 and again.last_error == "legacy said no"
    status, _, err = cli("redrive", task_id)
    assert status == 1 and "it is PENDING, and only a CANCELLED or FAILURE task can be redriven" in err


def test_redrive_all_dead_letters_of_a_queue(cli, dynamodb, topics):
    store = real_store(dynamodb)
    dead = []
    for _ in range(3):
        task_id = as_json(cli, "create", "--max-attempts", "1")["taskIds"][0]
        store.fail(store.claim(store.candidates("work", 1)[0], "w"), "w", "boom")
        dead.append(task_id)
    as_json(cli, "create", "--queue", "calls", "--max-attempts", "1")
    store.fail(store.claim(store.candidates("calls", 1)[0], "w"), "w", "boom")
    listed = as_json(cli, "list", "--state", "FAILURE", "--queue", "work")["tasks"]
    assert sorted(t["taskId"] for t in listed) == sorted(dead)
    # Kept for DeadLetterRetentionSeconds (14 days), and the listing says until when.
    task = store.get(dead[0])
    assert task.delete_at - task.updated_ms // 1000 == 14 * 86400
    assert as_json(cli, "show", dead[0])["keptUntil"] is not None
    status, out, _ = cli("redrive", "--all", "--queue", "work")
    assert status == 0 and out.count("redriven ") == 3
    assert sorted(c.task_id for c in store.candidates("work", 10)) == sorted(dead)
    assert store.dead_letters("calls") != []
    status, out, _ = cli("redrive", "--all", "--queue", "work")
    assert status == 0 and "has no FAILURE tasks" in out and topics.wakeups() == []


def test_stack_name_resolves_outputs_and_parameters(aws, dynamodb, topics, capsys):
    cfn = boto3.client("cloudformation")
    template = {
        "Parameters": {"QueueShards": {"Type": "String", "Default": "1"}},
        "Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
        "Outputs": {
            "QueueTableName": {"Value": TABLE},
        },
    }
    cfn.create_stack(StackName="taskqueue", TemplateBody=json.dumps(template))
    assert main(["--stack-name", "taskqueue", "create", "--json"]) == 0
    task_id = json.loads(capsys.readouterr().out)["taskIds"][0]
    assert main(["show", task_id, "--stack-name", "taskqueue"]) == 0
    assert "PENDING" in capsys.readouterr().out
    assert main(["--stack-name", "nope", "stats"]) == 1
    assert "cannot read stack 'nope'" in capsys.readouterr().err


def test_agents_without_an_agent_table_says_what_to_pass(cli):
    status, _, err = cli("agents")
    assert status == 1 and "no agent table" in err


def test_create_writes_the_tasks_alone(cli, topics):
    status, out, _ = cli("create", "--count", "2")
    assert status == 0 and out.startswith("created 2 task(s) in queue 'work'") and len(out.splitlines()) == 3
    assert as_json(cli, "create", "--queue", "calls")["wakeup"] == "stream"
    assert topics.wakeups() == []  # the table's stream starts the workers
