"""Create -> first claim: the figures of the wake-up path in `make bench` (bench/run.py calls these).

- From the invocation model (bench/invocation_model.py, platform delays as it models them): the wait from a
  task's creation to its first claim, p50/p95, at 1 and 10 tasks/s and for a task on an idle queue (Poisson
  arrivals 2 minutes apart on average), product and seed side by side;
- the real-time figures on the local stack (bench/pickup_realtime.py writes bench/results-pickup.md; its rows
  are carried into bench/results.md here, so a `make bench` keeps them).
"""

from __future__ import annotations

from typing import Any

from bench.common import ROOT, Spread, template_values
from bench.invocation_model import product_model, seed_model, simulate

IDLE_RATE = 1 / 120  # one task every two minutes on average: each finds its queue idle


def model_runs(tasks: int, seeds: list[int]) -> dict[str, list[dict[str, Any]]]:
    """The model runs the rows below need that bench/run.py's own invocation model runs do not make."""
    values = template_values()
    out: dict[str, list[dict[str, Any]]] = {}
    idle_tasks = max(20, tasks // 50)
    for model in (product_model(values), seed_model()):
        out[f"{model.name}@idle-queue"] = [simulate(model, IDLE_RATE, idle_tasks, seed=s).summary() for s in seeds]
    return out


def _spread(runs: list[dict[str, Any]], key: str) -> Spread:
    return Spread.of(r[key] for r in runs)


def add_rows(table: Any, model: dict[str, list[dict[str, Any]]], rates: tuple[float, ...]) -> None:
    """A section of bench/run.py's table: create -> first claim, product beside the seed."""
    seed = "seed LIFO port"
    table.section("Create -> first claim, seconds (invocation model, platform delays modelled, template defaults)")
    for rate in rates:
        p, s = model[f"product@{rate:g}"], model[f"seed@{rate:g}"]
        label = f"{rate:g} task/s" if rate == 1 else f"{rate:g} tasks/s"
        table.add(f"p50 at {label}", _spread(p, "claim_wait_p50"), _spread(s, "claim_wait_p50"), seed)
        table.add(f"p95 at {label}", _spread(p, "claim_wait_p95"), _spread(s, "claim_wait_p95"), seed)
    p, s = model["product@idle-queue"], model["seed@idle-queue"]
    table.add("p95, one task on an idle queue", _spread(p, "claim_wait_p95"), _spread(s, "claim_wait_p95"), seed)
    for rate in rates:
        p, s = model[f"product@{rate:g}"], model[f"seed@{rate:g}"]
        label = f"{rate:g} task/s" if rate == 1 else f"{rate:g} tasks/s"
        gb = lambda runs: Spread.of(sum(r["gb_seconds_per_1000"].values()) for r in runs)  # noqa: E731
        table.add(f"Lambda GB-s per 1,000 tasks at {label}", gb(p), gb(s), seed, 1)


def realtime_section() -> str:
    """bench/results-pickup.md's table (bench/pickup_realtime.py: real seconds on the local stack), carried over."""
    path = ROOT / "bench" / "results-pickup.md"
    if not path.exists():
        return ""
    text = path.read_text()
    rows = [line for line in text.splitlines() if line.startswith("|")]
    facts = [line for line in text.splitlines() if line.startswith("- ")]
    return "\n".join(["## Create -> first claim in real seconds on the local stack", "",
                      "From [bench/results-pickup.md](results-pickup.md) (bench/pickup_realtime.py, no time scaling):", "",
                      *facts, "", *rows, ""])


__all__ = ["add_rows", "model_runs", "realtime_section"]
