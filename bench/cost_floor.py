"""The floor under the dollar targets: the least a design can pay per million tasks and still claim a task within
the pickup target (p95 <= 1 s), on demand and provisioned. A model, not a measurement: prices from bench/dollars.py.

Dollars and pickup govern, not the number of invocations. A task arriving on a queue is claimed within a second only
if a worker is already running (kept awake, billed) or an invocation starts for it. So every design pays, per task,
at least the cheaper of:

- **an invocation for it**: a Lambda request ($0.20 per million) and the least run that claims a task (a few
  conditional requests, ``LEAST_RUN_SECONDS`` at Lambda's least memory). The cheapest way to start one is the table's
  stream with no batching window (stream reads by Lambda are free; no SNS publish, no producer write): the
  ``stream`` design below. At ``rate`` tasks/s (Poisson) the poller reads a shard 4 times a second and a poll that
  finds records makes one batch: ``(1 - exp(-rate / 4)) / (rate / 4)`` invocations per task (``batches_per_task``).
- **a worker kept running**: Poisson arrivals see the worker as it is on average (PASTA), so to serve 95 % of tasks
  without a start it must run 95 % of the time: ``0.95 / rate`` seconds per task.

and the writes any design keeps (DESIGN.md): a task's three transitions on its own item (created, claimed, finished),
and a sparse index that must hold a PENDING task (a put) and must lose it once finished (a delete): 5 write units.
The template's default running limit (``WorkRunningLimit`` empty: RunnerCapacity across every worker, since several
may run) adds what holding it costs: an invocation started for a batch must take a shared slot and give it back (two
conditional writes, ``SLOT_WRITES_PER_START``), since no other worker knows what it runs; a worker kept running holds
its slots across tasks (a renewal now and then, left out).
A claim that leaves the index entry as it is (no projected attribute changes) costs the index nothing; finders tell a
TAKEN entry otherwise (this project: a task that ends quickly is claimed without the lease mark, another worker
loses one claim on it; see store/unmarked_leases.py). Reads, storage and the backstops are left out (generous).

Two floors are printed for each target:

- **any design** (the floor proper): 5 writes + the cheaper of the two above at Lambda's least memory (128 MB);
- **this architecture** (producers write their tasks and nothing else; every stream batch invokes ProcessTasks,
  which reads the queue's record, strongly consistent, 1 read unit, claims the batch's tasks, and ends when its look
  finds nothing claimable: no worker stays awake; a claim of a task that ends within 2 s leaves its ReadyIndex entry
  as it was): 3 + 2 index writes = 5 write units, plus per batch 2 slot writes, the record's read, a request and the
  least run at the template's ProcessTasks memory. What this project measures is at or above it, by what a run
  writes and reads beyond that (a slot for each task it runs at once, its looks, the pause checks) and what the floor
  leaves out (refused claims, the backstops).

    .venv/bin/python bench/cost_floor.py            # measured figures from bench/results.json when present
    .venv/bin/python bench/cost_floor.py --results bench/results-cost.json   # ... from bench/cost_check.py's run
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.dollars import DEFAULT_UTILISATION, PRICES, provisioned_unit_prices  # noqa: E402

LAMBDA_LEAST_MB = 128
TEMPLATE_WORKER_MB = 128  # template.yaml's ProcessTasksMemorySize
LATE_SHARE = 0.05  # a p95 target lets 5 % of tasks wait longer
LEAST_RUN_SECONDS = 0.05  # the least invocation that claims and finishes a task: a few single-digit-ms requests
POLLS_PER_SECOND = 4.0  # the stream poller reads a shard 4 times a second (bench/invocation_model.Platform)
FLOOR_WRITES_PER_TASK = 3 + 2  # three transitions on the task's item; the sparse index's put and delete
SLOT_WRITES_PER_START = 2  # a running-limit slot taken and given back by an invocation started for a batch
ARCHITECTURE_WRITES_PER_TASK = 3 + 2  # + ReadyIndex put and delete: a lone claim of a quick task gets no lease mark
ARCHITECTURE_READS_PER_BATCH = 1  # a batch's invocation reads the queue's record, strongly consistent (producers read none)


# The dollar targets: (what, rate, billing, $ per million tasks).
TARGETS = (
    ("$ per million tasks at 1 task/s, on-demand", 1.0, "on-demand", 5.00),
    ("$ per million tasks at 10 tasks/s, on-demand", 10.0, "on-demand", 4.25),
    ("$ per million tasks at 100 tasks/s, on-demand", 100.0, "on-demand", 4.00),
    ("$ per million tasks at 10 tasks/s, provisioned at 70 %", 10.0, "provisioned", 1.75),
)


@dataclass(frozen=True)
class Floor:
    how: str  # "invocation per batch" or "worker kept running"
    compute: float  # $ per million tasks: Lambda time
    requests: float  # $ per million tasks: Lambda requests
    writes: float
    total: float


def batches_per_task(rate: float, polls_per_second: float = POLLS_PER_SECOND) -> float:
    """Stream batches (one invocation each) per task at ``rate`` tasks/s, Poisson: the share of polls that find a record,
    over the tasks a poll interval brings."""
    per_poll = rate / polls_per_second
    return (1.0 - math.exp(-per_poll)) / per_poll


def awake_seconds_floor(rate: float, late_share: float = LATE_SHARE) -> float:
    """The least time a worker runs per task at ``rate`` tasks/s (Poisson) when no invocation starts for a task."""
    if rate <= 0:
        raise ValueError(f"rate must be positive, got {rate!r}")
    return (1.0 - late_share) / rate


def write_price(billing: str, utilisation: float = DEFAULT_UTILISATION) -> float:
    if billing == "on-demand":
        return PRICES["dynamodb_write_request_unit"]
    if billing == "provisioned":
        return provisioned_unit_prices(utilisation)[0]
    raise ValueError(f"billing is 'on-demand' or 'provisioned', got {billing!r}")


def gb_second(memory_mb: int) -> float:
    return memory_mb / 1024 * PRICES["lambda_gb_second_arm64"]


def floor(rate: float, memory_mb: int = LAMBDA_LEAST_MB, billing: str = "on-demand",
          writes_per_task: float = FLOOR_WRITES_PER_TASK, *, running_limit: bool = True) -> Floor:
    """$ per million tasks at least, by the cheaper of an invocation per stream batch and a worker kept running;
    ``running_limit``: the template's default queue-wide limit holds (a started invocation takes and frees a slot)."""
    writes = writes_per_task * write_price(billing) * 1e6
    per_task = batches_per_task(rate)
    slot_writes = per_task * SLOT_WRITES_PER_START * write_price(billing) * 1e6 if running_limit else 0.0
    invoked = Floor("invocation per batch", per_task * LEAST_RUN_SECONDS * gb_second(memory_mb) * 1e6,
                    per_task * PRICES["lambda_request"] * 1e6, writes + slot_writes, 0.0)
    awake = Floor("worker kept running", awake_seconds_floor(rate) * gb_second(memory_mb) * 1e6, 0.0, writes, 0.0)
    best = min((invoked, awake), key=lambda f: f.compute + f.requests + f.writes)
    return Floor(best.how, best.compute, best.requests, best.writes, best.compute + best.requests + best.writes)


def architecture_floor(rate: float, billing: str = "on-demand", memory_mb: int = TEMPLATE_WORKER_MB) -> Floor:
    """This project's architecture at least: its 5 writes; an invocation per stream batch that reads the record, takes
    a running-limit slot and frees it (2 writes) and claims the batch's tasks; no worker stays awake for more."""
    read_price = PRICES["dynamodb_read_request_unit"] if billing == "on-demand" else provisioned_unit_prices(DEFAULT_UTILISATION)[1]
    per_task = batches_per_task(rate)
    base = (ARCHITECTURE_WRITES_PER_TASK * write_price(billing) + per_task * ARCHITECTURE_READS_PER_BATCH * read_price) * 1e6
    requests = per_task * PRICES["lambda_request"] * 1e6
    least_run = per_task * LEAST_RUN_SECONDS * gb_second(memory_mb) * 1e6
    slots = per_task * SLOT_WRITES_PER_START * write_price(billing) * 1e6
    return Floor("an invocation per stream batch", least_run, requests, base + slots, least_run + requests + base + slots)


def measured(results: dict) -> dict[tuple[float, str], float]:
    """This project's dollars per million tasks from a `make bench` run (``results.json``'s "dollars")."""
    found: dict[tuple[float, str], float] = {}
    for key, value in results.get("dollars", {}).items():
        design, _, rate = key.partition("@")
        if design in ("product", "product-provisioned") and rate:
            found[(float(rate), "on-demand" if design == "product" else "provisioned")] = value["total"]
    return found


def markdown(measured_totals: dict[tuple[float, str], float] | None = None) -> str:
    measured_totals = measured_totals or {}
    lines = [
        "| target | figure | floor, any design (how) | this architecture's floor | this project, measured | "
        "target reachable? | measured: target met? over this architecture's floor |",
        "|---|---:|---|---:|---:|---|---|",
    ]
    for what, rate, billing, target in TARGETS:
        least = floor(rate, LAMBDA_LEAST_MB, billing)
        arch = architecture_floor(rate, billing)
        got = measured_totals.get((rate, billing))
        reachable = "no: below every design's floor" if least.total > target else (
            "yes, in this architecture" if arch.total <= target else "only past this architecture")
        verdict = "—" if got is None else f"{'yes' if got <= target else 'no'}; {got / arch.total - 1:+.0%}"
        lines.append(
            f"| {what} | {target:.2f} | {least.total:.2f} ({least.how}: {least.compute:.2f} Lambda time + "
            f"{least.requests:.2f} requests + {least.writes:.2f} writes) | {arch.total:.2f} ({arch.how}) | "
            f"{'—' if got is None else f'{got:.2f}'} | {reachable} | {verdict} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default=str(Path(__file__).resolve().parent / "results.json"),
                        help="the measured dollars: make bench's results.json, or bench/cost_check.py's results-cost.json")
    results = Path(parser.parse_args(argv).results)
    print(markdown(measured(json.loads(results.read_text())) if results.exists() else {}))


if __name__ == "__main__":
    main()
