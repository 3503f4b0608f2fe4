import pytest

from taskqueue.core.errors import ConfigError, InvalidTaskInput
from taskqueue.core.keys import Order
from taskqueue.core.settings import Settings, parse_queue_orders


def test_defaults_when_only_the_table_is_set():
    s = Settings.from_env({"QUEUE_TABLE_NAME": "t"})
    assert (s.time_budget_seconds, s.page_size, s.lease_seconds, s.default_ttl_seconds) == (60.0, 10, 300, 3600)
    assert (s.runner_capacity, s.fake_runner_duration_seconds, s.fake_runner_failure_rate) == (3, 15.0, 0.0)
    assert s.task_runner == ""  # no runner: a stack nobody gave a runner claims nothing (issue 28)
    assert s.queue_orders == {"work": Order.LIFO, "calls": Order.FIFO}
    assert s.worker_wake_up_topic_arn is None


def test_missing_table_names_the_variable():
    with pytest.raises(ConfigError, match="QUEUE_TABLE_NAME"):
        Settings.from_env({})


@pytest.mark.parametrize(
    "name,value",
    [
        ("TIME_BUDGET_SECONDS", "soon"),
        ("TIME_BUDGET_SECONDS", "-1"),
        ("PAGE_SIZE", "0"),
        ("PAGE_SIZE", "2.5"),
        ("RUNNER_CAPACITY", "0"),
        ("FAKE_RUNNER_FAILURE_RATE", "1.5"),
        ("LEASE_SECONDS", "x"),
        ("TASK_RUNNER", "no_colon"),
        ("QUEUE_ORDERS", "work=RANDOM"),
        ("QUEUE_ORDERS", "work"),
        ("QUEUE_SHARDS", "65"),
    ],
)
def test_bad_values_fail_fast_naming_the_variable_and_value(name, value):
    with pytest.raises(ConfigError, match=f"^{name}='{value}' is not valid: "):
        Settings.from_env({"QUEUE_TABLE_NAME": "t", name: value})


def test_queue_orders_parse_case_insensitively():
    assert parse_queue_orders(" work = lifo , calls=FIFO ") == {"work": Order.LIFO, "calls": Order.FIFO}


def test_unknown_queue_lists_the_known_ones():
    s = Settings(queue_table_name="t")
    with pytest.raises(InvalidTaskInput, match="known queues: calls, work"):
        s.order_of("other")


def test_the_bounds_of_every_number_live_in_one_table_that_from_env_applies():
    from taskqueue.core.settings import BOUNDS

    assert {"QUEUE_SHARDS", "DEFAULT_TTL_SECONDS", "RETENTION_SECONDS", "DEAD_LETTER_RETENTION_SECONDS", "MAX_ATTEMPTS", "LEASE_SECONDS", "PAGE_SIZE",
            "TIME_BUDGET_SECONDS", "RETRY_BASE_SECONDS", "RETRY_MAX_SECONDS", "RUNNER_CAPACITY",
            "FAKE_RUNNER_DURATION_SECONDS", "FAKE_RUNNER_FAILURE_RATE", "WORKER_TIMEOUT_SECONDS",
            "DEFAULT_RUN_SECONDS", "NOISY_GROUP_METRICS"} == set(BOUNDS)
    # The shortest run, so the shortest worker Timeout is accepted too (the two are checked together).
    base = {"QUEUE_TABLE_NAME": "t", "DEFAULT_RUN_SECONDS": "1"}
    for name, (low, high) in BOUNDS.items():
        for accepted in (low, high):
            Settings.from_env(base | {name: str(accepted)})
        for refused in (low - 1, high + 1):
            with pytest.raises(ConfigError, match=f"^{name}='{refused}' is not valid: must be a (whole )?number from {low} to {high}$"):
                Settings.from_env(base | {name: str(refused)})


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("QUEUE_SHARDS", "65", "must be a whole number from 1 to 64"),
        ("DEFAULT_TTL_SECONDS", "0", "must be a whole number from 1 to 315360000"),
        ("RETENTION_SECONDS", "0", "must be a whole number from 1 to 315360000"),
        ("LEASE_SECONDS", "43201", "must be a whole number from 1 to 43200"),
        ("TIME_BUDGET_SECONDS", "0", "must be a number from 0.01 to 900"),
        ("RETRY_MAX_SECONDS", "43201", "must be a number from 0 to 43200"),
        ("RUNNER_CAPACITY", "1001", "must be a whole number from 1 to 1000"),
        ("FAKE_RUNNER_DURATION_SECONDS", "901", "must be a number from 0 to 900"),
        ("FAKE_RUNNER_FAILURE_RATE", "2", "must be a number from 0 to 1"),
    ],
)
def test_messages_are_unchanged(name, value, message):
    with pytest.raises(ConfigError) as error:
        Settings.from_env({"QUEUE_TABLE_NAME": "t", name: value})
    assert str(error.value) == f"{name}={value!r} is not valid: {message}"


@pytest.mark.parametrize("env", [{}, {"TASK_RUNNER": ""}, {"TASK_RUNNER": "  "}])
def test_no_task_runner_unless_one_is_named(env):
    """A first deploy must not fake the work: unset or blank TASK_RUNNER means no runner, never the fake one."""
    assert Settings.from_env({"QUEUE_TABLE_NAME": "t", **env}).task_runner == ""
    assert Settings(queue_table_name="t").task_runner == ""
