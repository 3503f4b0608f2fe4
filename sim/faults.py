"""Faults at the request boundary, and the one path every fake service's request takes (``FakeService.serve``).

The harness sets ``service.faults``: a function of the ``Request`` (service, operation, parameters, the kernel task
sending it) that returns a ``Fault`` or None, drawn from the harness's own seeded RNG. A ``Fault`` may:

- refuse the request with an error code before it applies (``error``): throttling past the SDK's retries
  (``ThrottlingException``, ``ProvisionedThroughputExceededException``), ``TransactionConflictException`` (for
  TransactWriteItems: a cancellation whose reason names one item ``TransactionConflict``), ``InternalServerError``,
  or a botocore transport error (``ReadTimeoutError``, ``ConnectTimeoutError``, ``EndpointConnectionError``);
- apply the request and lose its answer (``applied=True`` with ``error``): the caller sees the error after the write
  took effect;
- apply it, lose the answer, and have the SDK send it again (``retried=True``): the caller sees the second
  attempt's answer (a conditional write then fails its own condition);
- set the latency before and after it applies (``before_s``, ``after_s``: a slow request, up to 60 s);
- for the DynamoDB fake: read a global secondary index as it was ``index_lag_s`` ago; return a share
  (``unprocessed``, 0-1) of a BatchGetItem's keys or BatchWriteItem's requests unprocessed.

Errors are ``botocore.exceptions.ClientError`` with the response botocore parses from AWS (``aws_error``).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import (
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ParamValidationError,
    ReadTimeoutError,
)

from sim.kernel import Kernel

MESSAGES = {
    "ThrottlingException": "Rate of requests exceeds the allowed throughput.",
    "ProvisionedThroughputExceededException": "The level of configured provisioned throughput for the table was "
    "exceeded. Consider increasing your provisioning level with the UpdateTable API.",
    "RequestLimitExceeded": "Throughput exceeds the current throughput limit for your account. Please contact AWS "
    "Support at https://aws.amazon.com/support request a limit increase",
    "TransactionConflictException": "Transaction is ongoing for the item",
    "InternalServerError": "Internal server error",
    "ServiceUnavailable": "Service Unavailable",
    "Throttled": "Rate exceeded",
    "ThrottlingException.scheduler": "Rate exceeded",
}
_STATUS = {"InternalServerError": 500, "ServiceUnavailable": 503, "InternalFailure": 500}
# Error shapes botocore knows for DynamoDB, whose members it puts beside "Error" (a lower-case "message").
_MODELED = frozenset({"ConditionalCheckFailedException", "ProvisionedThroughputExceededException",
                      "ResourceNotFoundException", "TransactionConflictException", "RequestLimitExceeded",
                      "InternalServerError", "ItemCollectionSizeLimitExceededException"})
_TRANSPORT = {"ReadTimeoutError": ReadTimeoutError, "ConnectTimeoutError": ConnectTimeoutError,
              "EndpointConnectionError": EndpointConnectionError}


@dataclass(frozen=True)
class Request:
    service: str  # "dynamodb", "sns", "scheduler"
    operation: str  # as botocore names it: "UpdateItem", "Publish", "CreateSchedule"
    params: Mapping[str, Any]
    task: str | None  # the kernel task sending it (None: the harness itself)


@dataclass(frozen=True)
class Fault:
    error: str | None = None
    applied: bool = False
    retried: bool = False
    before_s: float | None = None
    after_s: float | None = None
    index_lag_s: float = 0.0
    unprocessed: float = 0.0


FaultHook = Callable[[Request], Fault | None]


def aws_error(code: str, message: str | None, operation: str, *, status: int | None = None,
              **members: Any) -> Exception:
    """The exception boto3 raises for an AWS error ``code`` (a ClientError shaped as botocore parses it), or for a
    transport failure (``ReadTimeoutError`` and friends: BotoCoreError)."""
    if code in _TRANSPORT:
        return _TRANSPORT[code](endpoint_url="https://simulated.amazonaws.com/")
    text = message if message is not None else MESSAGES.get(code, code)
    response: dict[str, Any] = {
        "Error": {"Message": text, "Code": code},
        "ResponseMetadata": {"RequestId": "SIMULATED", "HTTPStatusCode": status or _STATUS.get(code, 400),
                             "HTTPHeaders": {"x-amzn-errortype": code}, "RetryAttempts": 0},
    }
    if code in _MODELED:
        response["message"] = text
    response.update(members)
    return ClientError(response, operation)  # type: ignore[arg-type]


def unknown_parameters(operation: str, params: Mapping[str, Any], allowed: frozenset[str],
                       required: tuple[str, ...] = ()) -> None:
    """botocore's check of a request's parameters (ParamValidationError), before anything is sent."""
    problems = [f'Missing required parameter in input: "{name}"' for name in required if name not in params]
    problems += [f'Unknown parameter in input: "{name}", must be one of: {", ".join(sorted(allowed))}'
                 for name in params if name not in allowed]
    if problems:
        raise ParamValidationError(report="\n".join(problems))


class FakeService:
    """What the fakes share: the kernel (None: requests apply at once, as in a plain unit test), the fault hook,
    an RNG for the fake's own choices, and ``serve``."""

    service = "service"

    def __init__(self, kernel: Kernel | None = None, *, faults: FaultHook | None = None,
                 rng: random.Random | None = None) -> None:
        self.kernel = kernel
        self.faults = faults
        self.rng = rng or (kernel.rng if kernel is not None else random.Random(0))
        self.requests = 0
        # Without a kernel, real threads may call at once (the product's thread pools in a plain test): one at a
        # time, as a service applies each request whole. Under the kernel only one task runs anyway.
        self._alone = threading.RLock()

    def serve(self, operation: str, params: Mapping[str, Any], run: Callable[[Fault | None], Any]) -> Any:
        """One request: the fault hook asked, then (through the kernel: yield points, latency) ``run(fault)``."""
        self.requests += 1
        kernel = self.kernel
        task = kernel.current if kernel is not None else None
        fault = self.faults(Request(self.service, operation, params, task.name if task else None)) if self.faults \
            else None

        def apply() -> Any:
            if fault is None:
                return run(None)
            if fault.error and not (fault.applied or fault.retried):
                raise self.error_for(fault.error, operation, params)
            if fault.retried:
                try:
                    run(fault)
                except ClientError:
                    pass  # the first attempt's answer was lost: only the retry's is seen
            result = run(fault)
            if fault.error and fault.applied:
                raise self.error_for(fault.error, operation, params)
            return result

        if kernel is None:
            with self._alone:
                return apply()
        return kernel.request(f"{self.service}.{operation}", apply,
                              before_s=fault.before_s if fault else None, after_s=fault.after_s if fault else None)

    def error_for(self, code: str, operation: str, params: Mapping[str, Any]) -> Exception:
        """The error an injected fault raises (a fake may shape some codes its own way)."""
        return aws_error(code, None, operation)
