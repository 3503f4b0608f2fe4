"""The engine's fault setting end to end: TTL that never deletes during the run, faults the engine refuses with an
external endpoint, and ``python -m local --faults``."""

from __future__ import annotations

import time

import pytest

from local.__main__ import main
from local.engine.engine import Engine
from local.faults.faults import NEVER, Faults
from tests.e2e.conftest import table_items

pytestmark = pytest.mark.e2e


def test_ttl_that_never_deletes_leaves_expired_tasks_to_the_claim_condition(start_engine):
    """DynamoDB deletes expired items "within a few days": with TTL never, expired tasks stay in the table and
    only the handlers' own rules (the claim condition, shedding at read) keep them from running."""
    engine = start_engine({"CreateTasksScheduleState": "DISABLED"}, faults=Faults(ttl_lateness=NEVER))
    created = engine.invoke("CreateTasksFunction", {"queue": "calls", "count": 3, "ttlSeconds": 1})
    assert created.ok, created.error
    time.sleep(3.5)  # past the ttl, and past the 1 s lateness the other e2e tests use
    items = table_items(engine)
    assert set(created.result["taskIds"]) <= set(items)
    assert engine.fault_report()["ttl"] == {"lateness_seconds": None, "deleted": 0}
    assert all(not s._thread.is_alive() for s in engine.sweepers)


def test_faults_inside_the_emulator_cannot_go_to_another_endpoint():
    with pytest.raises(ValueError, match="cannot be used with --endpoint-url"):
        Engine(endpoint_url="http://127.0.0.1:1", faults=Faults(index_lag=1))
    Engine(endpoint_url="http://127.0.0.1:1", faults=Faults(ttl_lateness=5))  # the engine's own sweeper: fine


def test_the_command_line_refuses_a_fault_setting_it_cannot_use(capsys):
    assert main(["invoke", "--faults", '{"index_lag": -1}', "trigger", "events/trigger-safety-net.json"]) == 2
    assert "faults: index_lag must be seconds" in capsys.readouterr().err


def test_the_command_line_injects_faults(capsys):
    code = main(["invoke", "--faults", '{"sns_publish_errors": {"share": 1}}', "trigger", "events/trigger-delayed-head.json"])
    captured = capsys.readouterr()
    # The delayed head's wake-up is refused every time: the invocation fails, so Scheduler would retry it.
    assert code == 1
    assert "could not publish a wake-up for queue 'work'" in captured.out and "KMSThrottling" in captured.out
