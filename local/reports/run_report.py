"""The run report: a JSON file (counts, per-function invocations and throttles, ages at claim, sheds, a
timeline) and a PNG chart (queue depth by state, completions and sheds over time, age at claim)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def build(engine: Any, scenario: dict[str, Any], timeline: list[dict[str, Any]], wall_seconds: float) -> dict[str, Any]:
    obs = engine.observer
    counts = obs.counts()
    ages = [c["age_ms"] for c in obs.claims]
    waits = [c["age_ms"] for c in obs.claims if c.get("first")]  # create -> first claim: the queue's pickup time
    stats = engine.stats()
    process = [i for i in engine.invocations if i.get("result") and "work_remains" in i["result"]]
    return {
        "scenario": scenario,
        "parameters": engine.template.parameters,
        "time_scale": engine.time_scale,
        "wall_seconds": round(wall_seconds, 1),
        "tasks": {
            "created": counts["created"],
            "succeeded": counts["SUCCESS"],
            "failed": counts["FAILURE"],
            "cancelled": counts["CANCELLED"],
            "shed": counts["shed"],
            "still_pending": counts["PENDING"],
            "still_taken": counts["TAKEN"],
        },
        "claims": {
            "count": len(ages),
            "age_ms": {"p50": percentile(ages, 0.5), "p90": percentile(ages, 0.9), "max": max(ages) if ages else None,
                       "mean": round(statistics.fmean(ages)) if ages else None},
            "create_to_first_claim_ms": {"p50": percentile(waits, 0.5), "p95": percentile(waits, 0.95),
                                         "max": max(waits) if waits else None, "count": len(waits)},
            "with_newer_task_waiting": sum(1 for c in obs.claims if c["newer_waiting"]),
            "each": [{"t": round(c["t"], 2), "age_ms": c["age_ms"], "newer_waiting": c["newer_waiting"]} for c in obs.claims],
        },
        "sheds": [{"t": round(t, 2), "age_ms": age} for t, _, age in obs.sheds],
        "tail_calls": sum(1 for i in process if i["result"]["work_remains"]),
        "engine": stats,
        "timeline": timeline,
    }


def write(report: dict[str, Any], out_dir: Path, name: str, draw: Any = None) -> tuple[Path, Path | None]:
    """The JSON report and its PNG chart (drawn by ``draw``, this module's ``chart`` by default)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / f"{name}.json"
    json_path.write_text(json.dumps(report, indent=1, default=str))
    try:
        png_path = (draw or chart)(report, out_dir / f"{name}.png")
    except ImportError:
        png_path = None
    return json_path, png_path


def function_table(report: dict[str, Any]) -> list[str]:
    """Per-function invocations, errors, throttles, timeouts and events dropped for age."""
    lines = [f"{'function':<24}{'invocations':>12}{'errors':>8}{'throttles':>10}{'timeouts':>9}{'dropped':>8}"]
    for name, s in report["engine"]["functions"].items():
        lines.append(f"{name:<24}{s['invocations']:>12}{s['errors']:>8}{s['throttles']:>10}"
                     f"{s['timeouts']:>9}{s['async']['dropped_age']:>8}")
    return lines


def chart(report: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timeline = report["timeline"]
    t = [p["t"] for p in timeline]
    fig, (depth, flow, age) = plt.subplots(3, 1, figsize=(10, 11), sharex=True)
    title = report["scenario"].get("name", "run")
    fig.suptitle(f"Local engine, scenario {title!r}: {report['scenario'].get('description', '')}", fontsize=9, wrap=True)

    depth.plot(t, [p["pending"] for p in timeline], label="PENDING (waiting)", color="tab:orange")
    depth.plot(t, [p["taken"] for p in timeline], label="TAKEN (running)", color="tab:blue")
    depth.set_ylabel("tasks in the queue")
    depth.set_title("Queue depth by state", fontsize=10)
    depth.legend(loc="upper left")
    depth.grid(alpha=0.3)

    flow.plot(t, [p["created"] for p in timeline], label="created", color="tab:gray")
    flow.plot(t, [p["succeeded"] for p in timeline], label="succeeded", color="tab:green")
    flow.plot(t, [p["failed"] for p in timeline], label="failed (dead-lettered)", color="tab:red")
    flow.plot(t, [p["shed"] for p in timeline], label="shed (past ttl)", color="tab:purple")
    flow.set_ylabel("tasks (cumulative)")
    flow.set_title("Completions and sheds over time", fontsize=10)
    flow.legend(loc="upper left")
    flow.grid(alpha=0.3)

    claims = report["claims"]["each"]
    age.scatter([c["t"] for c in claims], [c["age_ms"] / 1000 for c in claims], s=6, label="claimed task", color="tab:green")
    sheds = report["sheds"]
    if sheds:
        age.scatter([s["t"] for s in sheds], [s["age_ms"] / 1000 for s in sheds], s=6, marker="x", label="shed task (age at deletion)",
                    color="tab:purple")
    ttl = report["scenario"].get("ttl_seconds")
    if ttl:
        age.axhline(ttl, color="tab:red", linestyle="--", linewidth=1, label=f"TTL {ttl} s")
    age.set_ylabel("age (s)")
    age.set_xlabel("time since start (s)")
    age.set_title("Age of each task when claimed (LIFO keeps it low) and when shed", fontsize=10)
    age.legend(loc="upper left")
    age.grid(alpha=0.3)

    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def summary_table(report: dict[str, Any]) -> str:
    tasks, claims = report["tasks"], report["claims"]
    lines = [f"Scenario {report['scenario'].get('name')!r}: {report['wall_seconds']} s wall time", ""]
    lines.append(f"{'tasks':<28}{'count':>8}")
    for label, key in (("created", "created"), ("succeeded", "succeeded"), ("failed (dead-lettered)", "failed"),
                       ("shed (past ttl)", "shed"), ("still PENDING", "still_pending"), ("still TAKEN", "still_taken")):
        lines.append(f"{label:<28}{tasks[key]:>8}")
    age = claims["age_ms"]
    def fmt(v: float | None) -> str:
        return "-" if v is None else f"{v / 1000:.1f}s"

    lines.append(f"{'age at claim p50/p90/max':<28}{fmt(age['p50']):>8} {fmt(age['p90'])} {fmt(age['max'])}")
    first = claims["create_to_first_claim_ms"]
    lines.append(f"{'create -> first claim p50/p95/max':<28}{fmt(first['p50']):>8} {fmt(first['p95'])} {fmt(first['max'])}"
                 "  (handler seconds: not time-scaled)")
    lines.append(f"{'claims with a newer task waiting':<28} {claims['with_newer_task_waiting']} of {claims['count']}")
    lines.append(f"{'tail calls':<28}{report['tail_calls']:>8}")
    lines.append("")
    lines += function_table(report)
    for name, why in report["engine"]["skipped"].items():
        lines.append(f"{name:<24} skipped: {why}")
    return "\n".join(lines)
