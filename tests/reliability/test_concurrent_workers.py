"""8 ProcessTasks workers at once over one queue, with the GSIs lagging, on the serialized moto server. (Workers killed
between claim and finish are the simulation's: tests/sim/test_killed_workers.py, where the seed decides the kills.)

Each worker is a thread with its own client running Worker invocations (the real claim loop, leases and
heartbeats) one after another, as ProcessTasks invocations; the runner writes every run in a ledger. Checked on
what actually ran: no (task, attempt) ran twice, no task was lost, every task ends in exactly one final state and
was recorded done exactly once; a task ran again only after the invocation running it died, and then through the
expiry of its lease.

Task count: RELIABILITY_TASKS (default 300). The race is as dense at 300 tasks as at 1,000: 8 LIFO workers read the
same head, so every task meets about 7 lost claims whatever the count (2,082 lost claims over 300 tasks, 6,641
over 1,000), and a claim condition that lets a taken task be claimed again fails the first scenario at 300 tasks
(measured: "a task recorded done twice").
What a larger count adds is time only: 1,000 tasks took 120-250 s a scenario here (the one-lock moto server at
about 100 requests/s, 11.6 requests a task), 300 take 35-40 s. RELIABILITY_TASKS=1000 (or 2000) for a longer run
(docs/reliability.md has the figures of those).
"""

from __future__ import annotations

import os
import uuid
from collections import Counter
from collections.abc import Callable, Iterator

import pytest

from local.emulator.server import Emulator
from local.faults.faults import Faults
from taskqueue.core.settings import Settings
from tests.reliability.support import Ledger, create_tasks, record_figures, run_fleet, scan_table, statuses
from tests.support import create_queue_table

pytestmark = pytest.mark.reliability

TASKS = int(os.environ.get("RELIABILITY_TASKS", "300"))
WORKERS = 8
CAPACITY = 4
INDEX_LAG = 0.5  # seconds: ReadyIndex and StatusIndex answer from the table as it was this long ago
LAG = Faults(seed=11, index_lag=INDEX_LAG, index_lag_indexes=("ReadyIndex", "StatusIndex"))


@pytest.fixture(scope="module")
def server() -> Iterator[Emulator]:
    with Emulator(faults=LAG) as running:
        yield running


def new_queue(server: Emulator, lease_seconds: int) -> Settings:
    table = f"reliability-{uuid.uuid4().hex[:8]}"
    create_queue_table(server.client(faults=False), table)
    return Settings(queue_table_name=table, lease_seconds=lease_seconds, page_size=10, retry_base_seconds=0.0)


def every_task_done(ledger: Ledger, count: int) -> Callable[[], bool]:
    """Done once the ledger holds a recorded completion per task (no table scan: a scan of the table holds the
    server's one lock for long); the table is checked once at the end."""
    return lambda: len(ledger.completions_per_task()) >= count


def check_exactly_once(ledger: Ledger, items: dict, task_ids: list[str], killed: set[str]) -> dict[str, int]:
    """The ledger against the table. Returns the counts of the run."""
    per_attempt = ledger.runs_per_attempt()
    twice = {key: n for key, n in per_attempt.items() if n > 1}
    assert not twice, f"{len(twice)} (task, attempt) ran more than once: {list(twice.items())[:5]}"
    ran = {task_id for task_id, _ in per_attempt}
    assert ran == set(task_ids), f"{len(set(task_ids) - ran)} task(s) never ran (lost); {len(ran - set(task_ids))} unknown"
    assert set(items) == set(task_ids)
    final = Counter(item["taskStatus"]["S"] for item in items.values())
    assert final == Counter({"SUCCESS": len(task_ids)}), final
    completions = ledger.completions_per_task()
    assert set(completions) == set(task_ids) and set(completions.values()) == {1}, "a task recorded done twice, or never"
    done_attempt = {task_id: attempt for task_id, attempt, _ in ledger.completions}
    reruns = 0
    for task_id, attempt, _owner in ledger.runs:
        item = items[task_id]
        assert int(item["attempts"]["N"]) == done_attempt[task_id], (task_id, item["attempts"], done_attempt[task_id])
        if attempt < done_attempt[task_id]:
            # An earlier attempt that did not finish: its invocation died, or (never expected here) its lease
            # lapsed while it ran. Either way it came back through lease expiry, which the task's lastError names.
            reruns += 1
            assert "lease of" in item.get("lastError", {}).get("S", ""), (task_id, item.get("lastError"))
    abandoned = {task_id for task_id, attempt, owner in ledger.runs if owner in killed and attempt < done_attempt[task_id]}
    return {"runs": len(ledger.runs), "reruns": reruns, "abandoned_by_killed_workers": len(abandoned)}


def test_eight_workers_with_index_lag_run_every_task_exactly_once(server):
    settings = new_queue(server, lease_seconds=10)
    task_ids = create_tasks(server, settings, TASKS)
    ledger = Ledger()
    requests_before = server.requests
    result = run_fleet(server, settings, ledger, every_task_done(ledger, TASKS), workers=WORKERS, capacity=CAPACITY,
                       budget_seconds=3.0, timeout=480)
    assert result.finished, f"not done after {result.seconds:.0f} s: {statuses(server, settings.queue_table_name)}"
    assert result.failed == [], result.failed[:3]
    counts = check_exactly_once(ledger, scan_table(server, settings.queue_table_name), task_ids, set())
    assert counts["reruns"] == 0, "a task ran twice without any worker dying (a lease lapsed under load)"
    lag = server.fault_report()["index_lag"]
    assert lag["lagged_reads"] > 0 and lag["items_shown_as_before"] > 0  # the lag was really on
    record_figures("eight_workers_index_lag", {
        "tasks": TASKS, "workers": WORKERS, "capacity": CAPACITY, "index_lag_seconds": INDEX_LAG,
        "seconds": round(result.seconds, 1), "tasks_per_second": round(TASKS / result.seconds, 1),
        "invocations": result.invocations, "claimed": result.total("claimed"), "claims_lost": result.total("lost"),
        "stale_entries_skipped": result.total("skipped"), "requests": server.requests - requests_before,
        "lagged_index_reads": lag["lagged_reads"], **counts,
        "executed_twice_for_one_attempt": 0, "lost": 0,
        "rerun": f"RELIABILITY_TASKS={TASKS} .venv/bin/python -m pytest -q tests/reliability/test_concurrent_workers.py"
                 "::test_eight_workers_with_index_lag_run_every_task_exactly_once",
    })
