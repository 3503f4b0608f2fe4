"""The call-center scenario's summary table, report files and chart (the driver is ``local/scenarios/callcenter.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from local.reports import run_report as reports


def summary_table(report: dict[str, Any]) -> str:
    calls, agents, wait = report["calls"], report["agents"], report["wait_at_match_ms"]
    def fmt(v: float | None) -> str:
        return "-" if v is None else f"{v / 1000:.1f}s"

    lines = [f"Scenario {report['scenario'].get('name')!r}: {report['wall_seconds']} s wall time", ""]
    lines.append(f"{'calls':<32}{'count':>8}")
    for label, key in (("created (callers)", "created"), ("matched with an agent", "matched"),
                       ("hung up (patience ran out: shed)", "hung_up_shed"), ("still waiting", "waiting")):
        lines.append(f"{label:<32}{calls[key]:>8}")
    lines.append(f"{'wait at match p50/p90/max':<32}{fmt(wait['p50']):>8} {fmt(wait['p90'])} {fmt(wait['max'])}")
    lines.append("")
    lines.append(f"{'agents':<32}{'count':>8}")
    lines.append(f"{'total':<32}{agents['total']:>8}")
    lines.append(f"{'busy at the end (on a call)':<32}{agents['busy']:>8}")
    lines.append(f"{'available at the end (queued)':<32}{agents['available']:>8}")
    lines.append(f"{'peak busy':<32}{agents['peak_busy']:>8}")
    per = list(agents["calls_per_agent"].values())
    if per:
        lines.append(f"{'calls per agent min/max':<32}{min(per):>8} {max(per)}")
    checks = report["checks"]
    lines.append("")
    lines.append(f"checks: agent on two calls {checks['agent_on_two_calls']}, matches not fitting the preferences "
                 f"{checks['misfit_matches']}, stale call ends {checks['stale_call_ends']}, errors {checks['errors']}")
    lines.append("")
    lines += reports.function_table(report)
    return "\n".join(lines)


def write(report: dict[str, Any], out_dir: Path, name: str) -> tuple[Path, Path | None]:
    return reports.write(report, out_dir, name, draw=chart)


def chart(report: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timeline = report["timeline"]
    t = [p["t"] for p in timeline]
    fig, (depth, flow, wait) = plt.subplots(3, 1, figsize=(10, 10), sharex=True)
    fig.suptitle(f"Local engine, scenario {report['scenario'].get('name')!r}: {report['scenario'].get('description', '')}",
                 fontsize=9, wrap=True)
    depth.plot(t, [p["waiting"] for p in timeline], label="callers waiting", color="tab:orange")
    depth.plot(t, [p["agents_busy"] for p in timeline], label="agents busy (on a call)", color="tab:blue")
    depth.plot(t, [p["agents_available"] for p in timeline], label="agents available (queued)", color="tab:green")
    depth.plot(t, [p.get("agents_ending", 0) for p in timeline], label="agents hung up, call-ended event on its way",
               color="tab:gray", linewidth=0.8)
    depth.set_ylabel("callers / agents")
    depth.set_title("Queue depth: waiting callers and agents", fontsize=10)
    depth.legend(loc="upper left")
    depth.grid(alpha=0.3)

    flow.plot(t, [p["created"] for p in timeline], label="callers", color="tab:gray")
    flow.plot(t, [p["matched"] for p in timeline], label="matched", color="tab:green")
    flow.plot(t, [p["hung_up"] for p in timeline], label="hung up (shed)", color="tab:purple")
    flow.set_ylabel("calls (cumulative)")
    flow.set_title("Matches and hang-ups over time", fontsize=10)
    flow.legend(loc="upper left")
    flow.grid(alpha=0.3)

    matches = [m for m in report["matches"] if m["waitedMs"] is not None]
    wait.scatter([m["t"] for m in matches], [m["waitedMs"] / 1000 for m in matches], s=8, color="tab:green",
                 label="wait at match")
    hang_ups = report["hang_ups"]
    if hang_ups:
        wait.scatter([h["t"] for h in hang_ups], [h["age_ms"] / 1000 for h in hang_ups], s=8, marker="x",
                     color="tab:purple", label="hang-up (waited until deleted)")
    wait.set_ylabel("seconds")
    wait.set_xlabel("time since start (s)")
    wait.set_title("How long each caller waited", fontsize=10)
    wait.legend(loc="upper left")
    wait.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
