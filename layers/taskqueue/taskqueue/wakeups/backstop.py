"""Waking workers (Trigger's side): each queue at most once per invocation, counted (``Wakeups``) and logged;
and the relay of a wake-up sent through TriggerTopic (the CLI's, after a redrive or resume) to the workers of the
queues it names.

The stream and the safety net are backstops of the wake-up handshake (``taskqueue.handshake``): they wake a queue
only if no worker watches it and no wake-up is in flight (``ProducerHandshake.if_idle``). The relay wakes as asked."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools import Logger

from taskqueue.core import metrics as handler_metrics
from taskqueue.core.correlation import CORRELATION_ATTRIBUTE, TASK_ATTRIBUTE, Correlation, of_event
from taskqueue.core.errors import TaskQueueError
from taskqueue.core.settings import Settings
from taskqueue.wakeups.notify import Notifier, wakeup_queues
from taskqueue.wakeups.producer import WOKEN, ProducerHandshake

logger = Logger(child=True)


class Backstop:
    """Wakes each queue at most once; a failed publish raises PublishError and leaves the queue un-woken, so
    the caller can fail what asked for it (a stream record, a tail call) and have it retried."""

    def __init__(
        self, notifier: Notifier, reason: str, handshake: ProducerHandshake | None = None, *, outwait_lapse: bool = False
    ) -> None:
        """``handshake``: wake only as a backstop (when no worker watches and no wake-up is in flight); without it,
        every queue asked for is woken. ``outwait_lapse`` (the stream's): a watcher that missed a renewal is waited
        out rather than trusted (``ProducerHandshake.if_idle``)."""
        self._outwait_lapse = outwait_lapse
        self._notifier = notifier
        self._reason = reason
        self._handshake = handshake
        self.looked: list[str] = []  # queues this invocation has dealt with (woken, or found watched)
        self.woken: list[str] = []

    def wake(self, queue: str, correlation: Correlation | None = None) -> None:
        """``correlation``: the ids the wake-up carries (the task that caused it, its creating request)."""
        if queue in self.looked:
            return
        if self._handshake is not None:
            outcome = self._handshake.if_idle(queue, self._reason, correlation, outwait_lapse=self._outwait_lapse)
            self.looked.append(queue)
            if outcome != WOKEN:
                logger.debug("no wake-up needed", extra={"queue": queue, "reason": self._reason, "outcome": outcome})
                return
            self.woken.append(queue)
            handler_metrics.count("Wakeups", queue)
            return
        self._notifier.publish_wakeup(queue, self._reason, correlation=correlation)
        self.looked.append(queue)
        self.woken.append(queue)
        handler_metrics.count("Wakeups", queue)
        ids = {CORRELATION_ATTRIBUTE: correlation.correlation_id, TASK_ATTRIBUTE: correlation.task_id} if correlation else {}
        logger.info("worker woken", extra={"queue": queue, "reason": self._reason, **{k: v for k, v in ids.items() if v}})


def relay(event: Mapping[str, Any], notifier: Notifier, settings: Settings) -> list[str]:
    """Wake the workers of every queue an SNS tail call names; the queues woken. Every record is checked (an
    SNS record naming a configured queue) before any queue is woken, and the relayed wake-ups keep the chain's
    correlation ids."""
    queues = wakeup_queues(event)
    for queue in queues:
        settings.order_of(queue)
    wakeups = Backstop(notifier, "tail-call")
    correlation = of_event(event, None)
    # Every queue is tried; if any wake-up could not be published (after the Notifier's own retries), the
    # invocation fails, so Lambda's asynchronous retry (EventInvokeConfig MaximumRetryAttempts) delivers the
    # notification again: a lost tail call would otherwise strand the queue until the next safety-net run.
    failed: list[str] = []
    for queue in queues:
        try:
            wakeups.wake(queue, correlation)
        except TaskQueueError as exc:
            failed.append(f"{queue}: {exc}")
            logger.warning("wake-up not published; the invocation fails so Lambda retries it",
                           extra={"queue": queue, "error": str(exc)})
    if failed:
        raise TaskQueueError(
            f"could not wake {len(failed)} of {len(queues)} queue(s) (woken: {wakeups.woken}); "
            "failing so Lambda retries the notification: " + "; ".join(failed)
        )
    return wakeups.woken
