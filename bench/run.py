"""All benchmarks in one run: this project against the seed designs, side by side, on the same engines.

    .venv/bin/python bench/run.py            # make bench; ~9 minutes on a 2-core machine
    .venv/bin/python bench/run.py --quick    # smaller counts, ~2 minutes, for trying changes

Runs, in this order (docs/benchmarks.md says what each figure means):

1. the invocation model (bench/invocation_model.py) at 1 and 10 tasks/s, both designs;
2. on DynamoDB Local (inside scripts/with-dynamodb-local, else on the emulator, as its output says): the
   overhead of create -> claim -> finish against a bare PutItem + 2 UpdateItem loop, and the cost meter's
   cross-check against DynamoDB Local's ConsumedCapacity (bench/dynamodb_local_part.py);
3. on the serialized moto server (local/emulator.py), with the cost meter on every client: write and read
   units per task with a runner that keeps up (bench/lifo_runs.py idle), and with the runner saturated at 3x
   overload, which also gives freshness (bench/lifo_runs.py overload); product and seed at the same time,
   each on its own server, with the same arrivals;
4. the Matcher with 1, 4, 8 and 16 matchers, product and seed runs alternating, and 8 matchers with enough idle
   agents that helpers take part (bench/matcher_compare.py);
5. the scale model (bench/scale_model.py) on the measured per-partition units, and the dollar model
   (bench/dollars.py).

Every figure is the median of the runs with their min-max, next to its baseline and as a ratio to it. Prints
the table and writes bench/results.md (and the raw figures to bench/results.json).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import pickup  # noqa: E402
from bench.common import ROOT, Spread, template_values  # noqa: E402
from bench.dollars import (  # noqa: E402
    DEFAULT_UTILISATION,
    FREE,
    PRICES,
    PRICES_AS_OF,
    REGION,
    break_even_utilisation,
    queue_design,
    queue_design_provisioned,
    sqs_lambda,
)
from bench.invocation_model import product_model, seed_model, simulate  # noqa: E402
from bench.scale_model import control_item_load, loads_from_partitions, max_sustainable_rate, workers_needed  # noqa: E402

PY = sys.executable
RATES = (1.0, 10.0)
SHARDS = (1, 4, 16, 24, 32, 64)
# The shard-ownership rows (claim lanes own shards, taskqueue.lanes.owned_shards) assume producers that send this many
# tasks per CreateTasks request (each request touches the queue's record once: one item, one partition) and the
# concurrency sizing below (an assumption for DynamoDB, stated in docs/scaling.md; not measured here).
TASKS_PER_REQUEST = 100
CLAIM_SECONDS = 0.010  # one conditional write's latency on DynamoDB (single-digit ms, documented), one claim after another
SCALE_RUNNER = (100, 1.0)  # a runner holding 100 tasks at once (RunnerCapacity) of 1 s each
TARGET_RATE = 10_000


class Plan:
    def __init__(self, quick: bool) -> None:
        self.quick = quick
        self.model_tasks = 600 if quick else 3000
        self.model_seeds = [1] if quick else [1, 2, 3]
        self.idle_tasks = 40 if quick else 120
        self.seeds = [1] if quick else [1, 2, 3]
        self.overload_seconds = 180.0 if quick else 600.0
        self.overload_ttl = 120
        self.scale = 1 / 15
        self.agents, self.calls = (20, 50) if quick else (60, 150)
        self.matcher_repeat = 1 if quick else 3
        # Enough idle agents that helpers take part (MATCH_HELPER_MIN_AGENTS, 100): the shared plan at 8 matchers.
        self.shared_agents, self.shared_calls = (120, 300) if quick else (300, 750)
        self.local_tasks, self.local_repeat = (30, 1) if quick else (100, 3)
        self.worker_tasks = 60 if quick else 150

    def describe(self) -> list[str]:
        return [
            f"invocation model: {self.model_tasks} Poisson arrivals per run, seeds {self.model_seeds}",
            f"units, runner keeping up: {self.idle_tasks} tasks per run at 1 and 10 tasks/s, seeds {self.seeds}",
            f"overload: {self.overload_seconds:.0f} virtual s of arrivals at 3x the runner's capacity, TTL "
            f"{self.overload_ttl} s, clock scaled {self.scale:.4f} (15 virtual s = 1 real s), seeds {self.seeds}",
            f"matcher: {self.agents} agents, {self.calls} callers, 1/4/8/16 matchers, {self.matcher_repeat} repetitions, "
            f"product and seed runs alternating; with helpers taking part: {self.shared_agents} agents, "
            f"{self.shared_calls} callers, 8 matchers, {self.matcher_repeat} repetitions",
            f"concurrent workers: a backlog of {self.worker_tasks} tasks, 1 and 8 worker invocations, seeds {self.seeds}",
            f"overhead: {self.local_tasks} tasks per run, {self.local_repeat} runs (after a warm-up run)",
        ]


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
    # Create -> first claim on an idle queue, and the linger's trade-off at 1 task/s (bench/pickup.py).
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


def spread(runs: list[dict[str, Any]], key: str) -> Spread:
    return Spread.of(r[key] for r in runs if key in r)


def median_partitions(runs: list[dict[str, Any]]) -> dict[str, float]:
    keys = {k for r in runs for k in r.get("partitions", {})}
    return {k: statistics.median([r.get("partitions", {}).get(k, 0.0) for r in runs]) for k in keys}


def scale_model(partitions: dict[str, dict[str, float]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, design_partitions in partitions.items():
        design, regime = label.split("@")
        shardable = design == "product"
        loads = loads_from_partitions(design_partitions, shardable=shardable)
        for shards in (SHARDS if shardable else (1,)):
            rate, hottest = max_sustainable_rate(loads, shards)
            out[f"{design}@{regime}@{shards}"] = {"rate": rate, "hottest": hottest}
        if shardable:  # shards owned by claim lanes: each shard's reads come from its own lanes' polls
            owned = loads_from_partitions(design_partitions, shardable=True, owned_reads=True)
            owned.append(control_item_load(TASKS_PER_REQUEST))
            for shards in SHARDS:
                rate, hottest = max_sustainable_rate(owned, shards)
                capacity, seconds = SCALE_RUNNER
                workers = workers_needed(rate, claim_seconds=CLAIM_SECONDS, runner_capacity=capacity, runner_seconds=seconds)
                out[f"owned@{regime}@{shards}"] = {"rate": rate, "hottest": hottest, "workers": workers}
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


def per_s(rate: float) -> str:
    return f"{rate:g} task/s" if rate == 1 else f"{rate:g} tasks/s"


def fmt(value: float, digits: int = 2) -> str:
    if value != value:
        return "n/a"
    if value == float("inf"):
        return "∞"
    return f"{value:,.{digits}f}"


def ratio(value: float, base: float) -> str:
    if base == 0 or base != base or value != value:
        return "—"
    x = value / base
    return f"×{x:.1g}" if 0 < x < 0.01 else f"×{x:.2f}"


class Table:
    def __init__(self) -> None:
        self.rows: list[tuple[str, ...]] = []

    def section(self, title: str) -> None:
        self.rows.append((f"**{title}**", "", "", "", ""))

    def add(self, figure: str, mine: Spread | float, base: Spread | float, baseline: str, digits: int = 2) -> None:
        m = mine.median if isinstance(mine, Spread) else mine
        b = base.median if isinstance(base, Spread) else base
        show = lambda x: x.fmt(digits) if isinstance(x, Spread) else fmt(x, digits)  # noqa: E731
        self.rows.append((figure, show(mine), show(base), ratio(m, b), baseline))

    def markdown(self) -> str:
        head = ("Figure", "This project", "Baseline", "Ratio", "Baseline is")
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * 3 + ["---"]) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        return "\n".join(lines)


def build_table(r: dict[str, Any]) -> Table:
    t = Table()
    idle_runs, sat = r["idle"], r["overload"]
    seed_lifo = "seed LIFO port"
    t.section("LIFO queue: DynamoDB units per completed task (cost meter, serialized moto server)")
    for rate in RATES:
        p = [x for x in idle_runs["product"] if x["rate"] == rate]
        s = [x for x in idle_runs["seed"] if x["rate"] == rate]
        t.add(f"write units, runner keeping up, {per_s(rate)}", spread(p, "wcu"), spread(s, "wcu"), seed_lifo)
        t.add(f"read units, runner keeping up, {per_s(rate)}", spread(p, "rcu"), spread(s, "rcu"), seed_lifo)
    t.add("write units, runner saturated (3x overload)", spread(sat["product"], "wcu"), spread(sat["seed"], "wcu"), seed_lifo)
    t.add("read units, runner saturated (3x overload)", spread(sat["product"], "rcu"), spread(sat["seed"], "rcu"), seed_lifo)
    t.section(f"Dollars per million tasks, runner keeping up ({REGION} on-demand list prices, {PRICES_AS_OF.split(' (')[0]})")
    for rate in RATES:
        d = r["dollars"]
        t.add(f"$ per million tasks at {per_s(rate)}", d[f"product@{rate:g}"]["total"], d[f"seed@{rate:g}"]["total"], seed_lifo)
        t.add(f"$ per million tasks at {per_s(rate)}", d[f"product@{rate:g}"]["total"], d[f"sqs@{rate:g}"]["total"],
              "SQS standard + Lambda (no LIFO/priorities/shedding)")
    utilisation = f"{DEFAULT_UTILISATION:.0%}"
    t.section(f"Dollars per million tasks on provisioned capacity (BillingMode PROVISIONED, steady flow, {utilisation} "
              f"utilisation assumed; break-even against on-demand at {break_even_utilisation()['write']:.0%})")
    for rate in RATES:
        d = r["dollars"]
        t.add(f"$ per million tasks at {per_s(rate)}, provisioned", d[f"product-provisioned@{rate:g}"]["total"],
              d[f"product@{rate:g}"]["total"], "this project on-demand")
        t.add(f"$ per million tasks at {per_s(rate)}, provisioned", d[f"product-provisioned@{rate:g}"]["total"],
              d[f"sqs@{rate:g}"]["total"], "SQS standard + Lambda (no LIFO/priorities/shedding)")
    t.section("Lambda invocations per 1,000 tasks (invocation model, template values)")
    for rate in RATES:
        m = r["model"]
        p, s = m[f"product@{rate:g}"], m[f"seed@{rate:g}"]
        t.add(f"Trigger at {per_s(rate)}", spread(p, "trigger_per_1000"), spread(s, "trigger_per_1000"), seed_lifo, 1)
        t.add(f"ProcessTasks at {per_s(rate)}", spread(p, "worker_per_1000"), spread(s, "worker_per_1000"), seed_lifo, 1)
        t.add(f"all functions at {per_s(rate)}", spread(p, "total_per_1000"), spread(s, "total_per_1000"), seed_lifo, 1)
        t.add(f"SNS publishes at {per_s(rate)}", spread(p, "publishes_per_1000"), spread(s, "publishes_per_1000"), seed_lifo, 1)
        t.add(f"time to finish ÷ time to arrive at {per_s(rate)}", spread(p, "finish_over_arrival"),
              spread(s, "finish_over_arrival"), seed_lifo)
    pickup.add_rows(t, r["model"], RATES)
    t.section("LIFO worker, 1 and 8 concurrent invocations (backlog created beforehand, runner taking no time)")
    wr = r["workers"]
    for key, label, digits in (("lost_per_task", "lost claims per completed task", 2), ("requests", "requests per completed task", 2),
                               ("wcu", "write units per completed task", 2), ("rcu", "read units per completed task", 2)):
        for count in (1, 8):
            p = [x for x in wr["product"] if x["workers"] == count]
            s = [x for x in wr["seed"] if x["workers"] == count]
            t.add(f"{label}, {count} worker{'s' if count > 1 else ''}", spread(p, key), spread(s, key), seed_lifo, digits)
    t.section("Freshness at 3x overload (runner 3 x 15 s, same Poisson arrivals, scaled clock)")
    t.add("age at claim, median (s)", spread(sat["product"], "age_median"), spread(sat["seed"], "age_median"), seed_lifo, 1)
    t.add("age at claim, p95 (s)", spread(sat["product"], "age_p95"), spread(sat["seed"], "age_p95"), seed_lifo, 1)
    t.add("share of tasks done", spread(sat["product"], "done_share"), spread(sat["seed"], "done_share"), seed_lifo)
    t.add("share of tasks shed (past TTL, never claimable)", spread(sat["product"], "shed_share"),
          spread(sat["seed"], "shed_share"), seed_lifo)
    t.add("share past TTL still waiting, never shed", spread(sat["product"], "expired_unshed_share"),
          spread(sat["seed"], "expired_unshed_share"), seed_lifo)
    t.add("claims after TTL (must be 0)", spread(sat["product"], "claims_after_ttl"), spread(sat["seed"], "claims_after_ttl"), seed_lifo, 0)
    t.add("completions / runner capacity", spread(sat["product"], "capacity_used"), spread(sat["seed"], "capacity_used"), seed_lifo)
    t.section("Matcher, same agents and callers (serialized moto server)")
    mr = r["matcher"]
    figures = (("matches_per_second", "matches/s", 1), ("requests_per_match", "requests per match", 2),
               ("lost_per_match", "calls lost per match", 2), ("aborted_per_match", "aborted transactions per match", 2),
               ("gave_up", "callers given up", 0), ("double_assignments", "double assignments", 0))
    for key, label, digits in figures:
        for count in (1, 4, 8, 16):
            p = [x for x in mr["product"] if x["matchers"] == count and x["repetition"] != "metered"]
            s = [x for x in mr["seed"] if x["matchers"] == count and x["repetition"] != "metered"]
            t.add(f"{label}, {count} matcher{'s' if count > 1 else ''}", spread(p, key), spread(s, key), "seed matcher port", digits)
    for key, label, base, digits in (("matches_per_transaction", "matches per transaction, {} matchers", lambda n: 1.0, 1),
                                     ("took_part", "matchers that wrote pairs, of {}", float, 0)):
        for count in (1, 4, 8, 16):
            p = [x for x in mr["product"] if x["matchers"] == count and x["repetition"] != "metered"]
            t.add(label.format(count), spread(p, key), base(count), "seed matcher port", digits)
    shared_agents = mr["product@shared"][0]["agents"] if mr["product@shared"] else 0
    for key, label, digits in (*figures, ("took_part", "matchers that wrote pairs", 0)):
        t.add(f"{label}, 8 matchers, {shared_agents} agents (helpers take part)", spread(mr["product@shared"], key),
              spread(mr["seed@shared"], key), "seed matcher port", digits)
    pm = [x for x in mr["product"] if x["repetition"] == "metered"]
    sm = [x for x in mr["seed"] if x["repetition"] == "metered"]
    t.add("write units per match (1 matcher)", spread(pm, "wcu_per_match"), spread(sm, "wcu_per_match"), "seed matcher port", 1)
    t.add("read units per match (1 matcher)", spread(pm, "rcu_per_match"), spread(sm, "rcu_per_match"), "seed matcher port", 1)
    local = r["dynamodb_local"]
    engine = "DynamoDB Local" if local["engine"].startswith("DynamoDB Local") else "serialized moto server"
    t.section(f"Overhead: create -> claim -> finish, runner taking no time ({engine})")
    o = local["overhead"]
    t.add("ms per task", Spread.of(o["product"]["ms_per_task"]), Spread.of(o["bare"]["ms_per_task"]),
          "bare PutItem + 2 UpdateItem loop", 1)
    t.add("requests per task", Spread.of(o["product"]["requests_per_task"]), Spread.of(o["bare"]["requests_per_task"]),
          "bare PutItem + 2 UpdateItem loop")
    t.section("Scale model: highest sustainable tasks/s (1,000 WCU/s + 3,000 RCU/s per partition)")
    sc = r["scale"]
    seed_rate = sc["seed@idle@1"]["rate"]
    for shards in SHARDS:
        t.add(f"{shards} shard{'s' if shards > 1 else ''}, runner keeping up", sc[f"product@idle@{shards}"]["rate"], seed_rate,
              "seed: one PENDING index key", 0)
    seed_sat = sc["seed@saturated@1"]["rate"]
    for shards in SHARDS:
        t.add(f"{shards} shard{'s' if shards > 1 else ''}, runner saturated", sc[f"product@saturated@{shards}"]["rate"], seed_sat,
              "seed: one PENDING index key", 0)
    t.section(f"Scale model, shards owned by claim lanes ({TASKS_PER_REQUEST} tasks per producer request; target "
              f"{TARGET_RATE:,} tasks/s)")
    for shards in SHARDS:
        owned = sc[f"owned@idle@{shards}"]
        t.add(f"{shards} shard{'s' if shards > 1 else ''}, runner keeping up, owned shards ({owned['workers']} workers)",
              owned["rate"], sc[f"product@idle@{shards}"]["rate"], "every worker reading every shard", 0)
    return t


# ---- results.md -----------------------------------------------------------------------------------------


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.node()}: {cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, Python {platform.python_version()}"


def details(r: dict[str, Any]) -> str:
    out: list[str] = []
    local = r["dynamodb_local"]
    cc = local.get("cross_check", {})
    out.append("## The cost meter against DynamoDB Local\n")
    if "compared" in cc:
        fs, fn = cc["found_something"], cc["found_nothing"]
        out.append(
            f"Engine: {local['engine']}. {cc['compared']} non-transactional requests compared (a product run, a bare "
            f"loop, a seed LIFO replay, a 2-matcher Matcher run and hand-made requests), table and each index apart: "
            f"**{cc['agreed']} agreed**. Of the requests that read or wrote something, {fs['agreed']} of "
            f"{fs['compared']} agreed; of the reads that found nothing, {fn['agreed']} of {fn['compared']}.\n"
        )
        out.append("| operation | compared | agreed |\n|---|---:|---:|")
        out += [f"| {op} | {v['compared']} | {v['agreed']} |" for op, v in cc["by_operation"].items()]
        if cc["differences"]:
            out.append("\nWhere they differed (requests):\n")
            out += [f"- {what}: {n}" for what, n in cc["differences"].items()]
            out.append(
                "\nA read that finds nothing costs DynamoDB's minimum (0.5 unit eventually consistent, 1 strongly "
                "consistent: \"Queries that do not return results consume the minimum number of read capacity "
                "units\", Query API reference; a missing BatchGetItem key is read as a GetItem); DynamoDB Local "
                "reports 0 for those. The meter keeps DynamoDB's rule."
            )
    else:
        out.append(f"Not run: {cc.get('skipped', 'unknown')}.")
    out.append("\n## Units by index (median per completed task)\n")
    out.append("| run | design | table W | index W | index R | table R | requests |\n|---|---|---:|---:|---:|---:|---:|")
    for label, runs in (("1 task/s", "idle1"), ("10 tasks/s", "idle10"), ("3x overload", "sat")):
        for design in ("product", "seed"):
            if runs == "sat":
                rs = r["overload"][design]
            else:
                rate = 1.0 if runs == "idle1" else 10.0
                rs = [x for x in r["idle"][design] if x["rate"] == rate]
            by = defaultdict(list)
            for x in rs:
                for k, v in x["by_index"].items():
                    by[k].append(v)
            def get(kind: str, table: bool, rs: list = rs) -> float:
                return statistics.median(
                    [sum(v for k, v in x["by_index"].items() if k.startswith(kind) and ((k == f"{kind}:table") == table))
                     for x in rs])
            out.append(f"| {label} | {design} | {get('write', True):.2f} | {get('write', False):.2f} | "
                       f"{get('read', False):.2f} | {get('read', True):.2f} | {spread(rs, 'requests').median:.2f} |")
    out.append("\n## Invocation model details (medians per 1,000 tasks)\n")
    out.append("| design @ rate | Trigger: stream / tail call / safety net | ProcessTasks | throttled wake-up attempts | "
               "wake-ups dropped (whole run) | stream records per task | GB-s |\n|---|---|---:|---:|---:|---:|---:|")
    for key, runs in r["model"].items():
        n = runs[0]["tasks"]
        src = {k: statistics.median([x["trigger_sources"].get(k, 0) for x in runs]) * 1000 / n for k in ("stream", "tail-call", "safety-net")}
        gb = statistics.median([sum(x["gb_seconds_per_1000"].values()) for x in runs])
        out.append(f"| {key} | {src['stream']:.1f} / {src['tail-call']:.1f} / {src['safety-net']:.1f} | "
                   f"{spread(runs, 'worker_per_1000').median:.1f} | {spread(runs, 'throttles_per_1000').median:.1f} | "
                   f"{spread(runs, 'dropped_wakeups').median:.0f} | {spread(runs, 'stream_records_per_task').median:.2f} | {gb:.2f} |")
    out.append("\n## Dollars per million tasks, by service\n")
    out.append(f"Prices ({REGION}, {PRICES_AS_OF}): " + ", ".join(
        f"{k.replace('_', ' ')} ${v * (1 if 'gb_second' in k else 1e6):.{10 if 'gb_second' in k else 3}g}"
        + ("" if "gb_second" in k else " per million") for k, v in PRICES.items()) + ". Free: " + ", ".join(FREE) + ".\n")
    out.append("| design @ rate | DynamoDB | Lambda requests | Lambda GB-s | SNS | SQS | total |\n|---|---:|---:|---:|---:|---:|---:|")
    for key, d in r["dollars"].items():
        out.append(f"| {key} | {d['dynamodb']:.3f} | {d['lambda_requests']:.3f} | {d['lambda_compute']:.3f} | {d['sns']:.3f} | "
                   f"{d['sqs']:.3f} | **{d['total']:.3f}** |")
    out.append("\n## Scale model (limiting partition)\n")
    out.append("| design | regime | shards | tasks/s | limited by |\n|---|---|---:|---:|---|")
    for key, v in r["scale"].items():
        design, regime, shards = key.split("@")
        out.append(f"| {design} | {regime} | {shards} | {v['rate']:,.0f} | {v['hottest']} |")
    out.append("\nUnits per task per partition that went in (medians):\n")
    for key, parts in r["partitions"].items():
        out.append(f"- {key}: " + ", ".join(f"{k} {v:.3f}" for k, v in sorted(parts.items())))
    out.append("\n## Overload runs\n")
    for design in ("product", "seed"):
        for x in r["overload"][design]:
            out.append(f"- {design}, seed {x['seed']}: created {x['created']}, states {x['states']}, "
                       f"{x['wall_seconds']:.0f} s wall, stats {x['stats']}")
    out.append("\n## Matcher runs\n")
    for design in ("product", "seed", "product@shared", "seed@shared"):
        checks = {x["checks"] for x in r["matcher"][design]}
        out.append(f"- {design}: {len(r['matcher'][design])} runs; product checks (commit-log replay, final state): "
                   f"{', '.join(sorted(checks))}" if design.startswith("product") else f"- {design}: {len(r['matcher'][design])} runs")
    return "\n".join(out)


def write_results(path: Path, r: dict[str, Any], table: Table, plan: Plan, wall: float, command: str) -> None:
    lines = [
        "# Benchmark results: this project against the seed designs",
        "",
        f"Command: `{command}` (from the repository root; `make bench`). Generated by bench/run.py — do not edit by hand.",
        "",
        f"- Date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- Machine: {machine()}",
        f"- Wall time: {wall / 60:.1f} min",
        "- Engines: the serialized moto server (moto 5.2.5 behind one request lock, `local/emulator.py`) for the LIFO and "
        f"Matcher runs; {r['dynamodb_local']['engine']} for the overhead figure and the cost meter's cross-check; "
        "no engine for the invocation, scale and dollar models (they are models, fed with the measured units).",
        "- Counts: " + "; ".join(plan.describe()) + ("" if not plan.quick else " (**--quick**: small counts)"),
        "- Each figure: median of the runs (min–max in brackets); Ratio = this project / baseline (lower is better for "
        "costs, ages, lost claims and aborts; higher for shares done, matches/s and sustainable rates).",
        "",
        table.markdown(),
        "",
        details(r),
        "",
        "## The linger's trade-off at 1 task/s (invocation model; WorkerLingerSeconds, everything else at its default)",
        "",
        pickup.linger_markdown(r["model"], pickup.default_linger()),
        "",
        pickup.realtime_section(),
        board_section(),
        "What each figure means and how it is measured: docs/benchmarks.md.",
        "",
    ]
    path.write_text("\n".join(lines))


def board_section() -> str:
    """The queue board's timing is a benchmark of its own (bench/board_bench.py writes bench/results-board.md, one
    section per engine and size); its table rows are carried here so that a `make bench` keeps them."""
    path = ROOT / "bench" / "results-board.md"
    if not path.exists():
        return ""
    rows = ["| engine, tasks in queue work | GET / median, s | of which depth('work'), s |", "|---|---:|---:|"]
    title = page = ""
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if line.startswith("## "):
            title = line[3:]
        elif line.startswith("| GET /"):
            page = cells[2]
        elif line.startswith("| of which") and title:
            rows.append(f"| {title} | {page} | {cells[2]} |")
    return "\n".join(["## The queue board with a big queue", "",
                      "From [bench/results-board.md](results-board.md) (bench/board_bench.py; commands and dates there):",
                      "", *rows, ""])


def scale_markdown(r: dict[str, Any]) -> str:
    sc = r["scale"]
    lines = ["| shards | this project, runner keeping up | limited by | this project, runner saturated | limited by |",
             "|---:|---:|---|---:|---|"]
    for shards in SHARDS:
        idle, sat = sc[f"product@idle@{shards}"], sc[f"product@saturated@{shards}"]
        lines.append(f"| {shards} | {idle['rate']:,.0f} | {idle['hottest']} | {sat['rate']:,.0f} | {sat['hottest']} |")
    seed_idle, seed_sat = sc["seed@idle@1"], sc["seed@saturated@1"]
    lines.append(f"| seed (1 key, cannot shard) | {seed_idle['rate']:,.0f} | {seed_idle['hottest']} | {seed_sat['rate']:,.0f} | "
                 f"{seed_sat['hottest']} |")
    capacity, seconds = SCALE_RUNNER
    lines += ["", f"Shards owned by claim lanes (each lane reads only its shards; {TASKS_PER_REQUEST} tasks per producer "
              f"request; workers: one claim per {CLAIM_SECONDS * 1000:.0f} ms each, a runner of {capacity} tasks x {seconds:g} s):", "",
              "| shards | runner keeping up, tasks/s | workers (claim lanes) | limited by | runner saturated, tasks/s | limited by |",
              "|---:|---:|---:|---|---:|---|"]
    for shards in SHARDS:
        idle, sat = sc[f"owned@idle@{shards}"], sc[f"owned@saturated@{shards}"]
        lines.append(f"| {shards} | {idle['rate']:,.0f} | {idle['workers']} | {idle['hottest']} | {sat['rate']:,.0f} | {sat['hottest']} |")
    return "\n".join(lines)


def update_docs(r: dict[str, Any], table: Table, header: str) -> bool:
    """Put the last full run's table, scale result and linger trade-off into docs/benchmarks.md and
    docs/scaling.md, between their markers."""
    parts = (("last-run", f"{header}\n\n{table.markdown()}"), ("scale", scale_markdown(r)),
             ("linger", pickup.linger_markdown(r["model"], pickup.default_linger())))
    written = False
    for path in (ROOT / "docs" / "benchmarks.md", ROOT / "docs" / "scaling.md"):
        if not path.exists():
            continue
        text = path.read_text()
        for name, body in parts:
            begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
            if begin in text and end in text:
                head, rest = text.split(begin, 1)
                _, tail = rest.split(end, 1)
                text = f"{head}{begin}\n{body}\n{end}{tail}"
        path.write_text(text)
        written = True
    return written


# ---- main -------------------------------------------------------------------------------------------------


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
    say("5/5 scale and dollar models")
    r["partitions"] = {
        "product@idle": median_partitions([x for x in r["idle"]["product"] if x["rate"] == max(RATES)]),
        "seed@idle": median_partitions([x for x in r["idle"]["seed"] if x["rate"] == max(RATES)]),
        "product@saturated": median_partitions(r["overload"]["product"]),
        "seed@saturated": median_partitions(r["overload"]["seed"]),
    }
    r["scale"] = scale_model(r["partitions"])
    r["dollars"] = dollars(r["idle"], r["model"])
    wall = time.monotonic() - started
    table = build_table(r)
    command = ".venv/bin/python bench/run.py" + (" --quick" if args.quick else "")
    write_results(Path(args.out), r, table, plan, wall, command)
    if not args.quick and Path(args.out).resolve() == (ROOT / "bench" / "results.md").resolve():
        header = (f"Last full run: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}, {wall / 60:.1f} min, "
                  f"{machine()}; engines and counts in bench/results.md.")
        update_docs(r, table, header)
    Path(args.json).write_text(json.dumps({"plan": plan.describe(), "wall_seconds": wall, **r}, indent=1, default=str))
    print()
    print(table.markdown())
    print()
    say(f"done in {wall / 60:.1f} min: {args.out}")


if __name__ == "__main__":
    main()
