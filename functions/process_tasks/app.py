"""ProcessTasks: the worker of queue "work". Claims the newest claimable tasks while the runner has a
free slot, for up to the time budget, then tail-calls through TriggerTopic if claimable work remains.

Events: an SNS wake-up from WorkerWakeUpTopic (attribute queue=work) or {"queue": "work"}; or a batch of the queue
table's stream (the TaskStream event: new ready tasks of the queues in STREAM_START_QUEUES), a *stream start*
(taskqueue.work.stream_start): it claims the tasks the batch names unless a watcher has them. It serves only the
queues in WORKER_QUEUES (the template sets "work"): a wake-up for another queue — "calls" belongs to the Matcher —
is refused, before any claim, with an error naming the queues it serves; so is an event that is no wake-up.

The task runner (TASK_RUNNER) is loaded when Lambda starts the function (module import), after RUNNER_ENVIRONMENT is
put in the environment: a runner that cannot be loaded is logged then, and fails every invocation with a message
saying what to fix, before any task is claimed. With no runner (TASK_RUNNER empty: the template's default, so a
stack nobody gave a runner never marks real tasks done) every invocation claims nothing, logs why and counts
NoTaskRunner (NoTaskRunnerAlarm); the tasks wait PENDING."""

from __future__ import annotations

import functools
import os
from dataclasses import asdict
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.utilities.typing import LambdaContext

from taskqueue.core import metrics as handler_metrics
from taskqueue.core import run_time
from taskqueue.core.correlation import log_under, of_event
from taskqueue.services import Services
from taskqueue.wakeups.notify import queue_of_wakeup
from taskqueue.work import stream_start
from taskqueue.work.runner import TaskRunner, apply_runner_environment, build_runner
from taskqueue.work.stream_start import StreamStart
from taskqueue.work.worker import Worker, WorkerReport

logger = Logger()
tracer = Tracer()
metrics = Metrics()


@functools.cache
def services() -> Services:
    return Services.from_env()


# WorkerReport.stopped_by of a run that had no runner to claim for.
NO_RUNNER = "no-runner"


@functools.cache
def runner() -> TaskRunner | None:
    """The runner TASK_RUNNER names; ``None`` when it names none (nothing is claimed then)."""
    settings = services().settings
    if not settings.task_runner:
        return None
    apply_runner_environment(settings, os.environ)
    return build_runner(settings)


def _load_at_init() -> None:
    """Load the runner as the function starts; a failure is not cached, so the first invocation raises it again."""
    try:
        runner()
    except Exception as exc:  # noqa: BLE001 - reported by every invocation until fixed
        logger.error("the task runner could not be loaded; every invocation will fail until it is fixed",
                     extra={"error": f"{type(exc).__name__}: {exc}"})


_load_at_init()


def handle(
    event: Any, remaining_seconds: float, owner: str, svc: Services, task_runner: TaskRunner | None
) -> WorkerReport:
    if svc.settings.stream_start_queues and _is_stream_batch(event):
        reports = handle_stream(event, remaining_seconds, owner, svc, task_runner)
        return reports[0] if len(reports) == 1 else _batch_report(reports)
    queue = queue_of_wakeup(event)
    svc.settings.check_served(queue)
    correlation = of_event(event, owner)  # the chain this wake-up belongs to: logged, and passed on by a tail call
    log_under(logger, correlation)
    if task_runner is None:
        return no_runner(queue)
    def tail_call(q: str) -> None:  # unless a wake-up is on its way, or a worker watches already
        svc.handshake.if_idle(q, "tail-call", correlation)

    worker = Worker(
        svc.store, task_runner, capacity=svc.settings.runner_capacity, owner=owner, clock=svc.clock,
        call_for_help=lambda q: svc.notifier.send_wakeup(q, "help", correlation),
        stopped=svc.wakeups.ensure if svc.wakeups is not None else None,  # a wake-up at the delayed head
        # The tail call as claiming stops, while the run's last tasks end (a hand-over: the next run takes their slots).
        hand_over=tail_call,
        marks=svc.marks,
    )
    # Claims stop at the time budget, and each claim is of a task that can finish in this invocation (run_time).
    report = worker.run(
        queue, run_time.claim_window_seconds(svc.settings.time_budget_seconds, remaining_seconds),
        hold_seconds=remaining_seconds,
    )
    if report.work_remains and not report.handed_over:
        tail_call(queue)
    emit_metrics(report)
    logger.info("worker finished", extra={k: v for k, v in asdict(report).items() if k != "claim_ages_ms"})
    return report


def _is_stream_batch(event: Any) -> bool:
    return isinstance(event, dict) and isinstance(event.get("Records"), list) and bool(event["Records"]) and all(
        isinstance(r, dict) and r.get("eventSource") == "aws:dynamodb" for r in event["Records"])


def handle_stream(
    event: dict[str, Any], remaining_seconds: float, owner: str, svc: Services, task_runner: TaskRunner | None
) -> list[WorkerReport]:
    """A stream start: per queue the batch names tasks of, claim them here unless a watcher has them (or run the
    regular worker, on a busy queue). A batch that names none (filtered otherwise) ends at once."""
    reports = []
    for queue, named in stream_start.named_tasks(event["Records"], svc.settings).items():
        if queue not in svc.settings.served_queues:
            continue
        if task_runner is None:
            reports.append(no_runner(queue))
            continue

        def claim_here(record: Any, queue: str = queue, named: list[Any] = named) -> tuple[WorkerReport, bool]:
            starter = StreamStart(svc.store, task_runner, capacity=svc.settings.runner_capacity, owner=owner,
                                  clock=svc.clock, stopped=svc.wakeups.ensure if svc.wakeups is not None else None,
                                  marks=svc.marks)
            return starter.run_named(queue, named, record, remaining_seconds)

        report = stream_start.start(
            queue, named, read_record=svc.store.read_wake_record, history=svc.arrivals, clock=svc.clock,
            claim_here=claim_here,
            run_worker=lambda queue=queue: handle({"queue": queue}, remaining_seconds, owner, svc, task_runner),
        )
        if report.stopped_by == stream_start.NAMED:
            emit_metrics(report)
        logger.info("stream start", extra={"queue": queue, "named": len(named)} | {
            k: v for k, v in asdict(report).items() if k != "claim_ages_ms"})
        reports.append(report)
    return reports or [WorkerReport(queue="", stopped_by="nothing-named")]


def _batch_report(reports: list[WorkerReport]) -> WorkerReport:
    """The handler's answer for a batch of several queues: the first, with every queue's claims summed."""
    first = reports[0]
    first.claimed = sum(r.claimed for r in reports)
    first.succeeded = sum(r.succeeded for r in reports)
    return first


def no_runner(queue: str) -> WorkerReport:
    """No TaskRunner: claim nothing, and say so at once (a log line, NoTaskRunner for NoTaskRunnerAlarm).

    The run begins no watch, so the queue's record never shows a watcher that is not there: producers keep waking
    the queue (once the wake-up that brought this run is no longer in flight, WAKE_IN_FLIGHT_SECONDS) and the safety
    net each minute while tasks wait, each such wake-up costing one short invocation that counts again, which keeps
    the alarm on while work waits. No lingering and no tail call: nothing here could ever claim."""
    logger.warning(
        "no task runner is configured (the stack's TaskRunner parameter is empty): claiming nothing; the queue's "
        "tasks stay PENDING until a runner is deployed or their TTL passes",
        extra={"queue": queue},
    )
    handler_metrics.add_report(metrics, queue, (("NoTaskRunner", 1),), "AgeAtClaim", ())
    return WorkerReport(queue=queue, stopped_by=NO_RUNNER)


def emit_metrics(report: WorkerReport) -> None:
    handler_metrics.add_report(metrics, report.queue, (
        ("TasksClaimed", report.claimed),
        ("TasksSucceeded", report.succeeded),
        ("TasksFailed", report.failed),
        ("TasksReleased", report.released),
        ("LeasesRecovered", report.recovered),
        ("ClaimsLost", report.lost),
        ("TasksShed", report.shed),
        ("WorkerErrors", report.errors),
        ("LeasesRenewed", report.leases_renewed),
        ("WorkerRetries", report.retried),
        ("TasksTooLongForNow", report.too_long),
        ("TailCalls", int(report.work_remains)),
        ("HelpersWoken", report.helpers_woken),
    ), "AgeAtClaim", report.claim_ages_ms)


@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler
@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    svc = services()
    report = handle(event, context.get_remaining_time_in_millis() / 1000, context.aws_request_id, svc, runner())
    return asdict(report) | {"claim_ages_ms": report.claim_ages_ms[:50]}
