"""ProcessTasks: the worker of queue "work". Claims the newest claimable tasks while the runner has a free slot, for up
to the time budget, then tail-calls (a wake-up on WorkerWakeUpTopic) if claimable work remains.

Events, one worker loop for all (taskqueue.work.worker): a batch of the queue table's stream (the TaskStream event:
tasks written PENDING, a queue resumed, tasks DynamoDB's TTL shed), whose ready tasks it claims by key first
(taskqueue.work.stream_batch); an SNS wake-up from WorkerWakeUpTopic (attribute queue=work: a tail call, the safety
net, a queue's scheduled wake-up at its delayed head) or {"queue": "work"}. It serves only the queues in WORKER_QUEUES
(the template sets "work"): a wake-up for another queue — "calls" belongs to the Matcher — is refused, before any
claim, with an error naming the queues it serves; so is an event that is no wake-up.

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
from taskqueue.core.correlation import Correlation, log_under, of_event
from taskqueue.core.errors import TaskQueueError
from taskqueue.services import Services
from taskqueue.store import Candidate
from taskqueue.wakeups.notify import queue_of_wakeup
from taskqueue.work.runner import TaskRunner, apply_runner_environment, build_runner
from taskqueue.work.stream_batch import is_stream_batch, read_batch
from taskqueue.work.worker import Worker, WorkerReport
from taskqueue.workflows.ttl import after_ttl_removals

logger = Logger()
tracer = Tracer()
metrics = Metrics()


@functools.cache
def services() -> Services:
    return Services.from_env()


# A stream batch whose oldest record is older than this (ApproximateCreationDateTime has whole seconds) was retried,
# replayed or held behind a long run: its named tasks are read before they are claimed.
OLD_BATCH_SECONDS = 5.0
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
    if is_stream_batch(event):
        batch = read_batch(event["Records"], svc.settings.served_queues)
        # Workflows: a PENDING task the TTL deleted ends for what waits for it, before any claim (a refused write fails
        # the invocation, and the batch is retried: each write of a fan-out may be repeated).
        after_ttl_removals(svc.store, event["Records"])
        for reason in batch.malformed:  # never failed: a retry would block the shard for nothing
            logger.error("stream record skipped: not a task this version can read", extra={"reason": reason})
            handler_metrics.count("MalformedRecords", "unknown")
        for queue, shed in sorted(batch.shed.items()):
            handler_metrics.count("TasksShed", queue, shed)
        # Each run logs under the creating request of the first task it was handed (taskqueue.core.correlation).
        # An old batch (a retry, a replay, one held behind a long run) names tasks that may have moved on: they are
        # read before they are claimed (a read unit each, where a refused claim costs a write).
        old = batch.oldest_s is not None and svc.clock.now_ms() / 1000 - batch.oldest_s > OLD_BATCH_SECONDS
        reports = [run_queue(queue, batch.named.get(queue, []), remaining_seconds, owner, svc, task_runner,
                             _first_task(batch.first.get(queue), owner), read_first=old)
                   for queue in batch.runs]
        return _batch_report(reports)
    queue = queue_of_wakeup(event)
    svc.settings.check_served(queue)
    correlation = of_event(event, owner)  # the chain this wake-up belongs to: logged, and passed on by a tail call
    return run_queue(queue, [], remaining_seconds, owner, svc, task_runner, correlation)


def run_queue(
    queue: str, named: list[Candidate], remaining_seconds: float, owner: str, svc: Services,
    task_runner: TaskRunner | None, correlation: Correlation | None, *, read_first: bool = False,
) -> WorkerReport:
    """One run of the worker loop for ``queue`` (``named``: tasks a stream batch made claimable, claimed first)."""
    correlation = correlation or Correlation(owner)
    log_under(logger, correlation)
    if task_runner is None:
        return no_runner(queue)
    worker = Worker(
        svc.store, task_runner, capacity=svc.settings.runner_capacity, owner=owner, clock=svc.clock,
        stopped=svc.wakeups.ensure if svc.wakeups is not None else None,  # a wake-up at the delayed head
        marks=svc.marks, tail_call=lambda q: tail_call(q, svc, correlation),
    )
    # Claims stop at the time budget, and each claim is of a task that can finish in this invocation (run_time).
    report = worker.run(
        queue, run_time.claim_window_seconds(svc.settings.time_budget_seconds, remaining_seconds),
        hold_seconds=remaining_seconds, named=named, named_read_first=read_first,
    )
    if report.work_remains and not report.tail_called_early:  # one tail call a run
        tail_call(queue, svc, correlation)
    emit_metrics(report)
    logger.info("worker finished", extra={"named": len(named)} | {
        k: v for k, v in asdict(report).items() if k != "claim_ages_ms"})
    return report


def _first_task(first: tuple[str | None, str] | None, owner: str) -> Correlation | None:
    return None if first is None else Correlation(first[0] or owner, first[1])


def tail_call(queue: str, svc: Services, correlation: Correlation) -> None:
    """Claimable work remains at the budget: the next invocation starts for it (a wake-up on WorkerWakeUpTopic). A
    publish SNS refuses after its retries fails the invocation: Lambda retries it (SNS, the safety net back it up)."""
    if svc.notifier is None:
        raise TaskQueueError("WORKER_WAKE_UP_TOPIC_ARN is not set: the worker cannot tail-call for the work it left")
    svc.notifier.publish_wakeup(queue, "tail-call", correlation)


def _batch_report(reports: list[WorkerReport]) -> WorkerReport:
    """The handler's answer for a batch: one queue's report, or every queue's claims summed into the first."""
    if not reports:
        return WorkerReport(queue="", stopped_by="nothing-to-run")
    first = reports[0]
    for other in reports[1:]:
        first.claimed += other.claimed
        first.succeeded += other.succeeded
    return first


def no_runner(queue: str) -> WorkerReport:
    """No TaskRunner: claim nothing, and say so at once (a log line, NoTaskRunner for NoTaskRunnerAlarm).

    New tasks start the function again (the table's stream) and the safety net wakes it each minute while tasks
    wait, each such start costing one short invocation that counts again, which keeps the alarm on while work
    waits. No tail call: nothing here could ever claim."""
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
    ), "AgeAtClaim", report.claim_ages_ms)


@metrics.log_metrics(capture_cold_start_metric=True)
@tracer.capture_lambda_handler
@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: Any, context: LambdaContext) -> dict[str, Any]:
    svc = services()
    report = handle(event, context.get_remaining_time_in_millis() / 1000, context.aws_request_id, svc, runner())
    return asdict(report) | {"claim_ages_ms": report.claim_ages_ms[:50]}
