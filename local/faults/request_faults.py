"""Answer a share of DynamoDB requests and SNS Publish calls with an error, before they reach moto.

Rules come from ``local.faults.faults.ErrorRule``. A refused request is not applied (nothing reaches moto). With
``per="call"`` the decision is taken once per SDK call, by botocore's ``amz-sdk-invocation-id`` header (the same
on every attempt of one call), so botocore retries a throttled call and is refused every time: the error passes
the SDK's retries and reaches the code, as throttling that outlasts the retries does on AWS. A request without
that header (not botocore) is drawn on its own. Requests carrying ``X-Local-Faults: off`` (the engine's own
clients, a test's checking client) are never refused.

A ``TransactionConflictException`` decided for a ``TransactWriteItems`` is answered the way DynamoDB answers a
transaction that meets another one: ``TransactionCanceledException`` with a ``TransactionConflict`` reason on one
of its items (``None`` on the others).
"""

from __future__ import annotations

import random
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any

from local.faults.faults import DYNAMODB_CODES, SNS_CODES, ErrorRule
from local.faults.wsgi_request import Request, Response, dynamodb_error, query_error

_REMEMBERED_CALLS = 200_000
SUFFIX = " (injected by the local engine's faults)"


@dataclass
class _Rule:
    service: str
    rule: ErrorRule
    rng: random.Random
    burst_left: int = 0
    burst_code: str = ""
    decided: OrderedDict[str, str | None] = field(default_factory=OrderedDict)

    def matches(self, request: Request) -> bool:
        if request.service != self.service:
            return False
        if self.service == "sns":
            return request.operation == "Publish"
        return self.rule.operations is None or request.operation in self.rule.operations

    def decide(self, request: Request) -> tuple[str | None, bool]:
        """The code to answer (None: let it through), and whether this is a new decision (a new call)."""
        key = request.invocation_id if self.rule.per == "call" else None
        if key is not None and key in self.decided:
            return self.decided[key], False
        if self.burst_left > 0:
            self.burst_left -= 1
            code: str | None = self.burst_code
        elif self.rng.random() < self.rule.share:
            code = self.rule.codes[self.rng.randrange(len(self.rule.codes))]
            self.burst_left, self.burst_code = self.rule.burst - 1, code
        else:
            code = None
        if key is not None:
            self.decided[key] = code
            if len(self.decided) > _REMEMBERED_CALLS:
                self.decided.popitem(last=False)
        return code, True


class RequestFaults:
    def __init__(self, seed: int, dynamodb_rules: list[ErrorRule], sns_rule: ErrorRule | None) -> None:
        self.rules = [_Rule("dynamodb", rule, random.Random(f"{seed}:dynamodb:{i}")) for i, rule in enumerate(dynamodb_rules)]
        if sns_rule is not None:
            self.rules.append(_Rule("sns", sns_rule, random.Random(f"{seed}:sns")))
        # Counters: "<service>:<operation>:<code>" -> refused requests / refused SDK calls / refusals that were
        # the call's last attempt (botocore's amz-sdk-request "attempt=N; max=N": the error reached the code).
        self.stats: dict[str, Counter[str]] = {"refused_requests": Counter(), "refused_calls": Counter(),
                                               "refused_last_attempts": Counter(), "requests_seen": Counter()}

    @property
    def active(self) -> bool:
        return bool(self.rules)

    def answer(self, request: Request) -> Response | None:
        """The error response for ``request``, or None to let it through."""
        if request.exempt:
            return None
        for rule in self.rules:
            if not rule.matches(request):
                continue
            self.stats["requests_seen"][f"{request.service}:{request.operation}"] += 1
            code, new_call = rule.decide(request)
            if code is None:
                continue
            name = f"{request.service}:{request.operation}:{code}"
            self.stats["refused_requests"][name] += 1
            if new_call:
                self.stats["refused_calls"][name] += 1
            if request.attempt is not None and request.max_attempts is not None and request.attempt >= request.max_attempts:
                self.stats["refused_last_attempts"][name] += 1
            return self._error(request, code)
        return None

    def _error(self, request: Request, code: str) -> Response:
        if request.service == "sns":
            status, message = SNS_CODES[code]
            return query_error(code, message + SUFFIX, status)
        status, message = DYNAMODB_CODES[code]
        if code == "TransactionConflictException" and request.operation == "TransactWriteItems":
            items = request.json.get("TransactItems") or [{}]
            conflicted = random.Random(request.invocation_id or len(items)).randrange(len(items))
            reasons: list[dict[str, Any]] = [{"Code": "None"} for _ in items]
            reasons[conflicted] = {"Code": "TransactionConflict", "Message": message + SUFFIX}
            codes = ", ".join(r["Code"] for r in reasons)
            return dynamodb_error("TransactionCanceledException",
                                  f"Transaction cancelled, please refer cancellation reasons for specific reasons [{codes}]",
                                  400, CancellationReasons=reasons)
        return dynamodb_error(code, message + SUFFIX, status)

    def snapshot(self) -> dict[str, dict[str, int]]:
        return {name: dict(counter) for name, counter in self.stats.items()}
