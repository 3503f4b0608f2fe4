"""The dollar figures of `make bench` alone, in a few minutes: the invocation model (3 seeds) and units per task (one
120-task run per rate) at 1, 10 and 100 tasks/s, product and seed, then bench/run.py's own dollar and scale functions.

    .venv/bin/python bench/cost_check.py [--out bench/results-cost.md]      # JSON in bench/results-cost.json
"""
import argparse
import datetime as dt
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import bench.run as run  # noqa: E402
from bench.plan import Plan  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results-cost.md"))
args = parser.parse_args()
plan = Plan(False)
r = {}
r['model'] = run.invocation_model(plan)
procs = {d: run.start([run.PY, 'bench/lifo_runs.py', 'idle', '--design', d, '--rates', '1,10,100', '--tasks', '120', '--seeds', '1']) for d in ('product', 'seed')}
r['idle'] = {d: [x for x in run.finish(p, f'idle {d}')] for d, p in procs.items()}
r['dollars'] = run.dollars(r['idle'], r['model'])
r['partitions'] = {'product@idle': run.median_partitions([x for x in r['idle']['product'] if x['rate'] == 100.0]),
                   'seed@idle': run.median_partitions([x for x in r['idle']['seed'] if x['rate'] == 100.0])}
r['scale'] = run.scale_model(r['partitions'])
Path(args.out).with_suffix(".json").write_text(json.dumps(r, indent=1, default=str))


def med(runs, key):
    return statistics.median(x[key] for x in runs)


commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
lines = ["# Dollars per million tasks (bench/cost_check.py)", "",
         "The invocation model's 3 seeds, one 120-task cost-meter run per rate, bench/run.py's `dollars`; template defaults. "
         f"Run {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, commit `{commit}`.", "",
         "| design @ rate | $ total | DynamoDB | Lambda requests | Lambda GB-s | SNS / SQS | write units | read units | invocations per 1,000 | peak Lambda concurrency | p95 create -> claim (s) |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
for key, d in r["dollars"].items():
    design, _, rate = key.partition("@")
    base = design.replace("-provisioned", "")
    units = [x for x in r["idle"].get(base, []) if x["rate"] == float(rate)]
    runs = r["model"].get(f"{base}@{rate}", [])
    lines.append(f"| {key} | **{d['total']:.2f}** | {d['dynamodb']:.2f} | {d['lambda_requests']:.3f} | {d['lambda_compute']:.2f} | "
                 f"{d['sns'] + d['sqs']:.2f} | {med(units, 'wcu'):.2f} | {med(units, 'rcu'):.2f} | "
                 f"{med(runs, 'total_per_1000'):.1f} | {max(x['peak_concurrency'] for x in runs)} | "
                 f"{med(runs, 'claim_wait_p95'):.2f} |" if units and runs else
                 f"| {key} | **{d['total']:.2f}** | — | — | — | {d['sns'] + d['sqs']:.2f} | — | — | — | — | — |")
lines += ["", "Scale model: the highest sustainable tasks/s per shard count (each stream batch's invocation reads the "
          "queue's record once, producers read nothing):", "", "| shards | tasks/s | limited by |", "|---:|---:|---|"]
for key, v in r["scale"].items():
    if key.startswith("product@idle@"):
        lines.append(f"| {key.split('@')[-1]} | {v['rate']:,.0f} | {v['hottest']} |")
Path(args.out).write_text("\n".join(lines) + "\n")
print("\n".join(lines))
