"""The other side of the wake-up handshake: whoever makes work wakes the queue's worker when none watches it.

- ``after_write``: a producer (CreateTasks, ``taskq create``, the client, AgentEvents for a freed agent) has
  written: touch the queue's record, and wake the worker only if no worker watches and no wake-up is in flight.
- ``if_idle``: the backstops (Trigger's stream batch, the safety net) and a worker's tail call: wake the queue
  if no worker watches it and no wake-up is in flight, without touching ``seq`` (they are not new work).

The caller counts the wake-ups it sent (metric ``Wakeups``) by the outcome: this module writes no metric, so the
CLI and the client can use it too. A wake-up is claimed in the record before it is published, so among producers writing at once one publishes.
If SNS refuses the publish (after the Notifier's retries), the claim is withdrawn and ``PublishError``
propagates only from ``if_idle`` (Trigger then retries its record); ``after_write`` reports ``failed``: the
tasks are written, and the stream's backstop or the safety net wakes the queue within one of their periods.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger

from taskqueue.core.clock import Clock
from taskqueue.core.correlation import Correlation
from taskqueue.core.errors import TaskQueueError
from taskqueue.core.handshake import WAKE_IN_FLIGHT_SECONDS, ProducerStep, producer_step
from taskqueue.store import TaskStore
from taskqueue.wakeups.notify import Notifier

logger = Logger(child=True)

WOKEN = "woken"
FAILED = "failed"  # the wake-up could not be published: the backstops wake the queue
NOTHING_WAITING = "nothing-waiting"


class QueueWaker:
    def __init__(self, store: TaskStore, notifier: Notifier | None, clock: Clock) -> None:
        self._store = store
        self._notifier = notifier
        self._clock = clock

    def after_write(
        self, queue: str, correlation: Correlation | None = None, *, reason: str = "producer", only_if_waiting: bool = False
    ) -> str:
        """After writing work to ``queue``: what was done (a ``ProducerStep`` value, ``woken``, ``failed``, or
        ``nothing-waiting`` when ``only_if_waiting`` found no claimable task). Never raises for a refused
        publish or record write: the work is written, and the backstops wake the queue."""
        self._store.settings.order_of(queue)  # an unknown queue is refused (InvalidTaskInput), not "failed"
        try:
            record = self._store.touch_wake_record(queue)
            step = producer_step(record, self._clock.now_ms())
            if step is not ProducerStep.WAKE:
                return step.value
            if only_if_waiting and not self._store.has_claimable(queue, shed=False):
                return NOTHING_WAITING
            return self._claim_and_publish(queue, reason, correlation)
        except TaskQueueError as exc:
            logger.warning(
                "could not wake the queue after a write; the stream or the safety net will",
                extra={"queue": queue, "error": str(exc)},
            )
            return FAILED

    def if_idle(self, queue: str, reason: str, correlation: Correlation | None = None) -> str:
        """Wake ``queue`` unless a worker watches it or a wake-up is in flight; raises if the publish failed."""
        self._store.settings.order_of(queue)
        record = self._store.read_wake_record(queue)
        step = producer_step(record, self._clock.now_ms())
        if step is not ProducerStep.WAKE:
            return step.value
        outcome = self._claim_and_publish(queue, reason, correlation)
        if outcome == FAILED:
            raise TaskQueueError(f"could not publish a wake-up for queue {queue!r} ({reason})")
        return outcome

    def _claim_and_publish(self, queue: str, reason: str, correlation: Correlation | None) -> str:
        now_ms = self._clock.now_ms()
        if not self._store.claim_wake(queue, now_ms, int(WAKE_IN_FLIGHT_SECONDS * 1000)):
            return ProducerStep.IN_FLIGHT.value  # another writer claimed it a moment ago, or a worker watches now
        try:
            self._publish(queue, reason, correlation)
        except TaskQueueError as exc:
            self._store.withdraw_wake(queue, now_ms)
            logger.warning("wake-up not published; claim withdrawn", extra={"queue": queue, "error": str(exc)})
            return FAILED
        ids = {"task_id": correlation.task_id} if correlation and correlation.task_id else {}
        logger.info("worker woken", extra={"queue": queue, "reason": reason, **ids})
        return WOKEN

    def _publish(self, queue: str, reason: str, correlation: Correlation | None) -> None:
        if self._notifier is None:
            raise TaskQueueError("no topic to publish wake-ups on (WORKER_WAKE_UP_TOPIC_ARN / TRIGGER_TOPIC_ARN unset)")
        self._notifier.wake_queue(queue, reason, correlation)
