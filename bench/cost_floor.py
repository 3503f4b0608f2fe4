"""The floor under the dollar targets: the least any design that meets issue 17's other figures and keeps the agreed
design's writes can pay per million tasks. A model, not a measurement: prices from bench/dollars.py, the seed's
invocations from the same `make bench` run.

Two bounds, each taken as generously as the figures allow:

- **Lambda time.** Poisson arrivals see the worker as it is on average (PASTA): the share of tasks that arrive while no
  worker runs is the share of time no worker runs. Such a task is claimed within the pickup target only if an
  invocation starts for it, or it is among the 5 % the p95 may leave late. So with at most ``c`` invocations per
  task (issue 17: a quarter of the seed design's), a worker runs at least ``1 - c - 0.05`` of the time, i.e.
  ``(1 - c - 0.05) / rate`` seconds per task, billed at the function's memory (Lambda's least is 128 MB; the
  template's ProcessTasks has 256). The Trigger's own invocations are not counted against ``c``: generous.
- **DynamoDB writes.** DESIGN.md: each transition is one conditional write on the task's item (created, claimed,
  finished: 3 write units for an item under 1 KB); the sparse index holds PENDING and TAKEN tasks and finished ones
  leave it (at least a put and a delete: 2); a producer touches the queue's record after its write (1 per create
  request; the bench's producers create one task per request). 6 write units per task, no read, no publish.

    .venv/bin/python bench/cost_floor.py            # seed invocations from bench/results.json (else 583 and 308)
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.dollars import DEFAULT_UTILISATION, PRICES, provisioned_unit_prices  # noqa: E402

LAMBDA_LEAST_MB = 128
TEMPLATE_WORKER_MB = 256
LATE_SHARE = 0.05  # a p95 target lets 5 % of tasks wait longer
INVOCATION_SHARE = 0.25  # issue 17: invocations per 1,000 tasks at most a quarter of the seed design's
DESIGN_WRITES_PER_TASK = 3 + 2 + 1  # task item transitions, sparse index put and delete, the producer's touch
# The figures the floor is held against (issues 17 and 21).
TARGETS = (
    ("issue 17: $ per million tasks at 1 task/s, on-demand, at most 10 % above 4.62", 1.0, "on-demand", 5.08),
    ("issue 21: $ per million tasks at 1 task/s, on-demand", 1.0, "on-demand", 3.50),
    ("issue 21: $ per million tasks at 10 tasks/s, provisioned", 10.0, "provisioned", 1.75),
)


@dataclass(frozen=True)
class Floor:
    awake_seconds: float  # per task
    compute: float  # $ per million tasks
    writes: float
    requests: float
    total: float


def awake_seconds_floor(rate: float, invocations_per_task: float, late_share: float = LATE_SHARE) -> float:
    """The least time a worker runs per task at ``rate`` tasks/s (Poisson) with at most ``invocations_per_task``."""
    if rate <= 0:
        raise ValueError(f"rate must be positive, got {rate!r}")
    return max(0.0, 1.0 - invocations_per_task - late_share) / rate


def floor(rate: float, invocations_per_task: float, memory_mb: int, billing: str = "on-demand",
          writes_per_task: float = DESIGN_WRITES_PER_TASK, utilisation: float = DEFAULT_UTILISATION) -> Floor:
    """$ per million tasks at least: the worker's least running time at ``memory_mb``, the invocations' requests and the
    design's writes, with at most ``invocations_per_task``. Reads, publishes and the Trigger are left out (generous)."""
    if billing == "on-demand":
        write_price = PRICES["dynamodb_write_request_unit"]
    elif billing == "provisioned":
        write_price = provisioned_unit_prices(utilisation)[0]
    else:
        raise ValueError(f"billing is 'on-demand' or 'provisioned', got {billing!r}")
    writes = writes_per_task * write_price * 1e6

    def at(invocations: float) -> Floor:
        awake = awake_seconds_floor(rate, invocations)
        compute = awake * memory_mb / 1024 * PRICES["lambda_gb_second_arm64"] * 1e6
        requests = invocations * PRICES["lambda_request"] * 1e6
        return Floor(awake, compute, writes, requests, compute + writes + requests)

    # Running time falls and requests grow linearly with the invocations a design spends, so the least of their sum
    # is at one end: no invocation beyond the backstops, or as many as the cap allows.
    return min(at(0.0), at(invocations_per_task), key=lambda f: f.total)


def seed_invocations(model: dict) -> dict[float, float]:
    """All functions' invocations per task of the seed design at 1 and 10 tasks/s (median of the runs), from the
    invocation model's runs of a `make bench` (``results.json``'s "model")."""
    found = {1.0: 0.583, 10.0: 0.3083}  # bench/results.md, 2026-11-25 21:59, when a run has none
    for rate in found:
        runs = model.get(f"seed@{rate:g}")
        if runs:
            values = sorted(x["total_per_1000"] for x in runs)
            found[rate] = values[len(values) // 2] / 1000
    return found


def markdown(seed: dict[float, float]) -> str:
    lines = [
        "| target | figure | cap on invocations per task | least worker time per task | at 128 MB (Lambda's least) "
        "| at 256 MB (template) | reachable? |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for what, rate, billing, target in TARGETS:
        cap = INVOCATION_SHARE * seed[rate]
        least = floor(rate, cap, LAMBDA_LEAST_MB, billing)
        template = floor(rate, cap, TEMPLATE_WORKER_MB, billing)
        verdict = "no" if least.total > target else f"only below {TEMPLATE_WORKER_MB} MB" if template.total > target else "yes"
        lines.append(
            f"| {what} | {target:.2f} | {cap:.3f} | {least.awake_seconds:.3f} s | {least.total:.2f} "
            f"({least.compute:.2f} Lambda time + {least.requests:.2f} requests + {least.writes:.2f} writes) | "
            f"{template.total:.2f} | {verdict} |"
        )
    return "\n".join(lines)


def main() -> None:
    results = Path(__file__).resolve().parent / "results.json"
    print(markdown(seed_invocations(json.loads(results.read_text())["model"] if results.exists() else {})))


if __name__ == "__main__":
    main()
