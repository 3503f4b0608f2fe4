"""`taskq create --group`, `taskq list --group`, `taskq groups` and `taskq group show / set / pause / resume`
(cli/taskq/group_commands.py) through the entry point, on both DynamoDB engines."""

from __future__ import annotations

import json
from typing import Any

import pytest

from taskq.main import main
from tests.conftest import TABLE

pytestmark = pytest.mark.dynamodb_engines

BASE = ["--table-name", TABLE]


@pytest.fixture(autouse=True)
def no_local_stack(tmp_path, monkeypatch):
    monkeypatch.setenv("TASKQ_LOCAL_STACK_FILE", str(tmp_path / "no-local-stack.json"))
    monkeypatch.setenv("GROUP_CONCURRENCY", "4")


@pytest.fixture
def cli(dynamodb, topics, capsys):
    def run(*argv: str) -> tuple[int, str, str]:
        status = main([*BASE, *argv])
        out, err = capsys.readouterr()
        return status, out, err

    return run


def as_json(cli, *argv: str) -> Any:
    status, out, err = cli(*argv, "--json")
    assert status == 0, err
    return json.loads(out)


def test_created_grouped_tasks_show_in_stats_listings_and_the_groups_table(cli):
    created = as_json(cli, "create", "--queue", "work", "--count", "3", "--group", "acme")
    as_json(cli, "create", "--queue", "work", "--count", "1", "--group", "globex")
    as_json(cli, "create", "--queue", "work", "--count", "1")
    (stats,) = [s for s in as_json(cli, "stats", "--no-shed")["stats"] if s["queue"] == "work"]
    assert (stats["counts"]["PENDING"], stats["groups"]) == (5, 2)
    listed = as_json(cli, "list", "--queue", "work", "--state", "PENDING", "--group", "acme")["tasks"]
    assert sorted(t["taskId"] for t in listed) == sorted(created["taskIds"]) and {t["group"] for t in listed} == {"acme"}
    status, out, _ = cli("list", "--queue", "work", "--group", "acme")
    assert status == 0 and "GROUP" in out.splitlines()[0] and "acme" in out
    status, _, err = cli("list", "--group", "acme")
    assert status == 1 and "--group needs --queue" in err
    groups = as_json(cli, "groups", "--queue", "work")["groups"][0]
    assert [(g["group"], g["waiting"], g["concurrency"]) for g in groups["groups"]] == [
        ("acme", 3, 4), ("default", 1, None), ("globex", 1, 4)]
    assert groups["complete"]
    status, out, _ = cli("groups", "--queue", "work")
    lines = out.splitlines()
    assert status == 0 and lines[1].split()[:2] == ["GROUP", "WAITING"] and lines[2].split()[:2] == ["acme", "3"]
    assert "noisiest first" in lines[0]


def test_a_groups_limits_pause_and_resume_from_the_command_line(cli, topics):
    as_json(cli, "create", "--queue", "work", "--group", "acme")
    shown = as_json(cli, "group", "set", "acme", "--queue", "work", "--concurrency", "2", "--rate", "10/2")
    assert (shown["concurrency"], shown["rate"], shown["own"]) == (2, {"claims": 10, "periodSeconds": 2.0},
                                                                    ["concurrency", "rate"])
    status, out, _ = cli("group", "show", "acme")
    assert status == 0 and "2 (own)" in out and "10/2s (own)" in out
    shown = as_json(cli, "group", "set", "acme", "--clear", "rate")
    assert (shown["rate"], shown["own"]) == (None, ["concurrency"])
    paused = as_json(cli, "group", "pause", "acme", "--retry-after", "120")
    assert paused["paused"] and paused["pausedUntil"]
    status, _, err = cli("group", "pause", "acme", "--until", "2099-01-01T00:00:00Z")
    assert status == 1 and "at most 30 days" in err
    topics.wakeups()
    resumed = as_json(cli, "group", "resume", "acme")
    assert not resumed["paused"] and resumed["pausedUntil"] is None


def test_bad_group_commands_are_refused_with_what_to_do(cli):
    status, _, err = cli("group", "set", "acme")
    assert status == 1 and "nothing to set" in err
    status, _, err = cli("group", "pause", "acme")
    assert status == 1 and "--for SECONDS" in err
    status, _, err = cli("group", "pause", "acme", "--until", "tomorrow")
    assert status == 1 and "ISO 8601" in err
    status, _, err = cli("group", "set", "default", "--concurrency", "1")
    assert status == 1 and "leave the group out" in err
    status, _, err = cli("group", "set", "acme", "--rate", "ten")
    assert status == 1 and "N/P" in err
    status, _, err = cli("create", "--group", "a#b")
    assert status == 1 and "group" in err
