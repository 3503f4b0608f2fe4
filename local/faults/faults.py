"""Faults the local engine injects, as AWS produces them and the emulator does not (docs/local-engine.md#faults).

``Faults`` is the setting: ``Engine(..., faults=Faults(seed=7, index_lag=0.5, ...))``, ``python -m local demo
--faults '{"seed": 7, ...}'`` (or a path to a JSON file), ``Emulator(faults=...)`` for the serialized moto
server alone. One mechanism per module, all inside the emulator's request lock (so they are atomic with the
request they act on):

| Fault | Setting | Module |
|---|---|---|
| TTL deletes late, or never during the run | ``ttl_lateness`` (seconds, or ``"never"``) | the engine's ``TtlSweeper`` |
| GSI queries see writes late | ``index_lag`` seconds, ``index_lag_indexes`` | ``local/faults/index_lag.py`` |
| DynamoDB throttling / conflicts on a share of requests | ``dynamodb_errors`` (rules) | ``local/faults/request_faults.py`` |
| SNS Publish refused on a share of calls | ``sns_publish_errors`` (a rule) | ``local/faults/request_faults.py`` |
| Lambda synchronous invoke refused with 429 over reserved concurrency | always on | ``local/delivery/sandbox.py`` ``FunctionPool`` |
| DynamoDB's 400 KB item-size limit | ``item_size_limit`` | ``local/faults/item_size.py`` |

Reproducible by seed: every random decision comes from a generator seeded by ``seed`` (one per rule), drawn in
the order the server serializes requests. The same seed and the same sequence of requests give the same faults;
with concurrent clients the order of requests varies from run to run, and with it which request meets which
decision (the shares and the counts stay put).

This module is the setting only (no moto import): the engine's process reads it, the emulator's server process
builds the mechanisms from ``server_config()``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

NEVER = "never"

# code -> (HTTP status, message) as DynamoDB says them.
DYNAMODB_CODES: dict[str, tuple[int, str]] = {
    "ThrottlingException": (400, ("Throughput exceeds the current capacity of your table or index. DynamoDB is "
                                  "automatically scaling your table or index so please try again shortly.")),
    "ProvisionedThroughputExceededException": (400, ("The level of configured provisioned throughput for the table "
                                                     "was exceeded. Consider increasing your provisioning level with "
                                                     "the UpdateTable API.")),
    "RequestLimitExceeded": (400, "Throughput exceeds the current throughput limit for your account."),
    "TransactionConflictException": (400, "Transaction is ongoing for the item"),
    "InternalServerError": (500, "Internal server error"),
}
# code -> (HTTP status, message) as SNS says them. KMSThrottling is not retried by botocore (it reaches the code
# at once); Throttled (429) and InternalError (500) are, so with per="request" the SDK's retries absorb most.
SNS_CODES: dict[str, tuple[int, str]] = {
    "KMSThrottling": (400, "The request was denied due to request throttling by AWS KMS."),
    "Throttled": (429, "Rate exceeded"),
    "InternalError": (500, "Internal Error"),
}
PER = ("call", "request")


class FaultsError(ValueError):
    """A fault setting that cannot be used; the message names it."""


@dataclass(frozen=True)
class ErrorRule:
    """Refuse ``share`` of the matching requests with one of ``codes`` (taken in turn by the rule's generator).

    ``per="call"``: the decision is taken for an SDK call (botocore's ``amz-sdk-invocation-id``) and holds for
    every attempt of it, so a refused call is refused again on each of botocore's retries and the error reaches
    the code: "throttled past the SDK's retries". ``per="request"``: each HTTP request is drawn on its own
    (the SDK's retries usually absorb it). ``burst``: a decision to refuse refuses that many consecutive
    matching calls (or requests). ``operations``: DynamoDB operation names (default: all of them; for SNS
    only ``Publish`` is ever refused)."""

    share: float
    codes: tuple[str, ...]
    per: str = "call"
    operations: tuple[str, ...] | None = None
    burst: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"share": self.share, "codes": list(self.codes), "per": self.per,
                "operations": list(self.operations) if self.operations is not None else None, "burst": self.burst}

    @classmethod
    def parse(cls, value: Any, where: str, known_codes: dict[str, tuple[int, str]], default_codes: tuple[str, ...]) -> ErrorRule:
        if isinstance(value, ErrorRule):
            rule = value
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            rule = cls(float(value), default_codes)
        elif isinstance(value, dict):
            unknown = set(value) - {"share", "codes", "code", "per", "operations", "burst"}
            if unknown:
                raise FaultsError(f"{where}: unknown keys {sorted(unknown)} (known: share, codes, per, operations, burst)")
            codes = value.get("codes", value.get("code", default_codes))
            codes = (codes,) if isinstance(codes, str) else tuple(codes)
            operations = value.get("operations")
            rule = cls(float(value.get("share", 0)), codes, str(value.get("per", "call")),
                       tuple(operations) if operations is not None else None, int(value.get("burst", 1)))
        else:
            raise FaultsError(f"{where}: give a share (0-1) or an object with share, codes, per, operations, burst")
        if not 0 <= rule.share <= 1:
            raise FaultsError(f"{where}.share must be from 0 to 1, got {rule.share}")
        if not rule.codes or any(c not in known_codes for c in rule.codes):
            raise FaultsError(f"{where}.codes must be some of {sorted(known_codes)}, got {list(rule.codes)}")
        if rule.per not in PER:
            raise FaultsError(f"{where}.per must be one of {PER}, got {rule.per!r}")
        if rule.burst < 1:
            raise FaultsError(f"{where}.burst must be at least 1, got {rule.burst}")
        return rule


@dataclass(frozen=True)
class Faults:
    """The fault setting of one engine (or emulator). Everything off by default."""

    seed: int = 0
    # Seconds past its TTL before the sweeper deletes an item; NEVER: no TTL deletion during the run; None: the
    # engine's own ``ttl_lateness``.
    ttl_lateness: float | str | None = None
    # A Query/Scan of a global secondary index sees the table as it was this many seconds ago.
    index_lag: float = 0.0
    index_lag_indexes: tuple[str, ...] | None = None  # None: every GSI
    dynamodb_errors: tuple[ErrorRule, ...] = ()
    sns_publish_errors: ErrorRule | None = None
    item_size_limit: bool = False

    def __post_init__(self) -> None:
        lateness = self.ttl_lateness
        if lateness is not None and lateness != NEVER and not (isinstance(lateness, (int, float)) and lateness >= 0):
            raise FaultsError(f"ttl_lateness must be seconds (>= 0) or {NEVER!r}, got {lateness!r}")
        if not (isinstance(self.index_lag, (int, float)) and 0 <= self.index_lag <= 3600):
            raise FaultsError(f"index_lag must be seconds from 0 to 3600, got {self.index_lag!r}")
        rules = self.dynamodb_errors
        if isinstance(rules, (ErrorRule, dict, int, float)):
            rules = (rules,)
        object.__setattr__(self, "dynamodb_errors", tuple(
            ErrorRule.parse(r, f"dynamodb_errors[{i}]", DYNAMODB_CODES, ("ThrottlingException",)) for i, r in enumerate(rules)))
        if self.sns_publish_errors is not None:
            object.__setattr__(self, "sns_publish_errors",
                               ErrorRule.parse(self.sns_publish_errors, "sns_publish_errors", SNS_CODES, ("KMSThrottling",)))
        if self.index_lag_indexes is not None:
            object.__setattr__(self, "index_lag_indexes", tuple(self.index_lag_indexes))

    # ---- reading and writing the setting

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Faults:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise FaultsError(f"unknown fault settings {sorted(unknown)}; known: {', '.join(sorted(known))}")
        return cls(**data)

    @classmethod
    def parse(cls, text: str) -> Faults:
        """A JSON object, or the path of a file holding one (``--faults``)."""
        text = text.strip()
        if not text.startswith("{"):
            path = Path(text.removeprefix("@"))
            if not path.exists():
                raise FaultsError(f"--faults takes a JSON object or the path of a JSON file; no file {str(path)!r}")
            text = path.read_text()
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise FaultsError(f"--faults is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise FaultsError("--faults must be a JSON object")
        return cls.from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "ttl_lateness": self.ttl_lateness,
            "index_lag": self.index_lag,
            "index_lag_indexes": list(self.index_lag_indexes) if self.index_lag_indexes is not None else None,
            "dynamodb_errors": [r.to_dict() for r in self.dynamodb_errors],
            "sns_publish_errors": self.sns_publish_errors.to_dict() if self.sns_publish_errors else None,
            "item_size_limit": self.item_size_limit,
        }

    def server_config(self) -> dict[str, Any]:
        """What the emulator's server process needs (everything but the TTL, which the engine's sweeper owns)."""
        data = self.to_dict()
        data.pop("ttl_lateness")
        return data

    @property
    def needs_server(self) -> bool:
        """Does any fault act inside the emulator (so an external endpoint cannot have it)?"""
        return bool(self.index_lag or self.dynamodb_errors or self.sns_publish_errors or self.item_size_limit)

    def ttl_lateness_seconds(self, default: float) -> float:
        """The sweeper's lateness: ``math.inf`` for NEVER."""
        if self.ttl_lateness is None:
            return default
        return math.inf if self.ttl_lateness == NEVER else float(self.ttl_lateness)

    def describe(self) -> str:
        parts = [f"seed {self.seed}"]
        if self.ttl_lateness is not None:
            parts.append(f"TTL {'never deletes' if self.ttl_lateness == NEVER else f'{self.ttl_lateness} s late'}")
        if self.index_lag:
            parts.append(f"index lag {self.index_lag} s" + (f" ({', '.join(self.index_lag_indexes)})" if self.index_lag_indexes else ""))
        for rule in self.dynamodb_errors:
            ops = f" on {','.join(rule.operations)}" if rule.operations else ""
            parts.append(f"DynamoDB {'/'.join(rule.codes)} on {rule.share:.0%} of {rule.per}s{ops}"
                         + (f" (bursts of {rule.burst})" if rule.burst > 1 else ""))
        if self.sns_publish_errors:
            rule = self.sns_publish_errors
            parts.append(f"SNS Publish {'/'.join(rule.codes)} on {rule.share:.0%} of {rule.per}s"
                         + (f" (bursts of {rule.burst})" if rule.burst > 1 else ""))
        if self.item_size_limit:
            parts.append("400 KB item-size limit")
        parts.append("Lambda 429 over reserved concurrency (always)")
        return "; ".join(parts)


NO_FAULTS = Faults()
