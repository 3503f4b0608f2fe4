import pytest

from taskqueue.errors import ConfigError, InvalidTaskInput
from taskqueue.keys import Order
from taskqueue.settings import Settings, parse_queue_orders


def test_defaults_when_only_the_table_is_set():
    s = Settings.from_env({"QUEUE_TABLE_NAME": "t"})
    assert (s.time_budget_seconds, s.page_size, s.lease_seconds, s.default_ttl_seconds) == (60.0, 10, 300, 3600)
    assert (s.runner_capacity, s.fake_runner_duration_seconds, s.fake_runner_failure_rate) == (3, 15.0, 0.0)
    assert s.task_runner == "taskqueue.runner:fake_legacy_system"
    assert s.queue_orders == {"work": Order.LIFO, "calls": Order.FIFO}
    assert s.trigger_topic_arn is None


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
