"""Notifier: a refused publish is tried again with bounded, jittered backoff, then reported (PublishError)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, ParamValidationError

from taskqueue.core.errors import ConfigError
from taskqueue.core.settings import Settings
from taskqueue.wakeups.notify import (
    PERMANENT_PUBLISH_CODES,
    PUBLISH_ATTEMPTS,
    PUBLISH_BACKOFF_MAX_SECONDS,
    PUBLISH_BACKOFF_SECONDS,
    Notifier,
    PublishError,
)

SETTINGS = Settings(queue_table_name="t",
                    worker_wake_up_topic_arn="arn:aws:sns:us-east-1:1:process")


class Sns:
    """Refuses the first ``failures`` publishes with ``error``, then takes them."""

    def __init__(self, failures: int, error: Exception | None = None) -> None:
        self.failures = failures
        self.error = error or ClientError({"Error": {"Code": "KMSThrottling", "Message": "slow down"}}, "Publish")
        self.calls: list[dict[str, Any]] = []

    def publish(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        if len(self.calls) <= self.failures:
            raise self.error
        return {"MessageId": f"m-{len(self.calls)}"}


def notifier(sns: Sns, **kwargs: Any) -> tuple[Notifier, list[float]]:
    sleeps: list[float] = []
    return Notifier(sns, SETTINGS, sleep=sleeps.append, rng=random.Random(1), **kwargs), sleeps


def test_a_refused_publish_is_tried_again_and_succeeds():
    sns = Sns(failures=PUBLISH_ATTEMPTS - 1)
    n, sleeps = notifier(sns)
    assert n.publish_wakeup("work", "stream") == f"m-{PUBLISH_ATTEMPTS}"
    assert len(sns.calls) == PUBLISH_ATTEMPTS and n.retries == PUBLISH_ATTEMPTS - 1 and n.failures == 0
    assert sns.calls[0] == sns.calls[-1]  # the same message each time
    # Full jitter under a doubling, bounded ceiling.
    assert len(sleeps) == PUBLISH_ATTEMPTS - 1
    for attempt, delay in enumerate(sleeps, start=1):
        assert 0 <= delay <= min(PUBLISH_BACKOFF_MAX_SECONDS, PUBLISH_BACKOFF_SECONDS * 2 ** (attempt - 1))
    assert len(set(sleeps)) == len(sleeps)  # jittered, not a fixed schedule


def test_a_publish_refused_every_time_raises_after_the_last_attempt():
    sns = Sns(failures=100)
    n, sleeps = notifier(sns)
    with pytest.raises(PublishError, match=rf"queue 'work' on arn:aws:sns:us-east-1:1:process \({PUBLISH_ATTEMPTS} attempts\).*KMSThrottling"):
        n.publish_wakeup("work", "tail-call")
    assert len(sns.calls) == PUBLISH_ATTEMPTS and len(sleeps) == PUBLISH_ATTEMPTS - 1
    assert n.failures == 1 and n.published == 0
    assert sum(sleeps) <= sum(min(PUBLISH_BACKOFF_MAX_SECONDS, PUBLISH_BACKOFF_SECONDS * 2**i) for i in range(PUBLISH_ATTEMPTS - 1))


@pytest.mark.parametrize("code", sorted(PERMANENT_PUBLISH_CODES))
def test_a_refusal_no_retry_can_change_is_not_tried_again(code):
    sns = Sns(failures=1, error=ClientError({"Error": {"Code": code, "Message": "no"}}, "Publish"))
    n, sleeps = notifier(sns)
    with pytest.raises(PublishError, match=r"\(1 attempt\)"):
        n.publish_wakeup("work", "stream")
    assert len(sns.calls) == 1 and sleeps == []


def test_connection_errors_are_tried_again_and_bad_parameters_are_not():
    dropped = Sns(failures=1, error=EndpointConnectionError(endpoint_url="https://sns.us-east-1.amazonaws.com"))
    n, _ = notifier(dropped)
    assert n.publish_wakeup("calls", "stream") == "m-2"
    invalid = Sns(failures=1, error=ParamValidationError(report="bad"))
    n, _ = notifier(invalid)
    with pytest.raises(PublishError):
        n.publish_wakeup("calls", "stream")
    assert len(invalid.calls) == 1


def test_one_attempt_means_no_retry_and_zero_is_refused():
    sns = Sns(failures=1)
    n, _ = notifier(sns, attempts=1)
    with pytest.raises(PublishError):
        n.publish_wakeup("work", "stream")
    assert len(sns.calls) == 1
    with pytest.raises(ConfigError):
        Notifier(sns, SETTINGS, attempts=0)
