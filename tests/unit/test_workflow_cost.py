"""bench/workflow_cost.py: each case runs to its end, and an edge costs write units on top of a plain task."""

from __future__ import annotations

from bench import workflow_cost
from bench.report import Table


def test_every_case_ends_and_edges_cost_writes_beyond_plain_tasks() -> None:
    rows = {row["case"]: row for row in workflow_cost.bench(8)}
    assert [rows[c]["tasks"] for c in ("plain", "fan-in", "diamonds")] == [8, 8, 8]
    assert (rows["fan-in"]["edges"], rows["diamonds"]["edges"]) == (7, 8)
    assert rows["plain"]["extra_wcu_per_edge"] is None
    for case in ("fan-in", "diamonds"):
        assert rows[case]["extra_wcu_per_edge"] > 2  # at least a dependent's readying write and its index entry
        assert rows[case]["dynamodb_dollars_per_million"] > rows["plain"]["dynamodb_dollars_per_million"]
    table = Table()
    workflow_cost.section(table, list(rows.values()))
    assert sum(1 for row in table.rows if row[0].startswith("DynamoDB $ per million tasks")) == 2
