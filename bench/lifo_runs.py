"""The LIFO work queue, product against the seed port, with the same arrivals on the same engine.

Three kinds of run, each for ``--design product`` or ``--design seed``:

- ``idle``: a runner that takes no time, ``--rate`` tasks/s. The invocation model
  (``bench/invocation_model.py``) decides when the worker runs (the product's stream batches and the tasks each
  names, wake-ups, throttling, tail calls, the product's safety net); this run replays that schedule in virtual time with the real code on the emulator, the cost meter on every client,
  and reports write and read units per completed task.
- ``overload``: the runner at the template's defaults (3 tasks at once, 15 s each) and Poisson arrivals at
  ``--load`` times what it can do, on a scaled clock (``--scale`` real seconds per virtual second): the
  worker invoked back to back as tail calls do. Reports units per completed task (saturated) and freshness:
  age at claim (median, p95), share done, share shed, claims after the TTL.
- ``workers``: a backlog of ``--tasks`` tasks and ``--workers`` worker invocations at once (reserved
  concurrency N), a runner that takes no time: lost claims, requests and units per completed task.

The product runs through its handlers' own code: ``functions/process_tasks/app.py``'s ``handle`` (the
Worker, the tail-call decision; a stream batch, given the INSERT records of the tasks it names) and
``functions/trigger/app.py``'s ``handle_safety_net``, with a stub in place of SNS that counts publishes. The seed runs as ``bench/seed_lifo.py`` ports it.

    .venv/bin/python bench/lifo_runs.py idle --design product --rates 1,10 --tasks 100 --seeds 1,2,3
    .venv/bin/python bench/lifo_runs.py overload --design seed --scale 0.0667 --seconds 600 --ttl 120 --seeds 1

Each run prints one JSON line with its figures.

Over 400 lines: the three kinds of run share their engine set-up, arrivals and accounting; each is a
function of this module.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common  # noqa: E402  (sets paths and environment)
from bench.common import ScaledClock, VirtualClock, client_for, percentile, template_values  # noqa: E402
from bench.cost_meter import CostMeter, Totals, summarize  # noqa: E402
from bench.invocation_model import product_model, seed_model, simulate  # noqa: E402
from bench.seed_lifo import SeedLifo, SeedRunner, create_seed_table  # noqa: E402
from taskqueue.client.create import create_tasks  # noqa: E402
from taskqueue.core.model import parse_create_request  # noqa: E402
from taskqueue.core.settings import Settings  # noqa: E402
from taskqueue.services import Services  # noqa: E402
from taskqueue.store import TaskStore  # noqa: E402
from taskqueue.work import worker as worker_module  # noqa: E402
from taskqueue.work.runner import FakeLegacySystem  # noqa: E402
from tests.support import create_queue_table, load_function  # noqa: E402

QUEUE = "work"


@functools.cache
def handlers() -> tuple[Any, Any]:
    """The product's ProcessTasks and Trigger handler modules, loaded once. Their metrics (CloudWatch EMF lines
    on stdout, no AWS request) are switched off: Powertools prints them even with metrics disabled (a batch
    once 100 values pile up; every single_metric), and they would mix with the runs' output."""
    process = load_function("process_tasks")
    process.emit_metrics = lambda report: None
    trigger = load_function("trigger")
    from taskqueue.core import metrics as handler_metrics

    # Trigger's counts (its safety net's too) are single metrics, printed each, disabled or not.
    handler_metrics.count = lambda *args, **kwargs: None
    return process, trigger


@functools.cache
def worker_environment() -> dict[str, str]:
    """ProcessTasks' environment as template.yaml sets it (defaults of every parameter)."""
    from local.template.template import Template

    tpl = Template(common.ROOT / "template.yaml")
    for logical in tpl.of_type("AWS::DynamoDB::Table"):
        tpl.resolver.attrs.setdefault(f"{logical}.StreamArn", f"arn:aws:dynamodb:us-east-1:000000000000:table/{logical}/stream/bench")
    return dict(tpl.functions()["ProcessTasksFunction"].environment)


class CountingNotifier:
    """SNS in place: counts what the handlers publish (the invocation model decides what it causes)."""

    def __init__(self) -> None:
        self.wakeups: Counter[str] = Counter()  # reason -> publishes ("tail-call", the safety net's)

    def publish_wakeup(self, queue: str, reason: str, correlation: Any = None) -> str:
        self.wakeups[reason] += 1
        return "stub"


class ProductLifo:
    """The product's queue "work" as its handlers drive it."""

    def __init__(
        self, client: Any, table: str, clock: Any, runner: Any, ttl_seconds: int | None = None, **env_overrides: str
    ) -> None:
        env = {**worker_environment(), "QUEUE_TABLE_NAME": table, **env_overrides}
        self.settings = Settings.from_env(env)
        self.clock = clock
        self.ttl_seconds = ttl_seconds or self.settings.default_ttl_seconds
        self.store = TaskStore(client, self.settings, clock)
        self.notifier = CountingNotifier()
        self.services = Services(self.settings, self.store, self.notifier, clock)  # type: ignore[arg-type]
        self.runner = runner
        self.timeout = template_values().worker_timeout_seconds
        self.completed = 0
        self.invocations = 0
        self.created_ids: list[str] = []  # every task this queue's producer created, in order

    def create(self, count: int = 1) -> None:
        """A producer's request as CreateTasks makes it: the tasks and nothing else (the table's stream starts the
        worker for them)."""
        request = parse_create_request({"queue": QUEUE, "count": count, "ttlSeconds": self.ttl_seconds}, self.settings)
        summary = create_tasks(request, self.store, self.clock.now_ms())
        self.created_ids.extend(summary.task_ids)

    def invoke_worker(self) -> Any:
        return self._invoke({"queue": QUEUE})

    def invoke_stream(self, event: dict[str, Any]) -> Any:
        """ProcessTasks invoked by its TaskStream event with a batch of stream records."""
        return self._invoke(event)

    def _invoke(self, event: dict[str, Any]) -> Any:
        process, _ = handlers()
        report = process.handle(event, self.timeout, f"bench-{uuid.uuid4().hex[:8]}", self.services, self.runner)
        self.completed += report.succeeded
        self.invocations += 1
        return report

    def safety_net(self) -> None:
        _, trigger = handlers()
        trigger.handle_safety_net(self.services)


# ---- idle: the invocation model's schedule, replayed with the real code ---------------------------------


class InsertRecords:
    """The stream's INSERT records of the tasks a ProductLifo creates, for its stream batches. Each task's item is read
    back as soon as it is written (on ``reader``, a client the cost meter does not count; strongly consistent), so a
    record's NewImage is the item as inserted, raw attribute values, whatever a worker did to it later."""

    def __init__(self, reader: Any, table: str, queue: ProductLifo) -> None:
        self.reader, self.table, self.queue = reader, table, queue
        description = reader.describe_table(TableName=table)["Table"]
        self.keys = [k["AttributeName"] for k in description["KeySchema"]]
        if len(self.keys) != 1:
            raise ValueError(f"table {table}: a task's item is read by its id alone, the key schema has {self.keys}")
        self.view = description.get("StreamSpecification", {}).get("StreamViewType", "NEW_AND_OLD_IMAGES")
        self.images: list[dict[str, Any]] = []  # by arrival index

    def create(self) -> None:
        """The queue's producer, then the new tasks' items."""
        self.queue.create()
        for task_id in self.queue.created_ids[len(self.images):]:
            got = self.reader.get_item(TableName=self.table, Key={self.keys[0]: {"S": task_id}}, ConsistentRead=True)
            self.images.append(got["Item"])

    def event(self, indices: list[int]) -> dict[str, Any]:
        """A TaskStream batch: the INSERTs of the tasks created ``indices``-th (0-based), in that order."""
        return {"Records": [insert_record(self.images[index], index + 1, self.table, self.keys, self.view)
                            for index in indices]}


def insert_record(image: dict[str, Any], sequence: int, table: str, keys: list[str],
                  view: str = "NEW_AND_OLD_IMAGES") -> dict[str, Any]:
    """The stream's INSERT record of a task's item (``image``, raw attribute values), as Lambda delivers it."""
    return {
        "eventID": f"{sequence:032d}",
        "eventName": "INSERT",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "eventSourceARN": f"arn:aws:dynamodb:us-east-1:000000000000:table/{table}/stream/bench",
        "dynamodb": {
            "ApproximateCreationDateTime": int(image["taskCreated"]["N"]) // 1000,
            "Keys": {k: image[k] for k in keys},
            "NewImage": image,
            "SequenceNumber": f"{sequence:021d}",
            "SizeBytes": len(json.dumps(image)),
            "StreamViewType": view,
        },
    }


def idle_run(design: str, endpoint: str, rate: float, tasks: int, seed: int) -> dict[str, Any]:
    values = template_values()
    model = product_model(values) if design == "product" else seed_model()
    schedule = simulate(model, rate, tasks, runner_seconds=0.0, seed=seed)
    reader = client_for(endpoint)
    client = client_for(endpoint)
    meter = CostMeter(reader)
    meter.attach(client)
    # The model's stream batches (the product's).
    streams = design == "product"
    clock = VirtualClock(nested=streams)
    table = f"{design}-idle-{uuid.uuid4().hex[:8]}"
    inserts: InsertRecords | None = None
    if design == "product":
        create_queue_table(reader, table)
        queue: Any = ProductLifo(client, table, clock, lambda task: None)
        create = queue.create
        if streams:
            inserts = InsertRecords(reader, table, queue)
            create = inserts.create
    else:
        create_seed_table(reader, table)
        queue = SeedLifo(client, table, clock, SeedRunner(clock, capacity=3, seconds=0.0))
        create = queue.create_task
    for t in schedule.arrivals:
        clock.at(t, create)
    completed = 0
    invocations = Counter[str]()
    if streams:
        # A stream batch's invocation runs beside whatever else runs (no reserved concurrency): fired by the virtual
        # clock at its time, as arrivals are, so one that falls inside another worker's run (its waits) runs while
        # that one runs, as it would on AWS, instead of after it.
        assert inserts is not None

        def stream_batch(indices: list[int]) -> None:
            nonlocal completed
            completed += int(queue.invoke_stream(inserts.event(indices)).succeeded)
            invocations["stream"] += 1

        for t, indices in schedule.stream_starts:
            clock.at(t, lambda indices=indices: stream_batch(indices))
    events: list[tuple[float, str]] = [(t, "worker") for t in schedule.worker_starts]
    events += [(t, "safety-net") for t in schedule.safety_net_ticks]
    events.sort()
    for t, kind in events:
        clock.advance_to(max(t, clock.seconds()))
        if kind == "worker":
            completed += _invoke(queue, design)
            invocations["worker"] += 1
        elif design == "product":
            queue.safety_net()
            invocations["safety-net"] += 1
    clock.advance_to(clock.seconds() + 3600)  # arrivals the schedule left after its last event, if any
    while completed < tasks:  # the model drained sooner than the replay: finish with tail-call invocations
        done = _invoke(queue, design)
        invocations["extra worker"] += 1
        completed += done
        if done == 0:
            break
    totals = meter.reset()
    return {
        "kind": "idle",
        "design": design,
        "rate": rate,
        "tasks": tasks,
        "completed": completed,
        "invocations": dict(invocations),
        **_units(totals, completed),
    }


def _invoke(queue: Any, design: str) -> int:
    if design == "product":
        return int(queue.invoke_worker().succeeded)
    return int(queue.process_tasks(threaded=False).succeeded)


def _units(totals: Totals, completed: int) -> dict[str, Any]:
    figures = summarize(totals, completed)
    partitions: dict[str, float] = {}
    for (kind, _table, index, partition), units in totals.by_partition.items():
        if index is None:
            continue  # table partitions: spread by the random task id, never the hot key
        partitions[f"{kind}|{index}|{partition}"] = partitions.get(f"{kind}|{index}|{partition}", 0.0) + units / max(1, completed)
    figures["partitions"] = partitions
    figures["requests_by_operation"] = {k: v / max(1, completed) for k, v in totals.requests.items()}
    return figures


# ---- overload: the saturated runner on a scaled clock ---------------------------------------------------


def overload_run(design: str, endpoint: str, *, scale: float, seconds: float, ttl: int, load: float, seed: int,
                 meter_on: bool = True) -> dict[str, Any]:
    values = template_values()
    capacity, task_seconds = values.runner_capacity, values.runner_seconds
    rate = load * capacity / task_seconds
    clock = ScaledClock(scale)  # restarted when the measured window begins
    rng = random.Random(seed)
    arrivals: list[float] = []
    t = 0.0
    while True:
        t += rng.expovariate(rate)
        if t >= seconds:
            break
        arrivals.append(t)
    reader = client_for(endpoint)
    worker_client = client_for(endpoint, pool=capacity + 4)
    arrival_client = client_for(endpoint)
    meter = CostMeter(reader)
    if meter_on:
        meter.attach(worker_client)
        meter.attach(arrival_client)
    table = f"{design}-overload-{uuid.uuid4().hex[:8]}"
    runs: list[tuple[int, int, int]] = []  # (created ms, claim ms, ttl deadline ms) of every task run
    runs_lock = threading.Lock()
    if design == "product":
        create_queue_table(reader, table)
        legacy = FakeLegacySystem(capacity, task_seconds, clock=clock)

        def runner(task: Any) -> Any:
            with runs_lock:
                runs.append((task.created_ms, task.updated_ms, task.ttl * 1000))
            return legacy(task)

        worker_side: Any = ProductLifo(worker_client, table, clock, runner, ttl_seconds=ttl)
        arrival_side: Any = ProductLifo(arrival_client, table, clock, None, ttl_seconds=ttl)
        create = arrival_side.create
    else:
        create_seed_table(reader, table)
        worker_side = SeedLifo(worker_client, table, clock, SeedRunner(clock, capacity, task_seconds), ttl_seconds=ttl)
        arrival_side = SeedLifo(arrival_client, table, clock, None, ttl_seconds=ttl)
        create = arrival_side.create_task

    handlers()  # import the handler modules now, not inside the measured window

    def arrive() -> None:
        for when in arrivals:
            clock.sleep_until(when)
            create()

    window: dict[str, Any] = {}
    stop = threading.Event()

    def close_window() -> None:
        """At the end of the arrival window: what the table and the meter say then (work goes on meanwhile)."""
        clock.sleep_until(seconds)
        feeder.join()  # the last arrivals are written before the picture is taken
        window["totals"] = meter.snapshot()
        window["end_ms"] = clock.now_ms()
        window["items"] = _scan(reader, table)
        stop.set()

    saved_poll = worker_module.IDLE_POLL_SECONDS
    # Its poll interval is a real-time wait on the runner threads: shrink it with the rest of time.
    worker_module.IDLE_POLL_SECONDS = saved_poll * scale
    stats = Counter[str]()
    seed_runs: list[tuple[str, int, int]] = []
    feeder = threading.Thread(target=arrive, daemon=True)
    closer = threading.Thread(target=close_window, daemon=True)
    clock.restart()
    started = time.monotonic()
    start_ms = clock.now_ms()
    feeder.start()
    closer.start()
    try:
        while not stop.is_set():
            if design == "product":
                report = worker_side.invoke_worker()
                stats["invocations"] += 1
                stats["claims"] += report.claimed
                stats["lost"] += report.lost
                stats["shed_by_reader"] += report.shed
                tail = report.work_remains
            else:
                report = worker_side.process_tasks(threaded=True)
                stats["invocations"] += 1
                stats["claims"] += report.claims
                stats["bounces"] += report.bounces
                stats["lost"] += report.lost
                seed_runs.extend(report.runs)
                tail = report.tail_call
            # A tail call reaches the worker again through SNS -> Trigger -> SNS; a wake-up by the stream
            # comes within the batching window.
            clock.sleep(0.5 if tail else 1.0)
    finally:
        worker_module.IDLE_POLL_SECONDS = saved_poll
        feeder.join()
        closer.join()
    wall = time.monotonic() - started
    end_ms = window["end_ms"]
    if design == "seed":
        runs = [(created, claimed, created + ttl * 1000) for _, created, claimed in seed_runs]
    runs = [run for run in runs if run[1] <= end_ms]
    states = Counter[str]()
    expired_waiting = 0
    for item in window["items"]:
        if "taskStatus" not in item:  # the queue's control items (its record, slots) are no tasks
            continue
        status = item["taskStatus"]["S"]
        states[status] += 1
        if status == "PENDING" and int(item["taskCreated"]["N"]) + ttl * 1000 <= end_ms:
            expired_waiting += 1
    created = sum(states.values())
    done = states.get("SUCCESS", 0)
    shed = states.get("SHED", 0) + (expired_waiting if design == "product" else 0)
    ages = [(claimed - created_ms) / 1000 for created_ms, claimed, _ in runs]
    result = {
        "kind": "overload",
        "design": design,
        "scale": scale,
        "virtual_seconds": seconds,
        "wall_seconds": wall,
        "ttl": ttl,
        "load": load,
        "rate": rate,
        "created": created,
        "states": dict(states),
        "done_share": done / created if created else 0.0,
        "shed_share": shed / created if created else 0.0,
        "expired_unshed_share": (expired_waiting / created if created and design == "seed" else 0.0),
        "capacity_used": done / (seconds * capacity / task_seconds),
        "age_median": percentile(ages, 50),
        "age_p95": percentile(ages, 95),
        "claims_after_ttl": sum(1 for _, claimed, deadline in runs if claimed >= deadline),
        "runs": len(runs),
        "stats": dict(stats),
        "window_start_ms": start_ms,
    }
    if meter_on:
        result.update(_units(window["totals"], done))
    return result


# ---- workers: N concurrent worker invocations on one backlog -------------------------------------------


def workers_run(design: str, endpoint: str, *, workers: int, tasks: int, scale: float = 1.0) -> dict[str, Any]:
    """``tasks`` tasks waiting, ``workers`` worker invocations started together (reserved concurrency N), a
    runner that takes no time, each worker re-invoked (a tail call) until the queue is empty. Counts lost
    claims (conditional claims another worker won), requests and units per completed task. Real time by default
    (``scale`` 1.0): both designs' pauses (the seed's stagger and page pause, the product's pause after a lost
    round) are meant against real request latency, which a faster virtual clock would not scale."""
    reader = client_for(endpoint)
    clock = ScaledClock(scale)
    table = f"{design}-workers-{uuid.uuid4().hex[:8]}"
    if design == "product":
        create_queue_table(reader, table)
        ProductLifo(reader, table, clock, None).create(tasks)
    else:
        create_seed_table(reader, table)
        filler = SeedLifo(reader, table, clock, None)
        for _ in range(tasks):
            filler.create_task()
    handlers()
    meter = CostMeter(reader)
    barrier = threading.Barrier(workers)
    results: list[Counter[str]] = []
    lock = threading.Lock()

    def one(index: int) -> None:
        client = meter.attach(client_for(endpoint))
        counts = Counter[str]()
        if design == "product":
            # No queue-wide running limit (RUNNING_LIMIT=0): the seed has none, and this measures the claim herd alone.
            queue: Any = ProductLifo(client, table, clock, lambda task: None, RUNNING_LIMIT="0")
        else:
            queue = SeedLifo(client, table, clock, SeedRunner(clock, capacity=3, seconds=0.0))
        barrier.wait()
        while True:
            if design == "product":
                report = queue.invoke_worker()
                counts["succeeded"] += report.succeeded
                counts["lost"] += report.lost
                again = report.work_remains
            else:
                report = queue.process_tasks(threaded=True)
                counts["succeeded"] += report.succeeded
                counts["lost"] += report.lost
                again = report.tail_call
            counts["invocations"] += 1
            if not again:
                break
        with lock:
            results.append(counts)

    clock.restart()
    started = time.monotonic()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - started
    total = sum(results, Counter())
    totals = meter.reset()
    done = total["succeeded"]
    # Control items (the queue's record, slots) share the table and have no state.
    left = sum(1 for item in _scan(reader, table) if item.get("taskStatus", {"S": "SUCCESS"})["S"] != "SUCCESS")
    return {
        "kind": "workers",
        "design": design,
        "workers": workers,
        "tasks": tasks,
        "completed": done,
        "left": left,
        "lost": total["lost"],
        "lost_per_task": total["lost"] / max(1, done),
        "invocations": total["invocations"],
        "wall_seconds": wall,
        **_units(totals, done),
    }


def _scan(client: Any, table: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
    while True:
        page = client.scan(**kwargs)
        items += page["Items"]
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


# ---- command line -------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("idle", "overload", "workers"))
    parser.add_argument("--design", choices=("product", "seed"), required=True)
    parser.add_argument("--endpoint", help="a running emulator (default: start one)")
    parser.add_argument("--rates", default="1", help="idle: tasks per second, comma-separated (one run per rate and seed)")
    parser.add_argument("--tasks", type=int, default=100, help="idle: tasks per run")
    parser.add_argument("--seeds", default="1", help="comma-separated random seeds (one run each)")
    parser.add_argument("--scale", type=float, default=1 / 15, help="overload: real seconds per virtual second")
    parser.add_argument("--seconds", type=float, default=600.0, help="overload: virtual seconds of arrivals")
    parser.add_argument("--ttl", type=int, default=120, help="overload: the tasks' TTL (virtual seconds)")
    parser.add_argument("--load", type=float, default=3.0, help="overload: arrivals as a multiple of the runner's capacity")
    parser.add_argument("--no-meter", action="store_true")
    parser.add_argument("--workers", default="1,8", help="workers: concurrent worker invocations, comma-separated")
    args = parser.parse_args(argv)
    common.quiet()
    from local.emulator.server import Emulator

    emulator = None
    endpoint = args.endpoint
    if endpoint is None:
        emulator = Emulator()
        endpoint = emulator.start(timeout=common.EMULATOR_START_SECONDS)
    engine = "serialized moto server (local/emulator/server.py)" if emulator else endpoint
    seeds = [int(x) for x in args.seeds.split(",")]
    try:
        for seed in seeds:
            if args.kind == "idle":
                for rate in (float(x) for x in args.rates.split(",")):
                    result = idle_run(args.design, endpoint, rate, args.tasks, seed)
                    print(json.dumps({**result, "seed": seed, "engine": engine}), flush=True)
            elif args.kind == "workers":
                for count in (int(x) for x in args.workers.split(",")):
                    result = workers_run(args.design, endpoint, workers=count, tasks=args.tasks)
                    print(json.dumps({**result, "seed": seed, "engine": engine}), flush=True)
            else:
                result = overload_run(args.design, endpoint, scale=args.scale, seconds=args.seconds, ttl=args.ttl,
                                      load=args.load, seed=seed, meter_on=not args.no_meter)
                print(json.dumps({**result, "seed": seed, "engine": engine}), flush=True)
    finally:
        if emulator:
            emulator.stop()


if __name__ == "__main__":
    main()
