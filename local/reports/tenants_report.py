"""The tenants figures (issue 30): one noisy group and several quiet ones on one runner, with groups and without.

One computation for the demo (``make demo SCENARIO=tenants``) and the benchmark (``bench/tenants.py``):

- per arrival group (the tenant the task was sent for, whether or not the task carried a ``group``): tasks created,
  share *done* (ran to an outcome: SUCCESS, or FAILURE after its attempts), share *shed* (past its TTL unclaimed),
  create -> first claim p50 / p95 in platform seconds (tasks never claimed have none);
- the runner's *busy* share: the runner seconds of the runs that overlap the arrival window, clipped to it, over
  capacity x the window;
- the targets: every quiet group >= 95 % done, quiet create -> claim p95 <= 2 s, runner >= 90 % busy, noisy tasks shed.

The inputs are plain records (``TaskRecord``, runs as (start ms, end ms)), so a test checks the arithmetic on
hand-made ones (tests/unit/test_tenants_figures.py).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

DONE, SHED, WAITING = "done", "shed", "waiting"
QUIET_DONE_TARGET = 0.95
QUIET_P95_TARGET_SECONDS = 2.0
BUSY_TARGET = 0.90


@dataclass(frozen=True)
class TaskRecord:
    tenant: str
    created_ms: int
    first_claim_ms: int | None
    outcome: str  # done | shed | waiting (neither yet: counted in created only)


def nearest_rank(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile by nearest rank (q = 0.95: the smallest value at or above 95 % of them)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def busy_share(runs: Iterable[tuple[int, int]], window: tuple[int, int], capacity: int) -> float:
    """Runner seconds inside ``window`` (ms) over ``capacity`` x its length; runs are (start ms, end ms)."""
    start, end = window
    if end <= start or capacity <= 0:
        return 0.0
    held = sum(max(0, min(b, end) - max(a, start)) for a, b in runs)
    return held / (capacity * (end - start))


def group_figures(records: Iterable[TaskRecord]) -> dict[str, dict[str, Any]]:
    by: dict[str, list[TaskRecord]] = {}
    for r in records:
        by.setdefault(r.tenant, []).append(r)
    out: dict[str, dict[str, Any]] = {}
    for tenant in sorted(by):
        rs = by[tenant]
        waits = [(r.first_claim_ms - r.created_ms) / 1000 for r in rs if r.first_claim_ms is not None]
        done = sum(1 for r in rs if r.outcome == DONE)
        shed = sum(1 for r in rs if r.outcome == SHED)
        out[tenant] = {
            "created": len(rs), "done": done, "shed": shed, "done_share": done / len(rs), "shed_share": shed / len(rs),
            "claim_p50_s": nearest_rank(waits, 0.50), "claim_p95_s": nearest_rank(waits, 0.95), "claimed": len(waits),
        }
    return out


def figures(records: Sequence[TaskRecord], runs: Iterable[tuple[int, int]], window: tuple[int, int], capacity: int,
            noisy: Iterable[str]) -> dict[str, Any]:
    """Everything the tenants table shows, and whether each target is met."""
    noisy = set(noisy)
    groups = group_figures(records)
    quiet = {g: f for g, f in groups.items() if g not in noisy}
    quiet_waits = [(r.first_claim_ms - r.created_ms) / 1000 for r in records
                   if r.tenant not in noisy and r.first_claim_ms is not None]
    quiet_created = sum(f["created"] for f in quiet.values())
    noisy_created = sum(f["created"] for g, f in groups.items() if g in noisy)
    busy = busy_share(runs, window, capacity)
    worst_done = min((f["done_share"] for f in quiet.values()), default=None)
    worst_p95 = max((f["claim_p95_s"] for f in quiet.values() if f["claim_p95_s"] is not None), default=None)
    quiet_p95 = nearest_rank(quiet_waits, 0.95)
    noisy_shed = sum(f["shed"] for g, f in groups.items() if g in noisy)
    return {
        "groups": groups,
        "quiet": {
            "created": quiet_created,
            "done_share": sum(f["done"] for f in quiet.values()) / quiet_created if quiet_created else None,
            "worst_group_done_share": worst_done,
            "claim_p95_s": quiet_p95,  # all quiet tasks pooled
            "worst_group_claim_p95_s": worst_p95,
            "claim_waits_s": sorted(round(w, 3) for w in quiet_waits),  # pooled across runs to compare code side by side
        },
        "noisy": {
            "created": noisy_created,
            "done_share": sum(f["done"] for g, f in groups.items() if g in noisy) / noisy_created if noisy_created else None,
            "shed_share": noisy_shed / noisy_created if noisy_created else None,
        },
        "busy_share": busy,
        "targets": {
            "every_quiet_group_done_95": worst_done is not None and worst_done >= QUIET_DONE_TARGET,
            "quiet_claim_p95_2s": worst_p95 is not None and worst_p95 <= QUIET_P95_TARGET_SECONDS,
            "runner_busy_90": busy >= BUSY_TARGET,
            "noisy_shed_by_ttl": noisy_shed > 0,
        },
    }


# ---- the scenario's arrivals -----------------------------------------------------------------------------------------


def arrival_groups(scenario: dict[str, Any]) -> list[tuple[str, float]]:
    """``"groups"`` of a scenario as (name, tasks/s): an entry with ``"copies": n`` stands for n groups name-1 .. name-n."""
    out: list[tuple[str, float]] = []
    for spec in scenario["groups"]:
        copies = int(spec.get("copies", 1))
        names = [spec["name"]] if copies == 1 else [f"{spec['name']}-{i}" for i in range(1, copies + 1)]
        out += [(name, float(spec["arrival_per_second"])) for name in names]
    return out


def arrivals(scenario: dict[str, Any], seed: int | None = None) -> list[tuple[float, str, int]]:
    """The scenario's arrivals as (second, group, count), in time order: each group's Poisson arrivals over
    ``duration_seconds``, gathered per ``batch_seconds`` tick into one request (sent at the tick's end). One generator
    per group (seeded from the scenario's seed and the group's name), so adding a group leaves the others' arrivals as
    they were."""
    base = scenario.get("seed", 1) if seed is None else seed
    tick = float(scenario.get("batch_seconds", 0.5))
    duration = float(scenario["duration_seconds"])
    out: list[tuple[float, str, int]] = []
    for name, rate in arrival_groups(scenario):
        rng = random.Random(f"{base}:{name}")
        counts: dict[int, int] = {}
        t = rng.expovariate(rate)
        while t < duration:
            counts[int(t // tick)] = counts.get(int(t // tick), 0) + 1
            t += rng.expovariate(rate)
        out += [(min(duration, (k + 1) * tick), name, n) for k, n in counts.items()]
    return sorted(out, key=lambda a: (a[0], a[1]))


def validate(scenario: dict[str, Any]) -> None:
    """A tenants scenario's shape: groups with positive rates, one noisy group named in ``noisy``, the schedule off."""
    groups = arrival_groups(scenario)
    if not groups or any(rate <= 0 for _, rate in groups):
        raise ValueError("a tenants scenario names its groups, each with a positive arrival_per_second")
    names = [g for g, _ in groups]
    if len(set(names)) != len(names):
        raise ValueError(f"group names repeat: {names}")
    if not set(scenario.get("noisy", [])) <= set(names) or not scenario.get("noisy"):
        raise ValueError("'noisy' names at least one of the scenario's groups")
    if scenario.get("parameters", {}).get("CreateTasksScheduleState") != "DISABLED":
        raise ValueError("a tenants scenario sends its own arrivals: CreateTasksScheduleState must be DISABLED")


def tenant_of(payload_text: str | None, group: str | None) -> str:
    """The arrival group of a task: its ``group``, else the ``tenant`` its payload names (the run without groups)."""
    if group:
        return group
    try:
        return str(json.loads(payload_text or "{}").get("tenant", "default"))
    except ValueError:
        return "default"


def table(columns: dict[str, dict[str, Any]]) -> str:
    """Side-by-side per-group table: one column pair per run (e.g. "with groups", "without groups")."""
    fmt = lambda v, pct=False: "-" if v is None else (f"{v:.0%}" if pct else f"{v:.2f}")  # noqa: E731
    labels = list(columns)
    groups = sorted({g for c in columns.values() for g in c["groups"]})
    head = f"{'group':<10}{'rate/s':>7}" + "".join(f" | {label[:30]:<30}" for label in labels)
    sub = f"{'':<17}" + "".join(f" | {'created':>7}{'done':>6}{'shed':>6}{'p95 s':>7}{'':>4}" for _ in labels)
    lines = [head, sub]
    for g in groups:
        row = f"{g:<10}{columns[labels[0]].get('rates', {}).get(g, 0):>7.2f}"
        for label in labels:
            f = columns[label]["groups"].get(g)
            if f is None:
                row += f" | {'':<30}"
                continue
            row += f" | {f['created']:>7}{fmt(f['done_share'], True):>6}{fmt(f['shed_share'], True):>6}{fmt(f['claim_p95_s']):>7}{'':>4}"
        lines.append(row)
    lines.append("")
    for label in labels:
        c = columns[label]
        t = c["targets"]
        lines.append(
            f"{label}: runner busy {c['busy_share']:.0%}; quiet done {fmt(c['quiet']['done_share'], True)} (worst group "
            f"{fmt(c['quiet']['worst_group_done_share'], True)}), quiet create->claim p95 {fmt(c['quiet']['claim_p95_s'])} s "
            f"(worst group {fmt(c['quiet']['worst_group_claim_p95_s'])} s); noisy done {fmt(c['noisy']['done_share'], True)}, "
            f"shed {fmt(c['noisy']['shed_share'], True)}; targets: "
            + ", ".join(f"{k} {'MET' if v else 'missed'}" for k, v in t.items()))
    return "\n".join(lines)
