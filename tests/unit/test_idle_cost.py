"""bench/idle_cost.py: an idle stack's month, read from template.yaml and priced with bench/dollars.py."""

from __future__ import annotations

import pytest

from bench import idle_cost
from bench.dollars import MONTHLY_FEES, PRICES, PROVISIONED_PRICES, USAGE_PRICES

# One safety-net run as the model takes it (the real figures come from idle_cost.measure).
RUN = idle_cost.Measured(runs=1, engine="given", wall_ms=20.0, wall_ms_min=20.0, wall_ms_max=20.0, read_units=4.0,
                         write_units=0.0, requests=8.0, log_bytes=400.0, log_events=3.0,
                         custom_metrics=("TaskQueues/ColdStart{function_name,service}",), publishes=0)
TEMPLATE = idle_cost.load_template()


def month(**overrides: str) -> idle_cost.Month:
    return idle_cost.price_month(idle_cost.inventory(idle_cost.Resolver(TEMPLATE, overrides)), RUN)


def line(m: idle_cost.Month, text: str) -> idle_cost.Line:
    found = [x for x in m.lines if text in x.item]
    assert len(found) == 1, [x.item for x in m.lines]
    return found[0]


def test_the_safety_net_rate_sets_the_invocations_and_everything_billed_per_run():
    every_minute, every_five = month(), month(SafetyNetScheduleRate="rate(5 minutes)")
    assert line(every_minute, "Lambda requests").quantity == pytest.approx(730 * 60)
    assert line(every_five, "Lambda requests").quantity == pytest.approx(730 * 12)
    for what in ("Lambda compute", "DynamoDB reads", "CloudWatch Logs", "X-Ray"):
        assert line(every_five, what).dollars == pytest.approx(line(every_minute, what).dollars / 5)
    assert line(every_minute, "DynamoDB reads").dollars == pytest.approx(730 * 60 * 4 * PRICES["dynamodb_read_request_unit"])
    assert line(every_minute, "X-Ray").dollars == pytest.approx(730 * 60 * USAGE_PRICES["xray_trace_recorded"])
    # 20 ms at 256 MB (the template's Globals), arm64
    assert line(every_minute, "Lambda compute").quantity == pytest.approx(730 * 60 * 0.020 * 0.25)


def test_provisioned_bills_each_table_and_index_least_capacity_every_hour_and_no_request_units():
    on_demand, provisioned = month(), month(BillingMode="PROVISIONED")
    assert not [x for x in on_demand.lines if x.item.startswith("provisioned")]
    holders = {x.item.split(":")[0] for x in provisioned.lines if x.item.startswith("provisioned")}
    assert holders == {"provisioned QueueTable", "provisioned QueueTable/ReadyIndex", "provisioned QueueTable/StatusIndex",
                       "provisioned AgentTable"}
    per_holder = 730 * 5 * (PROVISIONED_PRICES["dynamodb_rcu_hour"] + PROVISIONED_PRICES["dynamodb_wcu_hour"])
    capacity = sum(x.dollars for x in provisioned.lines if x.item.startswith("provisioned"))
    assert capacity == pytest.approx(4 * per_holder)
    assert not [x for x in provisioned.lines if "DynamoDB reads" in x.item]  # inside the provisioned capacity
    assert provisioned.total("running") > on_demand.total("running") + 4 * per_holder - line(on_demand, "DynamoDB reads").dollars - 1e-9
    # the least capacity follows its parameters
    assert sum(x.dollars for x in month(BillingMode="PROVISIONED", ProvisionedWriteCapacity="1").lines
               if x.item.startswith("provisioned")) < capacity
    # auto scaling: 8 target-tracking policies, each with its alarms, a fixed fee
    scaling = line(provisioned, "auto scaling's alarms")
    assert scaling.quantity == 8 * idle_cost.AUTO_SCALING_ALARMS_PER_POLICY
    assert scaling.part == "fixed"


def test_each_fee_is_counted_once_and_follows_its_parameter():
    default = month()
    assert line(default, "CloudWatch alarms").quantity == 12  # seven alarms; the metric-math ones per metric read
    assert line(default, "CloudWatch alarms").dollars == pytest.approx(12 * MONTHLY_FEES["cloudwatch_alarm_metric"])
    assert line(default, "dashboards").quantity == 0  # opt-in
    assert line(month(DashboardEnabled="true"), "dashboards").dollars == MONTHLY_FEES["cloudwatch_dashboard"]
    assert line(default, "KMS").quantity == 0  # the alarm topic's key exists only with AlarmEmail
    assert line(month(AlarmEmail="ops@example.com"), "KMS").dollars == MONTHLY_FEES["kms_key"]
    assert line(default, "custom metrics").dollars == MONTHLY_FEES["cloudwatch_custom_metric"]
    items = [x.item for x in default.lines]
    assert len(items) == len(set(items))
    assert {x.part for x in default.lines} == {"running", "fixed"}
    assert default.total() == pytest.approx(default.total("running") + default.total("fixed"))


def test_the_default_stack_runs_idle_within_the_target():
    assert month().total("running") <= idle_cost.TARGET_DOLLARS_PER_MONTH


def test_a_stack_whose_schedule_makes_tasks_is_not_idle():
    with pytest.raises(ValueError, match="not idle"):
        month(CreateTasksScheduleState="ENABLED")


def test_the_template_reader_resolves_conditions_and_refuses_unknown_parameters():
    resolver = idle_cost.Resolver(TEMPLATE, {"RunnerManagedPolicyArns": "arn:a,arn:b"})
    assert resolver.condition("HasRunnerManagedPolicy2") and not resolver.condition("HasRunnerManagedPolicy3")
    with pytest.raises(ValueError, match="not parameters"):
        idle_cost.Resolver(TEMPLATE, {"NoSuchParameter": "1"})
    assert idle_cost.rate_seconds("rate(1 hour)") == 3600
    with pytest.raises(ValueError):
        idle_cost.rate_seconds("cron(0 12 * * ? *)")


def test_an_idle_safety_net_run_reads_writes_nothing_and_wakes_no_one():
    measured = idle_cost.measure(runs=2)
    assert measured.read_units > 0 and measured.write_units == 0 and measured.publishes == 0
    assert measured.log_events >= 3  # Lambda's START, END and REPORT at least
    assert measured.custom_metrics == ("TaskQueues/ColdStart{function_name,service}",)
