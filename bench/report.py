"""The presentation of a `make bench` run: the side-by-side table, the details, bench/results.md and the docs' markers.

bench/run.py gathers the figures (a dict of runs per part) and hands them here; nothing here runs a benchmark.
Just over 400 lines: one row group per part of the run, each beside the others so the table reads as one.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench import cost_floor, idle_cost, pickup, workflow_cost
from bench.common import ROOT, Spread
from bench.dollars import (
    DEFAULT_UTILISATION,
    FREE,
    PRICES,
    PRICES_AS_OF,
    REGION,
    break_even_utilisation,
)
from bench.plan import RATES, REFERENCE, REFERENCE_RUN, SHARDS, TARGET_RATE, Plan


def spread(runs: list[dict[str, Any]], key: str) -> Spread:
    return Spread.of(r[key] for r in runs if key in r)


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
        if f"on-demand@{rate:g}" in REFERENCE:
            t.add(f"$ per million tasks at {per_s(rate)}", d[f"product@{rate:g}"]["total"], REFERENCE[f"on-demand@{rate:g}"],
                  f"this project before one way to start work ({REFERENCE_RUN})")
    utilisation = f"{DEFAULT_UTILISATION:.0%}"
    t.section(f"Dollars per million tasks on provisioned capacity (BillingMode PROVISIONED, steady flow, {utilisation} "
              f"utilisation assumed; break-even against on-demand at {break_even_utilisation()['write']:.0%})")
    for rate in RATES:
        d = r["dollars"]
        t.add(f"$ per million tasks at {per_s(rate)}, provisioned", d[f"product-provisioned@{rate:g}"]["total"],
              d[f"product@{rate:g}"]["total"], "this project on-demand")
        t.add(f"$ per million tasks at {per_s(rate)}, provisioned", d[f"product-provisioned@{rate:g}"]["total"],
              d[f"sqs@{rate:g}"]["total"], "SQS standard + Lambda (no LIFO/priorities/shedding)")
        if f"provisioned@{rate:g}" in REFERENCE:
            t.add(f"$ per million tasks at {per_s(rate)}, provisioned", d[f"product-provisioned@{rate:g}"]["total"],
                  REFERENCE[f"provisioned@{rate:g}"], f"this project before one way to start work ({REFERENCE_RUN})")
    if "idle_cost" in r:
        idle_section(t, r["idle_cost"])
    if "workflows" in r:
        workflow_cost.section(t, r["workflows"])
    t.section("Lambda invocations per 1,000 tasks (invocation model, template values)")
    for rate in RATES:
        m = r["model"]
        p, s = m[f"product@{rate:g}"], m[f"seed@{rate:g}"]
        t.add(f"Trigger at {per_s(rate)}", spread(p, "trigger_per_1000"), spread(s, "trigger_per_1000"), seed_lifo, 1)
        t.add(f"ProcessTasks at {per_s(rate)}", spread(p, "worker_per_1000"), spread(s, "worker_per_1000"), seed_lifo, 1)
        t.add(f"all functions at {per_s(rate)}", spread(p, "total_per_1000"), spread(s, "total_per_1000"), seed_lifo, 1)
        t.add(f"SNS publishes at {per_s(rate)}", spread(p, "publishes_per_1000"), spread(s, "publishes_per_1000"), seed_lifo, 1)
        if all("peak_concurrency" in run for run in p + s):  # runs from before the model counted it have none
            t.add(f"peak Lambda concurrency at {per_s(rate)} (every function)", spread(p, "peak_concurrency"),
                  spread(s, "peak_concurrency"), seed_lifo, 0)
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
    for shards in SHARDS:
        t.add(f"{shards} shard{'s' if shards > 1 else ''}, runner keeping up", sc[f"product@idle@{shards}"]["rate"],
              TARGET_RATE, f"target ({TARGET_RATE:,} tasks/s)", 0)
    return t


def idle_section(t: Table, ic: dict[str, Any]) -> None:
    """An idle stack's dollars per month (bench/idle_cost.py), on-demand and provisioned, running apart from fixed fees."""
    od, pr = ic["months"]["on-demand"], ic["months"]["provisioned"]
    t.section("Idle stack, $ per month: no task, template defaults, storage aside (bench/idle_cost.py; free tiers not "
              "applied)")
    target = f"target (at most ${ic['target']:.2f})"
    t.add("on-demand: running (safety net, its reads, logs, traces)", od["running"], ic["target"], target)
    t.add("on-demand: fixed fees (alarms, dashboard, keys, custom metrics)", od["fixed"], float("nan"), "—")
    t.add("on-demand: all", od["total"], ic["target"], target)
    t.add("provisioned: running (least capacity of every table and index, safety net)", pr["running"], od["running"],
          "this project on-demand")
    t.add("provisioned: fixed fees (+ auto scaling's alarms)", pr["fixed"], od["fixed"], "this project on-demand")


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
    out.append("| design @ rate | Trigger: stream / tail call / safety net | ProcessTasks: stream batch / wake-up | "
               "worker runs ended: empty / budget / limit | named claims / of them refused, per task | throttled wake-up "
               "attempts | wake-ups dropped (whole run) | GB-s |\n|---|---|---|---|---|---:|---:|---:|")
    for key, runs in r["model"].items():
        n = runs[0]["tasks"]
        med = lambda field, k, runs=runs: statistics.median([x.get(field, {}).get(k, 0) for x in runs])  # noqa: E731
        src = {k: med("trigger_sources", k) * 1000 / n for k in ("stream", "tail-call", "safety-net")}
        gb = statistics.median([sum(x["gb_seconds_per_1000"].values()) for x in runs])
        out.append(f"| {key} | {src['stream']:.1f} / {src['tail-call']:.1f} / {src['safety-net']:.1f} | "
                   f"{med('worker_sources_per_1000', 'stream batch'):.1f} / {med('worker_sources_per_1000', 'wake-up'):.1f} | "
                   f"{med('worker_ends_per_1000', 'empty'):.1f} / {med('worker_ends_per_1000', 'budget'):.1f} / "
                   f"{med('worker_ends_per_1000', 'limit'):.1f} | {med('claims_per_task', 'named'):.2f} / "
                   f"{med('claims_per_task', 'refused'):.2f} | {spread(runs, 'throttles_per_1000').median:.1f} | "
                   f"{spread(runs, 'dropped_wakeups').median:.0f} | {gb:.2f} |")
    out.append("\n## Dollars per million tasks, by service\n")
    out.append(f"Prices ({REGION}, {PRICES_AS_OF}): " + ", ".join(
        f"{k.replace('_', ' ')} ${v * (1 if 'gb_second' in k else 1e6):.{10 if 'gb_second' in k else 3}g}"
        + ("" if "gb_second" in k else " per million") for k, v in PRICES.items()) + ". Free: " + ", ".join(FREE) + ".\n")
    out.append("| design @ rate | DynamoDB | Lambda requests | Lambda GB-s | SNS | SQS | total |\n|---|---:|---:|---:|---:|---:|---:|")
    for key, d in r["dollars"].items():
        out.append(f"| {key} | {d['dynamodb']:.3f} | {d['lambda_requests']:.3f} | {d['lambda_compute']:.3f} | {d['sns']:.3f} | "
                   f"{d['sqs']:.3f} | **{d['total']:.3f}** |")
    if "idle_cost" in r:
        out.append("\n## An idle stack's month (bench/idle_cost.py)\n")
        out.append(idle_cost.markdown(r["idle_cost"]))
    out.append("\n## The floor under the dollar targets (bench/cost_floor.py)\n")
    out.append("The targets against the least any design can pay that claims a task within a second at p95 (an "
               "invocation per stream batch or a worker kept running, whichever is cheaper, at 128 MB; a task's 3 "
               "transitions and a sparse index's put and delete), and against the least this architecture can pay ("
               f"{cost_floor.ARCHITECTURE_WRITES_PER_TASK} write units a task, {cost_floor.ARCHITECTURE_READS_PER_BATCH} "
               "read unit and 2 slot writes per stream batch, and the least run of the invocation it starts at the template's "
               "memory); this run's measured dollars. How the bounds are taken: the module's docstring.\n")
    out.append(cost_floor.markdown(cost_floor.measured(r)))
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
        "- Engines: the serialized moto server (moto 5.2.5 behind one request lock, `local/emulator/server.py`) for the LIFO and "
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
    costs: list[str] = []
    title = page = ""
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if line.startswith("## "):
            title = line[3:]
        elif line.startswith("| GET /"):
            page = cells[2]
        elif line.startswith("| of which") and title:
            rows.append(f"| {title} | {page} | {cells[2]} |")
        elif line.startswith("| DynamoDB $ per hour") and title:
            costs.append(f"| {title} | {cells[2]} | {cells[3]} |")
    if costs:
        costs[:0] = ["", "| one page open | DynamoDB $ an hour, before | after |", "|---|---:|---:|"]
    return "\n".join(["## The queue board with a big queue", "",
                      "From [bench/results-board.md](results-board.md) (bench/board_bench.py; commands and dates there):",
                      "", *rows, *costs, ""])


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
    return "\n".join(lines)


def update_docs(r: dict[str, Any], table: Table, header: str) -> bool:
    """Put the last full run's table and scale result into docs/benchmarks.md and docs/scaling.md, between their
    markers."""
    parts = (("last-run", f"{header}\n\n{table.markdown()}"), ("scale", scale_markdown(r)))
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


