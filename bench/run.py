"""All benchmarks in one run: this project against the seed designs, side by side, on the same engines.

    .venv/bin/python bench/run.py            # make bench; ~9 minutes on a 2-core machine
    .venv/bin/python bench/run.py --quick    # smaller counts, ~2 minutes, for trying changes

Runs, in this order (docs/benchmarks.md says what each figure means):

1. the invocation model (bench/invocation_model.py) at 1 and 10 tasks/s, both designs;
2. on DynamoDB Local (inside scripts/with-dynamodb-local, else on the emulator, as its output says): the
   overhead of create -> claim -> finish against a bare PutItem + 2 UpdateItem loop, and the cost meter's
   cross-check against DynamoDB Local's ConsumedCapacity (bench/dynamodb_local_part.py);
3. on the serialized moto server (local/emulator/server.py), with the cost meter on every client: write and read
   units per task with a runner that keeps up (bench/lifo_runs.py idle), and with the runner saturated at 3x
   overload, which also gives freshness (bench/lifo_runs.py overload); product and seed at the same time,
   each on its own server, with the same arrivals;
4. the Matcher with 1, 4, 8 and 16 matchers, product and seed runs alternating, and 8 matchers with enough idle
   agents that helpers take part (bench/matcher_compare.py);
5. the scale model (bench/scale_model.py) on the measured per-partition units, the dollar model
   (bench/dollars.py), and an idle stack's month (bench/idle_cost.py: its safety-net run measured on moto).

Every figure is the median of the runs with their min-max, next to its baseline and as a ratio to it. Prints
the table and writes bench/results.md (and the raw figures to bench/results.json).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import pickup, tenants, workflow_cost  # noqa: E402
from bench.common import ROOT, template_values  # noqa: E402
from bench.dollars import (  # noqa: E402
    DEFAULT_UTILISATION,
    queue_design,
    queue_design_provisioned,
    sqs_lambda,
)
from bench.invocation_model import product_model, seed_model, simulate  # noqa: E402
from bench.plan import RATES, SHARDS, Plan  # noqa: E402
from bench.report import build_table, machine, spread, update_docs, write_results  # noqa: E402
from bench.scale_model import (  # noqa: E402
    control_item_load,
    lease_marked,
    loads_from_partitions,
    max_sustainable_rate,
)

PY = sys.executable
# ---- running the parts ----------------------------------------------------------------------------------


def say(text: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {text}", flush=True)


def json_lines(text: str) -> list[dict[str, Any]]:
    """The result lines of a part's output (JSON objects naming their engine); anything else is ignored."""
    found = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict) and ("engine" in value or "design" in value):
                found.append(value)
    return found


def start(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen[str], what: str) -> list[dict[str, Any]]:
    out, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {proc.returncode}):\n{err[-3000:]}")
    return json_lines(out)


def run_both(product_args: list[str], seed_args: list[str], what: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The product's and the seed's run at the same time, each in its own process with its own emulator."""
    p, s = start(product_args), start(seed_args)
    return finish(p, f"{what} (product)"), finish(s, f"{what} (seed)")


def invocation_model(plan: Plan) -> dict[str, Any]:
    values = template_values()
    out: dict[str, Any] = {}
    for rate in RATES:
        for model in (product_model(values), seed_model()):
            runs = [simulate(model, rate, plan.model_tasks, seed=seed).summary() for seed in plan.model_seeds]
            out[f"{model.name}@{rate:g}"] = runs
    # Create -> first claim on an idle queue (bench/pickup.py).
    out.update(pickup.model_runs(plan.model_tasks, plan.model_seeds))
    return out


def dynamodb_local(plan: Plan) -> dict[str, Any]:
    command = [str(ROOT / "scripts" / "with-dynamodb-local"), PY, "bench/dynamodb_local_part.py",
               "--tasks", str(plan.local_tasks), "--repeat", str(plan.local_repeat)]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"the DynamoDB Local part failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json_lines(proc.stdout)[-1]


def idle(plan: Plan) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    common = ["idle", "--rates", ",".join(f"{r:g}" for r in RATES), "--tasks", str(plan.idle_tasks),
              "--seeds", ",".join(map(str, plan.seeds))]
    return run_both([PY, "bench/lifo_runs.py", *common, "--design", "product"],
                    [PY, "bench/lifo_runs.py", *common, "--design", "seed"], "idle runs")


def overload(plan: Plan) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    product, seed = [], []
    for number in plan.seeds:
        common = ["overload", "--seconds", str(plan.overload_seconds), "--ttl", str(plan.overload_ttl),
                  "--scale", str(plan.scale), "--seeds", str(number)]
        p, s = run_both([PY, "bench/lifo_runs.py", *common, "--design", "product"],
                        [PY, "bench/lifo_runs.py", *common, "--design", "seed"], f"overload run {number}")
        product += p
        seed += s
        say(f"  overload run {number}: product done {p[0]['done_share']:.0%}, seed done {s[0]['done_share']:.0%}")
    return product, seed


def workers(plan: Plan) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    product, seed = [], []
    for number in plan.seeds:
        common = ["workers", "--tasks", str(plan.worker_tasks), "--workers", "1,8", "--seeds", str(number)]
        p, s = run_both([PY, "bench/lifo_runs.py", *common, "--design", "product"],
                        [PY, "bench/lifo_runs.py", *common, "--design", "seed"], f"concurrent workers run {number}")
        product += p
        seed += s
    return product, seed


def idle_cost_part() -> dict[str, Any]:
    """An idle stack's month on the template's defaults, on-demand and provisioned (bench/idle_cost.py: the safety
    net's run measured on moto with the cost meter, then priced)."""
    return finish(start([PY, "bench/idle_cost.py", "--json"]), "idle-cost model")[-1]


def matcher(plan: Plan) -> dict[str, list[dict[str, Any]]]:
    """Product and seed runs alternate (--design both), so that a change of the machine's load falls on both."""
    runs = finish(start([PY, "bench/matcher_compare.py", "--design", "both", "--matchers", "1,4,8,16", "--agents",
                         str(plan.agents), "--calls", str(plan.calls), "--repeat", str(plan.matcher_repeat), "--meter"]),
                  "matcher runs")
    shared = finish(start([PY, "bench/matcher_compare.py", "--design", "both", "--matchers", "8", "--agents",
                           str(plan.shared_agents), "--calls", str(plan.shared_calls), "--repeat", str(plan.matcher_repeat)]),
                    "matcher runs with helpers taking part")
    out = {design: [r for r in runs if r["design"] == design] for design in ("product", "seed")}
    out |= {f"{design}@shared": [r for r in shared if r["design"] == design] for design in ("product", "seed")}
    for design, found in out.items():
        say(f"  matcher runs of the {design}: {len(found)}")
    return out


# ---- figures -------------------------------------------------------------------------------------------


def median_partitions(runs: list[dict[str, Any]]) -> dict[str, float]:
    keys = {k for r in runs for k in r.get("partitions", {})}
    return {k: statistics.median([r.get("partitions", {}).get(k, 0.0) for r in runs]) for k in keys}


def scale_model(partitions: dict[str, dict[str, float]]) -> dict[str, Any]:
    """The highest sustainable rate per shard count: the product's measured index loads (a look reads every shard's
    ready partition) and its queue record's reads (one per stream batch's invocation), the seed's single keys."""
    out: dict[str, Any] = {}
    batch = template_values().stream_batch_size
    for label, design_partitions in partitions.items():
        design, regime = label.split("@")
        shardable = design == "product"
        if shardable and regime == "idle":
            design_partitions = lease_marked(design_partitions)
        loads = loads_from_partitions(design_partitions, shardable=shardable)
        if shardable:
            loads += control_item_load(batch)
        for shards in (SHARDS if shardable else (1,)):
            rate, hottest = max_sustainable_rate(loads, shards)
            out[f"{design}@{regime}@{shards}"] = {"rate": rate, "hottest": hottest}
    return out


def dollars(idle_runs: dict[str, list[dict[str, Any]]], model: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for rate in RATES:
        for design in ("product", "seed"):
            units = [r for r in idle_runs[design] if r["rate"] == rate]
            runs = model[f"{design}@{rate:g}"]
            per_task = lambda key: statistics.median([r[key] for r in runs]) / 1000.0  # noqa: E731, B023 (used in this iteration)
            gb = statistics.median([sum(r["gb_seconds_per_1000"].values()) for r in runs]) / 1000.0
            cost = queue_design(spread(units, "wcu").median, spread(units, "rcu").median, per_task("total_per_1000"), gb,
                                per_task("publishes_per_1000"))
            out[f"{design}@{rate:g}"] = cost.as_dict()
            if design == "product":  # the same units on provisioned capacity (BillingMode PROVISIONED, a steady flow)
                provisioned = queue_design_provisioned(
                    spread(units, "wcu").median, spread(units, "rcu").median, per_task("total_per_1000"), gb,
                    per_task("publishes_per_1000"), DEFAULT_UTILISATION)
                out[f"product-provisioned@{rate:g}"] = provisioned.as_dict()
        cost, detail = sqs_lambda(rate)
        out[f"sqs@{rate:g}"] = {**cost.as_dict(), **detail}
    return out


# ---- the table -------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small counts (a smoke run, ~2 minutes)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results.md"))
    parser.add_argument("--json", default=str(ROOT / "bench" / "results.json"))
    args = parser.parse_args(argv)
    plan = Plan(args.quick)
    started = time.monotonic()
    r: dict[str, Any] = {}
    say("1/5 invocation model")
    r["model"] = invocation_model(plan)
    say("2/5 DynamoDB Local: overhead and the cost meter's cross-check")
    r["dynamodb_local"] = dynamodb_local(plan)
    say(f"  engine: {r['dynamodb_local']['engine']}")
    say("3/5 LIFO: units with a runner keeping up, then 3x overload (product and seed side by side)")
    p, s = idle(plan)
    r["idle"] = {"product": p, "seed": s}
    p, s = overload(plan)
    r["overload"] = {"product": p, "seed": s}
    say("   concurrent workers: 1 and 8")
    p, s = workers(plan)
    r["workers"] = {"product": p, "seed": s}
    say("4/5 Matcher: 1, 4, 8, 16 matchers; 8 with helpers taking part")
    r["matcher"] = matcher(plan)
    say("   tenants: fair share between groups, with groups and without (bench/tenants.py -> bench/results-tenants.md)")
    r["tenants"] = tenants.bench(plan.quick)
    say("5/5 scale and dollar models")
    r["partitions"] = {
        "product@idle": median_partitions([x for x in r["idle"]["product"] if x["rate"] == max(RATES)]),
        "seed@idle": median_partitions([x for x in r["idle"]["seed"] if x["rate"] == max(RATES)]),
        "product@saturated": median_partitions(r["overload"]["product"]),
        "seed@saturated": median_partitions(r["overload"]["seed"]),
    }
    r["scale"] = scale_model(r["partitions"])
    r["dollars"] = dollars(r["idle"], r["model"])
    say("   an idle stack's month (bench/idle_cost.py)")
    r["idle_cost"] = idle_cost_part()
    say("   workflow tasks beside plain tasks (bench/workflow_cost.py)")
    r["workflows"] = workflow_cost.bench(100 if plan.quick else 1000)
    wall = time.monotonic() - started
    # The raw figures first: a table that cannot be built leaves them to build it from.
    Path(args.json).write_text(json.dumps({"plan": plan.describe(), "wall_seconds": wall, **r}, indent=1, default=str))
    table = build_table(r)
    command = ".venv/bin/python bench/run.py" + (" --quick" if args.quick else "")
    write_results(Path(args.out), r, table, plan, wall, command)
    if not args.quick and Path(args.out).resolve() == (ROOT / "bench" / "results.md").resolve():
        header = (f"Last full run: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}, {wall / 60:.1f} min, "
                  f"{machine()}; engines and counts in bench/results.md.")
        update_docs(r, table, header)
    print()
    print(table.markdown())
    print()
    say(f"done in {wall / 60:.1f} min: {args.out}")


if __name__ == "__main__":
    main()
