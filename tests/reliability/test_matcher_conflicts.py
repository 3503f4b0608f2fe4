"""8 matchers at once with transaction conflicts injected, on the serialized moto server: no agent is given
twice, no queue entry is orphaned, no matcher run fails.

The call center of tests/matcher_load.py (500 calls, 50 of them impatient, 200 agents with mixed profiles) and
its checks: every committed transaction replayed in commit order (each match took a queued agent, the head of
the caller's queue), and the final tables (entries exactly those of queued agents, every call matched, waiting
or shed, each busy agent on exactly one call). The emulator answers 30 % of the match transactions as DynamoDB
answers a transaction that meets another one in flight (TransactionCanceledException, reason TransactionConflict
on one item; 30 %: a match transaction holds 12-13 matches, so a run of 200 matches sends few of them), and 5 % of
single-item writes (the shared plan's chunks published, taken and finished; dead-letter claims) with
TransactionConflictException. A matcher run that ends with work left (it gave up
pairs after lost races) is followed by another, as its tail call would.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator

import pytest

from local.faults.faults import Faults
from taskqueue.core.states import TaskStatus
from tests.matcher_load import check_final_state, make_world, replay, run_matchers, scan
from tests.reliability.support import record_figures
from tests.serialized_moto import SerializedMoto

pytestmark = pytest.mark.reliability

CONFLICTS = Faults(seed=41, dynamodb_errors=[
    {"share": 0.30, "codes": ["TransactionConflictException"], "per": "request", "operations": ["TransactWriteItems"]},
    {"share": 0.05, "codes": ["TransactionConflictException"], "per": "request",
     "operations": ["UpdateItem", "PutItem", "DeleteItem"]},
])
LEASE_SECONDS = 5


@pytest.fixture(scope="module")
def server() -> Iterator[SerializedMoto]:
    with SerializedMoto(record_transactions=True) as running:
        yield running


def taken_calls(world) -> int:
    return sum(1 for item in scan(world.server.client(faults=False), world.settings.queue_table_name)
               if item.get("taskStatus", {}).get("S") == TaskStatus.TAKEN.value)


def test_eight_matchers_with_conflicts_injected_give_no_agent_twice(server):
    server.set_faults({})
    world = make_world(server, agents=200, calls=500, seed=7, shed=50, name="conflicts")
    world.settings = dataclasses.replace(world.settings, lease_seconds=LEASE_SECONDS)
    server.set_faults(CONFLICTS)
    started = time.monotonic()
    reports = []
    rounds = 0
    while rounds < 20:
        rounds += 1
        round_reports, _ = run_matchers(world, 8)  # a matcher run that raised would raise here: none may
        reports += round_reports
        stuck = taken_calls(world)
        if not any(r.work_remains for r in round_reports) and stuck == 0:
            break
        if stuck:  # a call left TAKEN (a release that lost every conflict retry): back after its lease
            time.sleep(LEASE_SECONDS + 0.5)
    seconds = time.monotonic() - started
    fault_report = server.fault_report()
    server.set_faults({})  # the checks read with faults off
    replayed = replay(world, matchers=8)
    outcome = check_final_state(world)
    matched = sum(r.matched for r in reports)
    assert replayed["matches"] == matched == outcome["matched"] == replayed["agents_matched"]
    assert outcome["shed"] == 50 and outcome["matched"] + outcome["waiting"] + outcome["shed"] == 500
    injected = fault_report["errors"]["refused_requests"]
    assert injected.get("dynamodb:TransactWriteItems:TransactionConflictException", 0) > 0
    assert sum(r.conflicts for r in reports) > 0  # the matchers met them and took them as lost races
    record_figures("matchers_with_conflicts", {
        "fault": CONFLICTS.describe(), "matchers": 8, "calls": 500, "agents": 200, "rounds": rounds,
        "matcher_runs": len(reports), "runs_failed": 0, "seconds": round(seconds, 1),
        "conflicts_injected": injected, "match_conflicts_met": sum(r.conflicts for r in reports),
        "gave_up": sum(r.gave_up for r in reports), "claims_lost": sum(r.lost for r in reports),
        "matched": matched, "waiting": outcome["waiting"], "shed": outcome["shed"],
        "agents_given_twice": 0, "orphan_entries": 0,
        "rerun": ".venv/bin/python -m pytest -q tests/reliability/test_matcher_conflicts.py",
    })
