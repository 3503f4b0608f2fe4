"""The tenants scenario (issue 30): its file is valid, its arrivals are what it declares, and the figures (per group
done / shed / create -> claim p95, the runner's busy share, the targets) are computed right on hand-made records."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from local.engine.observer import Observer
from local.reports import tenants_report as f

SCENARIO = Path(__file__).resolve().parents[2] / "local" / "scenarios" / "tenants.json"


def scenario() -> dict:
    return json.loads(SCENARIO.read_text())


def test_the_scenario_file_is_valid_and_matches_the_issue():
    s = scenario()
    f.validate(s)
    overload = json.loads((SCENARIO.parent / "overload.json").read_text())
    assert s["ttl_seconds"] == overload["ttl_seconds"]  # TTL as the overload scenario's
    rates = dict(f.arrival_groups(s))
    capacity = s["runner"]["capacity"] / s["runner"]["duration_seconds"]
    noisy, quiet = rates.pop("noisy"), rates
    assert noisy == pytest.approx(10 * capacity)  # 10x the runner
    assert len(quiet) == 9
    share = capacity / 10  # a fair share of the runner among 10 groups
    assert all(rate < share / 2 for rate in quiet.values())  # "well under its share"


def test_arrivals_follow_each_groups_rate_and_are_deterministic():
    s = scenario() | {"duration_seconds": 2000}
    arrivals = f.arrivals(s, seed=3)
    assert arrivals == f.arrivals(s, seed=3)
    assert arrivals != f.arrivals(s, seed=4)
    counts = Counter()
    for when, group, n in arrivals:
        assert 0 < when <= 2000
        counts[group] += n
    assert counts["noisy"] / 2000 == pytest.approx(30, rel=0.03)
    for i in range(1, 10):
        assert counts[f"quiet-{i}"] / 2000 == pytest.approx(0.1, rel=0.25)
    # Adding a group leaves the others' arrivals as they were.
    more = s | {"groups": [*s["groups"], {"name": "extra", "arrival_per_second": 1}]}
    assert [a for a in f.arrivals(more, seed=3) if a[1] != "extra"] == arrivals


def test_the_figures_on_hand_made_records():
    R = f.TaskRecord
    records = [
        # quiet-1: 4 tasks, all done, waits 0.1 .. 0.4 s
        *(R("quiet-1", 1000 * i, 1000 * i + 100 * (i + 1), f.DONE) for i in range(4)),
        # quiet-2: 2 tasks, one done after 3 s, one shed unclaimed
        R("quiet-2", 0, 3000, f.DONE), R("quiet-2", 0, None, f.SHED),
        # noisy: 10 tasks, 2 done, 7 shed, 1 still waiting
        *(R("noisy", 0, 500, f.DONE) for _ in range(2)), *(R("noisy", 0, None, f.SHED) for _ in range(7)),
        R("noisy", 0, None, f.WAITING),
    ]
    runs = [(0, 1000), (500, 1500), (9000, 11000)]  # 1 + 1 + 1 (clipped at 10 s) runner seconds in the window
    out = f.figures(records, runs, (0, 10_000), 3, ["noisy"])
    g = out["groups"]
    assert g["quiet-1"] == {"created": 4, "done": 4, "shed": 0, "done_share": 1.0, "shed_share": 0.0,
                            "claim_p50_s": 0.2, "claim_p95_s": 0.4, "claimed": 4}
    assert g["quiet-2"]["done_share"] == 0.5 and g["quiet-2"]["shed"] == 1 and g["quiet-2"]["claim_p95_s"] == 3.0
    assert g["noisy"]["done"] == 2 and g["noisy"]["shed"] == 7 and g["noisy"]["created"] == 10
    assert out["busy_share"] == pytest.approx(3 / 30)
    assert out["quiet"]["done_share"] == pytest.approx(5 / 6)
    assert out["quiet"]["worst_group_done_share"] == 0.5
    assert out["quiet"]["claim_p95_s"] == 3.0  # pooled quiet waits 0.1, 0.2, 0.3, 0.4, 3.0
    assert out["noisy"]["shed_share"] == 0.7
    assert out["targets"] == {"every_quiet_group_done_95": False, "quiet_claim_p95_2s": False,
                              "runner_busy_90": False, "noisy_shed_by_ttl": True}
    table = f.table({"with groups": out})
    assert "quiet-2" in table and "runner busy 10%" in table


def test_nearest_rank_and_busy_share_edges():
    assert f.nearest_rank(list(range(1, 101)), 0.95) == 95
    assert f.nearest_rank([], 0.95) is None
    assert f.busy_share([(0, 10_000)] * 3, (0, 10_000), 3) == 1.0
    assert f.busy_share([(-5000, 20_000)], (0, 10_000), 1) == 1.0
    assert f.busy_share([], (0, 0), 3) == 0.0


def test_the_observer_names_each_tasks_tenant_by_group_or_payload():
    obs = Observer()

    def insert(task_id, **extra):
        image = {"taskId": {"S": task_id}, "taskStatus": {"S": "PENDING"}, "taskCreated": {"N": "1000"}, **extra}
        obs.consume([{"eventName": "INSERT", "dynamodb": {"NewImage": image}}])

    insert("a", taskGroup={"S": "acme"}, payload={"S": '{"tenant":"other"}'})
    insert("b", payload={"S": '{"tenant":"quiet-3"}'})
    insert("c")
    obs.consume([{"eventName": "MODIFY", "dynamodb": {
        "OldImage": {"taskId": {"S": "b"}, "taskStatus": {"S": "PENDING"}},
        "NewImage": {"taskId": {"S": "b"}, "taskStatus": {"S": "TAKEN"}, "taskUpdated": {"N": "1700"}}}}])
    assert [obs.tasks[t].tenant for t in "abc"] == ["acme", "quiet-3", None]
    assert obs.tasks["b"].claimed_ms == [1700]
