"""The other side of the wake-up handshake: whoever makes work wakes the queue's worker when none watches it.

- ``after_write``: a producer (CreateTasks, ``taskq create``, the client, AgentEvents for a freed agent) has
  written: touch the queue's record, and wake the worker only if no worker watches and no wake-up is in flight.
- ``if_idle``: the backstops (Trigger's stream batch, the safety net) and a worker's tail call: wake the queue
  if no worker watches it and no wake-up is in flight, without touching ``seq`` (they are not new work).

Both answer a ``WakeUp``: the outcome as a ``str`` (the value CreateTasks answers as ``wakeup``: ``woken``,
``watched``, ``in-flight``, ``paused``, ``failed``, ``nothing-waiting``; ``stream`` where no handshake was needed: the
tasks' stream records start the worker, taskqueue.work.stream_start) and, when it ``failed``, its ``cause``
(``no-topic``, ``access-denied``, ``not-found``, ``error``) and ``problem`` (what was refused, what to do). One
name per outcome across the handlers' answers and logs, ``taskq create`` and the producer client.

The caller counts the wake-ups it sent (metric ``Wakeups``) by the outcome: this module writes no metric, so the
CLI and the client can use it too. A wake-up is claimed in the record before it is published, so among producers writing at once one publishes.
If SNS refuses the publish (after the Notifier's retries), the claim is withdrawn and ``PublishError``
propagates only from ``if_idle`` (Trigger then retries its record); ``after_write`` reports ``failed``: the
tasks are written, and the stream's backstop or the safety net wakes the queue within one of their periods.
With no topic known (a client connected by table name only), ``after_write`` still touches the record (a live
watcher must see the write) but claims nothing: ``failed``, cause ``no-topic``.
"""

from __future__ import annotations

import weakref

from aws_lambda_powertools import Logger
from botocore.exceptions import ClientError

from taskqueue.core.clock import Clock
from taskqueue.core.correlation import Correlation
from taskqueue.core.errors import TaskQueueError
from taskqueue.core.handshake import (
    WAKE_IN_FLIGHT_SECONDS,
    ProducerStep,
    WakeRecord,
    lapse_suspected,
    producer_step,
    reuse_allows,
    touch_needed,
)
from taskqueue.store import TaskStore
from taskqueue.store.dynamo import error_code
from taskqueue.wakeups.notify import Notifier

logger = Logger(child=True)

# How long past a suspect watch's end the stream's backstop reads the record again.
LAPSE_MARGIN_SECONDS = 0.1

WOKEN = "woken"
FAILED = "failed"  # the wake-up could not be published: the backstops wake the queue
NOTHING_WAITING = "nothing-waiting"
STREAM = "stream"  # ready tasks of a stream-started queue: the table's stream hands them to its worker
# Why a wake-up failed (``WakeUp.cause``).
NO_TOPIC = "no-topic"  # no topic to publish on is known (WORKER_WAKE_UP_TOPIC_ARN and TRIGGER_TOPIC_ARN unset)
ACCESS_DENIED = "access-denied"  # the caller's credentials lack a permission (sns:Publish, dynamodb:UpdateItem, KMS)
NOT_FOUND = "not-found"  # the topic (or the table) does not exist
ERROR = "error"  # anything else (throttling past the retries, the network): the problem says what
_DENIED_CODES = frozenset({"AuthorizationError", "AccessDenied", "AccessDeniedException", "KMSAccessDenied"})
_NOT_FOUND_CODES = frozenset({"NotFound", "NotFoundException", "ResourceNotFoundException"})
# The warnings a handler logs (unchanged messages: operators and tests match them).
_NOT_WOKEN = "could not wake the queue after a write; the stream or the safety net will"


class WakeUp(str):
    """What the handshake did after a write: the outcome itself (a ``str``, so ``wakeup == "woken"`` and JSON work
    as before), plus ``cause`` and ``problem`` when it ``failed`` (``None`` otherwise)."""

    cause: str | None
    problem: str | None

    def __new__(cls, outcome: str, cause: str | None = None, problem: str | None = None) -> WakeUp:
        made = super().__new__(cls, outcome)
        made.cause, made.problem = cause, problem
        return made

    @property
    def outcome(self) -> str:
        return str(self)

    @property
    def failed(self) -> bool:
        return self == FAILED

    def __repr__(self) -> str:
        extra = f", cause={self.cause!r}, problem={self.problem!r}" if self.cause or self.problem else ""
        return f"WakeUp({str(self)!r}{extra})"


def no_topic() -> WakeUp:
    return WakeUp(FAILED, NO_TOPIC, (
        "no topic to publish wake-ups on is known (WORKER_WAKE_UP_TOPIC_ARN and TRIGGER_TOPIC_ARN are unset, as for a "
        "client connected with table_name= alone): give the stack's WorkerWakeUpTopicArn output "
        "(TaskQueueClient.connect(..., wake_up_topic_arn=...)), or connect by stack name"))


def failure(queue: str, exc: BaseException, topic_arn: str | None, table: str) -> WakeUp:
    """A ``failed`` WakeUp for ``exc`` (a PublishError, a StoreError, ...): which permission or resource it was, and
    what to do. The refused request is read from the ClientError behind ``exc``."""
    client_error = next((e for e in _chain(exc) if isinstance(e, ClientError)), None)
    if client_error is None:
        return WakeUp(FAILED, ERROR, f"the wake-up of queue {queue!r} failed: {exc}")
    code = error_code(client_error)
    operation = _api_name(client_error.operation_name)
    on_sns = operation == "Publish"
    action = f"{'sns' if on_sns else 'dynamodb'}:{operation}"
    resource = (topic_arn or "the wake-up topic") if on_sns else f"queue {queue!r}'s control item in table {table!r}"
    if code in _DENIED_CODES:
        what = ("the topic's KMS key refused the caller (kms:GenerateDataKey, kms:Decrypt)" if code == "KMSAccessDenied"
                else f"{action} on {resource} was refused ({code})")
        return WakeUp(FAILED, ACCESS_DENIED, (
            f"{what}: grant the producer's role {action} on {resource} (attach the stack's ProducerPolicyArn output, "
            "which grants what enqueueing needs)"))
    if code in _NOT_FOUND_CODES:
        return WakeUp(FAILED, NOT_FOUND, (
            f"{action} found no {'topic' if on_sns else 'table'} {topic_arn if on_sns else table!r} ({code}): "
            f"check the stack's {'WorkerWakeUpTopicArn' if on_sns else 'QueueTableName'} output"))
    return WakeUp(FAILED, ERROR, f"{action} on {resource} failed ({code or 'no code'}): {exc}")


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _api_name(operation: str) -> str:
    """'update_item' (a method name, as fakes give it) or 'UpdateItem' -> 'UpdateItem'."""
    return "".join(part[:1].upper() + part[1:] for part in operation.split("_")) if operation else "?"


# Per store (one per process, as a handler's or a client's services hold it): per queue, the last read of its record
# that a watcher let producers reuse, and when that read began (monotonic s); ``reuse_allows`` says for how long.
_REUSABLE_READS: weakref.WeakKeyDictionary[TaskStore, dict[str, tuple[WakeRecord, float]]] = weakref.WeakKeyDictionary()


class ProducerHandshake:
    """``log_failures``: log each failed wake-up as a warning (the handlers do); the producer client logs one per
    cause itself."""

    def __init__(self, store: TaskStore, notifier: Notifier | None, clock: Clock, *, log_failures: bool = True) -> None:
        self._store = store
        self._notifier = notifier
        self._clock = clock
        self._log_failures = log_failures

    @property
    def topic_arn(self) -> str | None:
        """The topic wake-ups are published on (None: none known, every wake-up ``failed`` with ``no-topic``)."""
        return getattr(self._notifier, "wake_topic_arn", None)

    def _no_topic(self) -> bool:
        """Nothing to publish on: no notifier, or a Notifier that knows no topic (a stand-in notifier that names no
        topic, as benchmarks and tests use, is trusted to publish)."""
        return self._notifier is None or (hasattr(self._notifier, "wake_topic_arn") and self.topic_arn is None)

    def after_write(
        self, queue: str, correlation: Correlation | None = None, *, reason: str = "producer", only_if_waiting: bool = False
    ) -> WakeUp:
        """After writing work to ``queue``: what was done (a ``ProducerStep`` value, ``woken``, ``failed`` with its
        cause, or ``nothing-waiting`` when ``only_if_waiting`` found no claimable task). Never raises for a refused
        publish or record write: the work is written, and the backstops wake the queue."""
        self._store.settings.order_of(queue)  # an unknown queue is refused (InvalidTaskInput), not "failed"
        try:
            # A strongly consistent read first (a fifth of a write's price): a live watcher that looks at the index
            # itself and has not begun to stop sees this write before it can stop, so no touch is needed (issue 29;
            # ``touch_needed``). Otherwise the touch decides, as it always did.
            reads = _REUSABLE_READS.setdefault(self._store, {})
            reused = reads.get(queue)
            if reused is not None and reuse_allows(*reused, self._clock.monotonic(), self._clock.now_ms()):
                return WakeUp(ProducerStep.WATCHED.value)  # a read this process made less than READ_REUSE_SECONDS ago
            read_started = self._clock.monotonic()
            seen = self._store.read_wake_record(queue)
            if seen.read_reuse:
                reads[queue] = (seen, read_started)
            else:
                reads.pop(queue, None)
            if not touch_needed(seen, self._clock.now_ms()):
                return WakeUp(ProducerStep.WATCHED.value)
            record = self._store.touch_wake_record(queue)
            step = producer_step(record, self._clock.now_ms())
            if step is not ProducerStep.WAKE:
                return WakeUp(step.value)
            if only_if_waiting and not self._store.has_claimable(queue, shed=False):
                return WakeUp(NOTHING_WAITING)
            if self._no_topic():  # nothing to publish on: claim nothing (the claim would only be withdrawn)
                return self._failed(queue, no_topic(), _NOT_WOKEN)
            return self._claim_and_publish(queue, reason, correlation)
        except TaskQueueError as exc:
            return self._failed(queue, self._failure(queue, exc), _NOT_WOKEN)

    def if_idle(
        self, queue: str, reason: str, correlation: Correlation | None = None, *, outwait_lapse: bool = False
    ) -> WakeUp:
        """Wake ``queue`` unless a worker watches it or a wake-up is in flight; raises if the publish failed.

        ``outwait_lapse`` (the stream's backstop): a watcher that looks dead (``lapse_suspected``: it missed a
        renewal) is not trusted on its word; wait until its lease ends (a few seconds at most) and read again. Writes
        a producer made while a dead watcher was still trusted are woken so, whenever the stream's window began."""
        self._store.settings.order_of(queue)
        record = self._store.read_wake_record(queue)
        if outwait_lapse and lapse_suspected(record, self._clock.now_ms()):
            self._clock.sleep(max(0.0, (record.watch_until_ms - self._clock.now_ms()) / 1000) + LAPSE_MARGIN_SECONDS)
            record = self._store.read_wake_record(queue)
        step = producer_step(record, self._clock.now_ms())
        if step is not ProducerStep.WAKE:
            return WakeUp(step.value)
        outcome = self._claim_and_publish(queue, reason, correlation)
        if outcome == FAILED:
            raise TaskQueueError(f"could not publish a wake-up for queue {queue!r} ({reason}): {outcome.problem}")
        return outcome

    def _claim_and_publish(self, queue: str, reason: str, correlation: Correlation | None) -> WakeUp:
        now_ms = self._clock.now_ms()
        if not self._store.claim_wake(queue, now_ms, int(WAKE_IN_FLIGHT_SECONDS * 1000)):
            return WakeUp(ProducerStep.IN_FLIGHT.value)  # another writer claimed it a moment ago, or a worker watches now
        try:
            self._publish(queue, reason, correlation)
        except TaskQueueError as exc:
            self._store.withdraw_wake(queue, now_ms)
            return self._failed(queue, self._failure(queue, exc), "wake-up not published; claim withdrawn")
        ids = {"task_id": correlation.task_id} if correlation and correlation.task_id else {}
        logger.info("worker woken", extra={"queue": queue, "reason": reason, **ids})
        return WakeUp(WOKEN)

    def _failure(self, queue: str, exc: BaseException) -> WakeUp:
        return failure(queue, exc, self.topic_arn, self._store.settings.queue_table_name)

    def _failed(self, queue: str, wakeup: WakeUp, message: str) -> WakeUp:
        if self._log_failures:
            logger.warning(message,
                           extra={"queue": queue, "wakeup": str(wakeup), "cause": wakeup.cause, "error": wakeup.problem})
        return wakeup

    def _publish(self, queue: str, reason: str, correlation: Correlation | None) -> None:
        if self._notifier is None:
            raise TaskQueueError("no topic to publish wake-ups on (WORKER_WAKE_UP_TOPIC_ARN / TRIGGER_TOPIC_ARN unset)")
        self._notifier.send_wakeup(queue, reason, correlation)
