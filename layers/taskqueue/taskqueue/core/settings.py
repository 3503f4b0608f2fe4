"""Configuration: read from the environment once, validated, with errors that name the variable."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from taskqueue.core.errors import ConfigError, InvalidTaskInput
from taskqueue.core.fairness import parse_rate
from taskqueue.core.keys import Order, validate_queue_name
from taskqueue.core.run_time import (
    FINISH_RESERVE_SECONDS,
    LAMBDA_MAX_TIMEOUT_SECONDS,
    MIN_RUN_SECONDS,
    START_RESERVE_SECONDS,
    claim_lease_seconds,
    longest_run_seconds,
)

T = TypeVar("T")

DEFAULT_QUEUE_ORDERS = "work=LIFO,calls=FIFO"
MAX_RUNNING_LIMIT = 1000

# The values each numeric variable may take, both ends included: the one place they are stated. from_env
# applies them; template.yaml's parameters must lie inside them (tests/unit/test_template_settings.py).
BOUNDS: dict[str, tuple[float, float]] = {
    "QUEUE_SHARDS": (1, 64),
    "DEFAULT_TTL_SECONDS": (1, 10 * 365 * 86400),
    "RETENTION_SECONDS": (1, 10 * 365 * 86400),
    "DEAD_LETTER_RETENTION_SECONDS": (1, 10 * 365 * 86400),
    "MAX_ATTEMPTS": (1, 100),
    "LEASE_SECONDS": (1, 12 * 3600),
    "PAGE_SIZE": (1, 100),
    "TIME_BUDGET_SECONDS": (0.01, 900),
    "RETRY_BASE_SECONDS": (0, 3600),
    "RETRY_MAX_SECONDS": (0, 12 * 3600),
    "RUNNER_CAPACITY": (1, 1000),
    "FAKE_RUNNER_DURATION_SECONDS": (0, 900),
    "FAKE_RUNNER_FAILURE_RATE": (0, 1),
    # A Timeout shorter than START + FINISH reserve + 1 s can run no task at all (taskqueue.core.run_time).
    "WORKER_TIMEOUT_SECONDS": (START_RESERVE_SECONDS + FINISH_RESERVE_SECONDS + MIN_RUN_SECONDS, LAMBDA_MAX_TIMEOUT_SECONDS),
    "DEFAULT_RUN_SECONDS": (1, longest_run_seconds(LAMBDA_MAX_TIMEOUT_SECONDS)),
    "NOISY_GROUP_METRICS": (0, 20),
}
# RUNNER_ENVIRONMENT may not set these: the Lambda runtime's variables and the queue core's own.
RESERVED_PREFIXES = ("AWS_", "LAMBDA_", "_", "POWERTOOLS_")
RESERVED_VARIABLES = frozenset(BOUNDS) | {
    "QUEUE_TABLE_NAME", "WORKER_WAKE_UP_TOPIC_ARN", "QUEUE_ORDERS", "TASK_RUNNER",
    "RUNNING_LIMIT", "GROUP_CONCURRENCY", "GROUP_RATE_LIMIT", "WORKER_QUEUES", "RUNNER_ENVIRONMENT", "AGENT_TABLE_NAME", "AGENT_ORDER", "MATCH_ATTRIBUTES",
    "PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "TZ", "LANG",
}


@dataclass(frozen=True)
class Settings:
    """Every knob of the queue core. Names match the environment variables (upper-cased)."""

    queue_table_name: str
    worker_wake_up_topic_arn: str | None = None
    queue_orders: Mapping[str, Order] = field(default_factory=lambda: parse_queue_orders(DEFAULT_QUEUE_ORDERS))
    queue_shards: int = 1
    default_ttl_seconds: int = 3600
    retention_seconds: int = 86400
    # DEAD_LETTER_RETENTION_SECONDS: how long a FAILURE or CANCELLED task (a dead letter) is kept for an operator to
    # inspect and redrive; RETENTION_SECONDS applies to SUCCESS and SHED. Two weeks, so Friday's failures are
    # still there on Monday.
    dead_letter_retention_seconds: int = 14 * 86400
    max_attempts: int = 3
    lease_seconds: int = 300
    page_size: int = 10
    time_budget_seconds: float = 60.0
    retry_base_seconds: float = 2.0
    retry_max_seconds: float = 300.0
    # TASK_RUNNER: module:callable running one task; empty (the default) means no runner: ProcessTasks claims nothing
    # and says so, so a stack nobody gave a runner never marks real tasks done (issue 28).
    task_runner: str = ""
    runner_capacity: int = 3
    fake_runner_duration_seconds: float = 15.0
    fake_runner_failure_rate: float = 0.0
    # RUNNING_LIMIT: at most this many tasks of a queue this worker serves run at once, across every worker (leased
    # slots in the table, taskqueue.store.control). Unset (None): RUNNER_CAPACITY, so more workers (stream shards,
    # a tail call beside a stream start) never send the legacy system more than one worker would; 0: no limit.
    running_limit: int | None = None
    # GROUP_CONCURRENCY: at most this many tasks of one group (taskqueue.core.fairness) run at once across every
    # worker, unless the group's own setting says otherwise; None (empty or 0): no per-group limit.
    group_concurrency: int | None = None
    # GROUP_RATE_LIMIT: at most N claims of one group per P seconds ("N/P"), unless the group's own setting says
    # otherwise; None (empty or "0"): no per-group rate limit.
    group_rate: tuple[int, float] | None = None
    # WORKER_QUEUES: the queues this function's worker serves (a subset of QUEUE_ORDERS); empty means every one.
    worker_queues: tuple[str, ...] = ()
    # WORKER_TIMEOUT_SECONDS: the Timeout of the function that runs the tasks (ProcessTasks; the template's
    # ProcessTasksTimeout). CreateTasks refuses a task that declares a longer run than it leaves
    # (taskqueue.core.run_time); None (unset): only Lambda's own limit of 900 s applies.
    worker_timeout_seconds: float | None = None
    # DEFAULT_RUN_SECONDS: how long a task that declares no runSeconds may run (its queue's declaration).
    default_run_seconds: int = 60
    # RUNNER_ENVIRONMENT: variables for the task runner (a JSON object of strings), set in the worker's environment
    # before the runner is loaded (functions/process_tasks/app.py).
    runner_environment: Mapping[str, str] = field(default_factory=dict)
    # NOISY_GROUP_METRICS: how many of a queue's noisiest groups get per-group queue metrics (taskqueue.core.queue_gauges;
    # each costs four custom metrics while it is among them); 0: none, the quiet groups' figures only.
    noisy_group_metrics: int = 3

    def __post_init__(self) -> None:
        problem = worker_queues_problem(self.worker_queues, self.queue_orders)
        if problem:
            raise ConfigError(f"WORKER_QUEUES={','.join(map(str, self.worker_queues))!r} is not valid: {problem}")
        if self.worker_timeout_seconds is not None and self.default_run_seconds > self.longest_run_seconds:
            raise ConfigError(
                f"DEFAULT_RUN_SECONDS={self.default_run_seconds} is longer than a worker whose Timeout is "
                f"{self.worker_timeout_seconds:g} s (WORKER_TIMEOUT_SECONDS) can run a task ({self.longest_run_seconds} s): "
                "lower DefaultRunSeconds or raise ProcessTasksTimeout"
            )

    @property
    def longest_run_seconds(self) -> int:
        """The longest run a task may declare (taskqueue.core.run_time): what the worker's Timeout leaves, or what
        Lambda's longest Timeout leaves when the worker's is not known."""
        timeout = LAMBDA_MAX_TIMEOUT_SECONDS if self.worker_timeout_seconds is None else self.worker_timeout_seconds
        return longest_run_seconds(timeout)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        queue_orders = read_variable(env, "QUEUE_ORDERS", DEFAULT_QUEUE_ORDERS, parse_queue_orders)
        worker_timeout = read_variable(env, "WORKER_TIMEOUT_SECONDS", "", _optional_timeout)
        return cls(
            queue_table_name=read_required(env, "QUEUE_TABLE_NAME", "the DynamoDB queue table"),
            worker_wake_up_topic_arn=env.get("WORKER_WAKE_UP_TOPIC_ARN") or None,
            queue_orders=queue_orders,
            queue_shards=read_int(env, "QUEUE_SHARDS", "1"),
            default_ttl_seconds=read_int(env, "DEFAULT_TTL_SECONDS", "3600"),
            retention_seconds=read_int(env, "RETENTION_SECONDS", "86400"),
            dead_letter_retention_seconds=read_int(env, "DEAD_LETTER_RETENTION_SECONDS", str(14 * 86400)),
            max_attempts=read_int(env, "MAX_ATTEMPTS", "3"),
            # A worker's claim outlasts the invocation that holds it: never shorter than the worker's Timeout.
            lease_seconds=int(claim_lease_seconds(read_int(env, "LEASE_SECONDS", "300"), worker_timeout)),
            page_size=read_int(env, "PAGE_SIZE", "10"),
            running_limit=read_variable(env, "RUNNING_LIMIT", "", _optional_limit),
            group_concurrency=read_variable(env, "GROUP_CONCURRENCY", "", _optional_group_concurrency),
            group_rate=read_variable(env, "GROUP_RATE_LIMIT", "", _optional_rate),
            time_budget_seconds=read_float(env, "TIME_BUDGET_SECONDS", "60"),
            retry_base_seconds=read_float(env, "RETRY_BASE_SECONDS", "2"),
            retry_max_seconds=read_float(env, "RETRY_MAX_SECONDS", "300"),
            task_runner=read_variable(env, "TASK_RUNNER", "", _runner_spec),
            runner_capacity=read_int(env, "RUNNER_CAPACITY", "3"),
            fake_runner_duration_seconds=read_float(env, "FAKE_RUNNER_DURATION_SECONDS", "15"),
            fake_runner_failure_rate=read_float(env, "FAKE_RUNNER_FAILURE_RATE", "0"),
            worker_queues=read_variable(env, "WORKER_QUEUES", "", lambda raw: parse_worker_queues(raw, queue_orders)),
            worker_timeout_seconds=worker_timeout,
            default_run_seconds=read_int(env, "DEFAULT_RUN_SECONDS", "60"),
            runner_environment=read_variable(env, "RUNNER_ENVIRONMENT", "{}", parse_runner_environment),
            noisy_group_metrics=read_int(env, "NOISY_GROUP_METRICS", "3"),
        )

    def running_limit_of(self, queue: str) -> int | None:
        """The queue-wide running limit of a queue this worker serves; ``None``: no limit (no slots taken)."""
        if self.running_limit is not None:
            return self.running_limit or None
        return self.runner_capacity

    @property
    def served_queues(self) -> tuple[str, ...]:
        """The queues this function's worker serves: WORKER_QUEUES, or every configured queue when it is unset."""
        return self.worker_queues or tuple(self.queue_orders)

    def check_served(self, queue: str) -> Order:
        """Refuse, before any claim, a wake-up for a queue this worker does not serve; the queue's order otherwise."""
        served = self.served_queues
        if queue not in served:
            names = ", ".join(map(repr, served))
            unknown = "" if queue in self.queue_orders else f"; {queue!r} is not a configured queue either (QUEUE_ORDERS: {', '.join(sorted(self.queue_orders))})"
            raise InvalidTaskInput(
                f"this worker serves queue{'s' if len(served) > 1 else ''} {names} only (WORKER_QUEUES), not {queue!r}: "
                f"a wake-up for {queue!r} goes to that queue's own worker{unknown}"
            )
        return self.order_of(queue)

    def order_of(self, queue: str) -> Order:
        try:
            return self.queue_orders[queue]
        except KeyError:
            known = ", ".join(sorted(self.queue_orders))
            raise InvalidTaskInput(
                f"queue {queue!r} is not configured; known queues: {known} (set QUEUE_ORDERS to add one)"
            ) from None


def parse_queue_orders(text: str) -> dict[str, Order]:
    """'work=LIFO,calls=FIFO' -> {'work': Order.LIFO, 'calls': Order.FIFO}."""
    orders: dict[str, Order] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, order = part.partition("=")
        if not sep:
            raise ValueError(f"{part!r} is not of the form queue=LIFO or queue=FIFO")
        try:
            orders[validate_queue_name(name.strip())] = Order(order.strip().upper())
        except (InvalidTaskInput, ValueError) as exc:
            raise ValueError(f"{part!r}: {exc}") from None
    if not orders:
        raise ValueError("no queue is named")
    return orders


def _optional_limit(raw: str) -> int | None:
    if raw == "":
        return None
    value = int(raw)
    if not 0 <= value <= MAX_RUNNING_LIMIT:
        raise ValueError(f"must be empty (RUNNER_CAPACITY when several workers run), 0 (no limit) or a whole number up to {MAX_RUNNING_LIMIT}")
    return value


def _optional_group_concurrency(raw: str) -> int | None:
    if raw in ("", "0"):
        return None
    value = int(raw)
    if not 1 <= value <= MAX_RUNNING_LIMIT:
        raise ValueError(f"must be empty or 0 (no per-group limit) or a whole number up to {MAX_RUNNING_LIMIT}")
    return value


def _optional_rate(raw: str) -> tuple[int, float] | None:
    try:
        return parse_rate(raw)
    except InvalidTaskInput as exc:
        raise ValueError(str(exc)) from None


def _optional_timeout(raw: str) -> float | None:
    return None if raw == "" else _float_between(*BOUNDS["WORKER_TIMEOUT_SECONDS"])(raw)


def parse_runner_environment(raw: str) -> dict[str, str]:
    """'{"API_URL": "https://...", "API_TIMEOUT": "5"}' -> a dict of variable names to strings."""
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"must be a JSON object of strings, e.g. {{\"API_URL\": \"https://example.com\"}} ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError("must be a JSON object of strings, e.g. {\"API_URL\": \"https://example.com\"}")
    for name, text in value.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"{name!r} is not an environment variable name (letters, digits, '_')")
        if name in RESERVED_VARIABLES or name.startswith(RESERVED_PREFIXES):
            raise ValueError(f"{name!r} is the runtime's or the queue's own variable: give your runner's a name of its own")
        if not isinstance(text, str):
            raise ValueError(f"the value of {name!r} must be a string, got {type(text).__name__}")
    return value


def parse_worker_queues(text: str, queue_orders: Mapping[str, Order]) -> tuple[str, ...]:
    """'work' or 'work,calls' -> ('work',) / ('work', 'calls'); empty -> () (every queue). Each must be in QUEUE_ORDERS."""
    names = tuple(p.strip() for p in text.split(",") if p.strip())
    if text.strip() and not names:
        raise ValueError("names no queue: use a comma-separated list of queues from QUEUE_ORDERS, e.g. work")
    problem = worker_queues_problem(names, queue_orders)
    if problem:
        raise ValueError(problem)
    return names


def worker_queues_problem(names: tuple[str, ...], queue_orders: Mapping[str, Order]) -> str | None:
    known = ", ".join(sorted(queue_orders))
    if not isinstance(names, tuple) or not all(isinstance(n, str) for n in names):
        return "must be a comma-separated list of queue names"
    unknown = [n for n in names if n not in queue_orders]
    if unknown:
        return f"{', '.join(map(repr, unknown))} {'is' if len(unknown) == 1 else 'are'} not in QUEUE_ORDERS ({known})"
    if len(set(names)) != len(names):
        return f"a queue is named twice: {', '.join(names)}"
    return None


# The one reader of environment variables (Settings here, MatchSettings in matching.py): every error names the
# variable and its value, and says what is allowed.


def read_required(env: Mapping[str, str], name: str, what: str) -> str:
    """A variable that must be set: its value, stripped."""
    value = env.get(name, "").strip()
    if not value:
        raise ConfigError(f"{name} is not set: it must name {what}")
    return value


def read_variable(env: Mapping[str, str], name: str, default: str, parse: Callable[[str], T]) -> T:
    """``parse`` of the variable's value (``default`` when unset or blank); a ValueError it raises becomes a
    ConfigError naming the variable."""
    raw = env.get(name, "").strip() or default
    try:
        return parse(raw)
    except ValueError as exc:
        raise ConfigError(f"{name}={raw!r} is not valid: {exc}") from None


def read_int(
    env: Mapping[str, str], name: str, default: str, bounds: Mapping[str, tuple[float, float]] = BOUNDS
) -> int:
    """A whole number within ``bounds[name]`` (both ends included)."""
    low, high = bounds[name]
    return read_variable(env, name, default, _int_between(int(low), int(high)))


def read_float(
    env: Mapping[str, str], name: str, default: str, bounds: Mapping[str, tuple[float, float]] = BOUNDS
) -> float:
    """A number within ``bounds[name]`` (both ends included)."""
    return read_variable(env, name, default, _float_between(*bounds[name]))


def _int_between(low: int, high: int) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            value = low - 1  # not a whole number: refused with the same message as one out of range
        if not low <= value <= high:
            raise ValueError(f"must be a whole number from {low} to {high}")
        return value

    return parse


def _float_between(low: float, high: float) -> Callable[[str], float]:
    def parse(raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"must be a number from {low} to {high}") from None
        if not low <= value <= high:
            raise ValueError(f"must be a number from {low} to {high}")
        return value

    return parse


def _runner_spec(raw: str) -> str:
    if raw == "":
        return raw  # no runner (the template's default)
    module, sep, attr = raw.partition(":")
    if not sep or not module or not attr:
        raise ValueError("must be module:callable, e.g. taskqueue.runner:fake_legacy_system")
    return raw
