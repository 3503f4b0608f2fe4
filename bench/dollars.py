"""Dollars per million tasks at published on-demand list prices, for the product, the seed LIFO demo and a
plain SQS standard queue + Lambda worker doing the same work (no LIFO, no priorities, no shedding).

PRICES: us-east-1 (N. Virginia) list prices as published on the AWS pricing pages for DynamoDB (on-demand,
Standard table class, after the 1 November 2024 reduction of on-demand throughput prices), Lambda (arm64),
SNS and SQS, as the author knew them in 2025. **Not re-checked**: this machine has no network. Free tiers
are ignored. Things that cost nothing are listed as such: DynamoDB Streams reads by Lambda triggers, SNS
deliveries to Lambda, EventBridge schedule rules.

What each design pays per task (the runner's own time is the same work in every design and left out; so is
storage — except that the seed never deletes anything, see docs/benchmarks.md):

- product on provisioned capacity (``queue_design_provisioned``): the same units at the provisioned price per
  consumed unit, at an assumed utilisation (``DEFAULT_UTILISATION``, the template's auto-scaling target); the
  break-even utilisation against on-demand is ``break_even_utilisation()`` (~29 %, reads and writes alike).
- product and seed: DynamoDB write and read units per completed task (measured with the cost meter), Lambda
  invocations and GB-seconds per task (the invocation model, durations are its assumptions), SNS publishes
  per task (the model). Tasks are written by the producer itself (no CreateTasks invocation in any design).
- SQS + Lambda (modelled from documented request counts): one SendMessage per task; the event source
  mapping's long polls (one ReceiveMessage per arriving message at these rates, plus 5 pollers x 3 empty 20 s
  long polls a minute); one DeleteMessageBatch and one Lambda invocation per batch of
  min(10, rate x 10 s) messages (BatchSize 10, MaximumBatchingWindowInSeconds 10, like the product's
  stream mapping); 10 ms per invocation at the product worker's 256 MB.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

REGION = "us-east-1"
PRICES_AS_OF = "2025 (list prices after the 2024-11-01 DynamoDB on-demand reduction); not re-checked"
PRICES = {
    "dynamodb_write_request_unit": 0.625 / 1e6,  # $ per WRU, on-demand, Standard table class
    "dynamodb_read_request_unit": 0.125 / 1e6,  # $ per RRU
    "lambda_request": 0.20 / 1e6,  # $ per invocation
    "lambda_gb_second_arm64": 0.0000133334,  # $ per GB-s, arm64, first tier
    "sns_publish": 0.50 / 1e6,  # $ per Publish request (standard topic, up to 64 KB)
    "sqs_request": 0.40 / 1e6,  # $ per request (standard queue, up to 64 KB)
}
FREE = ("DynamoDB Streams GetRecords by Lambda triggers", "SNS deliveries to Lambda", "EventBridge schedule rules")
# What an idle stack pays besides requests (bench/idle_cost.py), same source and caveat as PRICES: usage priced per
# GB or per trace, and fees per resource-month (prorated by the hour; a custom metric only for hours it has data).
USAGE_PRICES = {
    "cloudwatch_logs_ingestion_gb": 0.50,  # $ per GB ingested, CloudWatch Logs standard log class
    "xray_trace_recorded": 5.00 / 1e6,  # $ per trace recorded (Lambda with Tracing: Active)
}
MONTHLY_FEES = {
    "cloudwatch_alarm_metric": 0.10,  # $ per standard-resolution alarm metric-month (a metric-math alarm: per metric)
    "cloudwatch_dashboard": 3.00,  # $ per dashboard-month beyond the account's 3 free (up to 50 metrics each)
    "cloudwatch_custom_metric": 0.30,  # $ per custom metric-month, first 10,000 (EMF metrics: name + dimension set)
    "kms_key": 1.00,  # $ per customer managed key-month (requests $0.03 per 10,000, ~0 when idle)
}

# Provisioned capacity (BillingMode PROVISIONED), us-east-1, Standard table class, same source and caveat as PRICES:
# $ per capacity unit-hour. A unit provisioned for an hour serves 3,600 units; at utilisation u (the consumed share,
# which target-tracking auto scaling steers to AutoScalingTargetUtilization) a consumed unit costs price / (3600 u).
PROVISIONED_PRICES = {
    "dynamodb_wcu_hour": 0.00065,
    "dynamodb_rcu_hour": 0.00013,
}
# The template's AutoScalingTargetUtilization default: the utilisation the provisioned figures assume.
DEFAULT_UTILISATION = 0.70


def provisioned_unit_prices(utilisation: float) -> tuple[float, float]:
    """$ per consumed write unit and per consumed read unit on provisioned capacity at ``utilisation`` (0-1]."""
    if not 0 < utilisation <= 1:
        raise ValueError(f"utilisation is the consumed share of provisioned capacity, in (0, 1]: got {utilisation!r}")
    return (PROVISIONED_PRICES["dynamodb_wcu_hour"] / (3600 * utilisation),
            PROVISIONED_PRICES["dynamodb_rcu_hour"] / (3600 * utilisation))


def break_even_utilisation() -> dict[str, float]:
    """The utilisation above which provisioned capacity costs less per consumed unit than on-demand (writes, reads)."""
    write, read = provisioned_unit_prices(1.0)
    return {"write": write / PRICES["dynamodb_write_request_unit"], "read": read / PRICES["dynamodb_read_request_unit"]}


@dataclass(frozen=True)
class CostPerMillion:
    dynamodb: float
    lambda_requests: float
    lambda_compute: float
    sns: float
    sqs: float

    @property
    def total(self) -> float:
        return self.dynamodb + self.lambda_requests + self.lambda_compute + self.sns + self.sqs

    def as_dict(self) -> dict[str, float]:
        return {"dynamodb": self.dynamodb, "lambda_requests": self.lambda_requests, "lambda_compute": self.lambda_compute,
                "sns": self.sns, "sqs": self.sqs, "total": self.total}


def queue_design(wcu_per_task: float, rcu_per_task: float, invocations_per_task: float, gb_seconds_per_task: float,
                 publishes_per_task: float) -> CostPerMillion:
    """A design on DynamoDB + Lambda + SNS, per million tasks."""
    m = 1e6
    return CostPerMillion(
        dynamodb=m * (wcu_per_task * PRICES["dynamodb_write_request_unit"] + rcu_per_task * PRICES["dynamodb_read_request_unit"]),
        lambda_requests=m * invocations_per_task * PRICES["lambda_request"],
        lambda_compute=m * gb_seconds_per_task * PRICES["lambda_gb_second_arm64"],
        sns=m * publishes_per_task * PRICES["sns_publish"],
        sqs=0.0,
    )


def queue_design_provisioned(wcu_per_task: float, rcu_per_task: float, invocations_per_task: float,
                             gb_seconds_per_task: float, publishes_per_task: float,
                             utilisation: float = DEFAULT_UTILISATION) -> CostPerMillion:
    """``queue_design`` with the tables on provisioned capacity at ``utilisation`` (a steady flow, auto scaling on
    every table and index; each one's minimum capacity is below what a steady 10 tasks/s consumes)."""
    write, read = provisioned_unit_prices(utilisation)
    m = 1e6
    on_demand = queue_design(wcu_per_task, rcu_per_task, invocations_per_task, gb_seconds_per_task, publishes_per_task)
    return CostPerMillion(
        dynamodb=m * (wcu_per_task * write + rcu_per_task * read),
        lambda_requests=on_demand.lambda_requests,
        lambda_compute=on_demand.lambda_compute,
        sns=on_demand.sns,
        sqs=0.0,
    )


def sqs_lambda(rate: float, *, batch_size: int = 10, window_seconds: float = 10.0, pollers: int = 5,
               long_poll_seconds: float = 20.0, invocation_seconds: float = 0.010, memory_mb: int = 256) -> tuple[CostPerMillion, dict[str, Any]]:
    """A standard SQS queue with a Lambda event source mapping, per million tasks at ``rate`` tasks/s."""
    batch = max(1.0, min(batch_size, rate * window_seconds))
    empty_polls_per_task = pollers * (60.0 / long_poll_seconds) / 60.0 / rate
    requests = {
        "send": 1.0,
        "receive": 1.0 + empty_polls_per_task,
        "delete_batch": 1.0 / batch,
    }
    invocations = 1.0 / batch
    gb_seconds = invocations * invocation_seconds * memory_mb / 1024
    m = 1e6
    cost = CostPerMillion(
        dynamodb=0.0,
        lambda_requests=m * invocations * PRICES["lambda_request"],
        lambda_compute=m * gb_seconds * PRICES["lambda_gb_second_arm64"],
        sns=0.0,
        sqs=m * sum(requests.values()) * PRICES["sqs_request"],
    )
    return cost, {"requests_per_task": requests, "invocations_per_task": invocations, "batch": batch}
