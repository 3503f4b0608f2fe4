"""The dashboard and alarms in template.yaml: valid dashboard JSON, the namespace and service the functions use, an
alarm on every failure mode. That the handlers really emit what they read: tests/integration/test_dashboard_metrics.py."""

import json
import re

from tests.support import template

RES = template()["Resources"]


def dashboard_body() -> dict:
    body, variables = RES["QueueDashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    # A variable inside a JSON string becomes a placeholder string; one standing for a number (a threshold), a number.
    text = re.sub(r'(")?\$\{([A-Za-z:]+)\}', lambda m: f'"placeholder-{m.group(2)}' if m.group(1) else "0", body)
    assert set(variables) >= {"Trigger", "Process", "Matcher", "DeadLetter", "Shed", "TriggerErrors"}
    return json.loads(text)


def metric_names_in_dashboard() -> set[str]:
    names = set()
    for widget in dashboard_body()["widgets"]:
        namespace = None
        for row in widget["properties"].get("metrics", []):
            if isinstance(row[0], dict):  # a metric math or SEARCH expression
                continue
            namespace = row[0] if row[0] not in (".", "...") else namespace
            if namespace == "TaskQueues" and row[0] != "..." and isinstance(row[1], str):
                names.add(row[1])
    return names - {"."}


def test_dashboard_body_is_json_and_covers_the_queue_metrics():
    names = metric_names_in_dashboard()
    assert {"TasksCreated", "TasksClaimed", "TasksSucceeded", "TasksFailed", "TasksShed", "TailCalls", "AgeAtClaim"} <= names


def test_alarms_watch_dead_letters_shedding_and_trigger_errors():
    assert RES["TriggerErrorsAlarm"]["Properties"]["Dimensions"][0]["Value"] == {"Ref": "TriggerFunction"}
    for name in ("DeadLetterAlarm", "ShedRateAlarm"):
        metrics = RES[name]["Properties"]["Metrics"]
        assert [m["Id"] for m in metrics if m.get("ReturnData")] == [metrics[0]["Id"]]
        for m in metrics[1:]:
            dims = {d["Name"]: d["Value"] for d in m["MetricStat"]["Metric"]["Dimensions"]}
            assert dims["service"] == "taskqueue" and dims["queue"] in {"work", "calls"}
    assert RES["AlarmTopic"]["Condition"] == "HasAlarmEmail"


def lambda_errors_watched(alarm: dict) -> set[str]:
    """Functions (logical ids) whose AWS/Lambda Errors an alarm watches, alone or inside metric math."""
    props = alarm["Properties"]
    stats = [props] if "MetricName" in props else [m["MetricStat"]["Metric"] for m in props.get("Metrics", []) if "MetricStat" in m]
    watched = set()
    for stat in stats:
        if stat.get("Namespace") == "AWS/Lambda" and stat.get("MetricName") == "Errors":
            for dim in stat["Dimensions"]:
                if dim["Name"] == "FunctionName":
                    watched.add(dim["Value"]["Ref"])
    return watched


def test_a_failing_worker_raises_an_alarm():
    """Failed worker wake-ups are dropped after their retry (no dead-letter queue): an alarm must see them."""
    alarms = {name: r for name, r in RES.items() if r["Type"] == "AWS::CloudWatch::Alarm"}
    watched = {name: lambda_errors_watched(alarm) for name, alarm in alarms.items()}
    for function in ("ProcessTasksFunction", "MatcherFunction"):
        names = [name for name, functions in watched.items() if function in functions]
        assert names, f"no alarm watches the Errors of {function}"
        for name in names:
            props = alarms[name]["Properties"]
            assert props["Threshold"] == 0 and props["ComparisonOperator"] == "GreaterThanThreshold"
            assert props["AlarmActions"] == {"Fn::If": ["HasAlarmEmail", [{"Ref": "AlarmTopic"}], {"Ref": "AWS::NoValue"}]}
    for name, functions in watched.items():
        if len(functions) > 1:  # metric math: the one returned series adds them all up
            metrics = alarms[name]["Properties"]["Metrics"]
            assert [m["Id"] for m in metrics if m.get("ReturnData")] == [metrics[0]["Id"]]
            ids = {m["Id"] for m in metrics[1:]}
            assert all(i in metrics[0]["Expression"] for i in ids), metrics[0]["Expression"]


def test_every_alarm_is_on_the_dashboards_alarm_widget():
    body, variables = RES["QueueDashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    shown = set()
    for widget in dashboard_body()["widgets"]:
        if widget["type"] == "alarm":
            for placeholder in widget["properties"]["alarms"]:
                variable = placeholder.removeprefix("placeholder-")
                shown.add(variables[variable]["Fn::GetAtt"][0])
    alarms = {name for name, r in RES.items() if r["Type"] == "AWS::CloudWatch::Alarm"}
    assert alarms == shown, f"missing from the alarm widget: {sorted(alarms - shown)}"


def test_trigger_may_update_the_table_for_lease_recovery_and_nothing_more():
    """The safety net recovers expired leases and sheds expired entries: conditional UpdateItem on the table (and
    BatchGetItem: a workflow's long edge lists and roots, when it finishes what a dead writer left). It never puts or
    batch-writes (BatchWriteItem could delete any task): tests/unit/test_iam_least_privilege.py has the rest."""
    statements = [s for p in RES["TriggerFunction"]["Properties"]["Policies"] for s in p.get("Statement", [])]
    on_table = {a for s in statements if s["Resource"] == {"Fn::GetAtt": ["QueueTable", "Arn"]} for a in s["Action"]}
    assert on_table == {"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:UpdateItem"}
    assert not any(name in p for p in RES["TriggerFunction"]["Properties"]["Policies"]
                   for name in ("DynamoDBWritePolicy", "DynamoDBCrudPolicy", "DynamoDBReadPolicy"))


def test_dashboard_and_alarms_read_the_namespace_and_service_the_functions_are_given():
    """The functions emit under POWERTOOLS_METRICS_NAMESPACE with a ``service`` dimension of POWERTOOLS_SERVICE_NAME
    (tests/integration/test_dashboard_metrics.py runs them): every custom metric the dashboard and the alarms read
    must use those two values, or CloudWatch shows an empty series."""
    env = template()["Globals"]["Function"]["Environment"]["Variables"]
    namespace, service = env["POWERTOOLS_METRICS_NAMESPACE"], env["POWERTOOLS_SERVICE_NAME"]
    read = []
    for name, resource in RES.items():
        if resource["Type"] == "AWS::CloudWatch::Alarm":
            for m in resource["Properties"].get("Metrics", []):
                if "MetricStat" in m and not m["MetricStat"]["Metric"]["Namespace"].startswith("AWS/"):
                    read.append((name, m["MetricStat"]["Metric"]))
    assert read, "no alarm reads a custom metric"
    for name, metric in read:
        dims = {d["Name"]: d["Value"] for d in metric["Dimensions"]}
        assert (metric["Namespace"], dims.get("service")) == (namespace, service), name
    for widget in dashboard_body()["widgets"]:
        for row in widget["properties"].get("metrics", []):
            if isinstance(row[0], dict):  # a SEARCH names its namespace and the service dimension itself
                assert f"{{{namespace},group,queue,service}}" in row[0]["expression"], row
            elif row[0] not in (".", "...") and not row[0].startswith("AWS/"):
                assert row[0] == namespace and row[2:4] == ["service", service], row


def test_a_stack_without_a_runner_claims_nothing_and_raises_an_alarm():
    """Issue 28: TaskRunner defaults to no runner (never the fake legacy system, which would mark real tasks done);
    ProcessTasks then counts NoTaskRunner, and NoTaskRunnerAlarm fires on it like the other alarms."""
    params = template()["Parameters"]
    assert params["TaskRunner"]["Default"] == ""
    alarm = RES["NoTaskRunnerAlarm"]["Properties"]
    (metric,) = [m for m in alarm["Metrics"] if "MetricStat" in m]
    stat = metric["MetricStat"]["Metric"]
    dims = {d["Name"]: d["Value"] for d in stat["Dimensions"]}
    assert (stat["Namespace"], stat["MetricName"], dims) == ("TaskQueues", "NoTaskRunner", {"service": "taskqueue", "queue": "work"})
    assert (alarm["Threshold"], alarm["ComparisonOperator"], alarm["TreatMissingData"]) == (0, "GreaterThanThreshold", "notBreaching")
    actions = {"Fn::If": ["HasAlarmEmail", [{"Ref": "AlarmTopic"}], {"Ref": "AWS::NoValue"}]}
    assert alarm["AlarmActions"] == actions and alarm["OKActions"] == actions


def test_the_dashboard_is_opt_in_and_no_alarm_depends_on_it():
    """A dashboard costs $3.00 a month beyond an account's three free ones, six times an idle stack's running cost
    (bench/idle_cost.py): off unless DashboardEnabled=true. The alarms are safety and stay on whatever it says."""
    tpl = template()
    assert tpl["Parameters"]["DashboardEnabled"]["Default"] == "false"
    assert tpl["Conditions"]["HasDashboard"] == {"Fn::Equals": [{"Ref": "DashboardEnabled"}, "true"]}
    assert RES["QueueDashboard"]["Condition"] == "HasDashboard"
    assert tpl["Outputs"]["QueueDashboardName"]["Condition"] == "HasDashboard"
    alarms = [name for name, res in RES.items() if res["Type"] == "AWS::CloudWatch::Alarm"]
    assert len(alarms) == 7 and not [name for name in alarms if "Condition" in RES[name]]


def test_an_alarm_watches_the_oldest_waiting_task_of_each_queue_quietly_by_default():
    """SQS users' first alarm: the oldest waiting task's age (taskqueue/core/queue_gauges.py), per queue, the most of
    a 5-minute period (as the other alarms; a safety net every 1 to 5 minutes feeds it); no data (an idle queue
    publishes none) is not breaching. The threshold is a parameter whose default (half the default TTL) takes half an
    hour of a stopped worker or sustained overload to reach, never a burst."""
    params = template()["Parameters"]
    alarm = RES["OldestTaskAgeAlarm"]["Properties"]
    assert alarm["Threshold"] == {"Ref": "OldestTaskAgeAlarmSeconds"}
    assert params["OldestTaskAgeAlarmSeconds"]["Default"] == params["DefaultTtlSeconds"]["Default"] / 2
    assert (alarm["EvaluationPeriods"], alarm["TreatMissingData"]) == (1, "notBreaching")
    (returned,) = [m for m in alarm["Metrics"] if m.get("ReturnData")]
    stats = [m for m in alarm["Metrics"] if "MetricStat" in m]
    assert {m["Id"] for m in stats} <= set(re.findall(r"\w+", returned["Expression"]))
    queues = set()
    for metric in stats:
        stat = metric["MetricStat"]
        dims = {d["Name"]: d["Value"] for d in stat["Metric"]["Dimensions"]}
        assert (stat["Metric"]["MetricName"], stat["Stat"], stat["Period"]) == ("OldestTaskAge", "Maximum", 300)
        queues.add(dims["queue"])
    assert queues == {"work", "calls"}
    actions = {"Fn::If": ["HasAlarmEmail", [{"Ref": "AlarmTopic"}], {"Ref": "AWS::NoValue"}]}
    assert alarm["AlarmActions"] == actions and alarm["OKActions"] == actions


def test_the_dashboard_shows_every_queue_metric_the_safety_net_publishes():
    from taskqueue.core.queue_gauges import FIGURES, NOISY_GROUPS, QUIET_SUFFIX

    names = metric_names_in_dashboard()
    assert {name for name, _ in FIGURES} <= names
    assert {NOISY_GROUPS, f"OldestTaskAge{QUIET_SUFFIX}", f"TasksWaiting{QUIET_SUFFIX}"} <= names
    searches = [row[0]["expression"] for w in dashboard_body()["widgets"] for row in w["properties"].get("metrics", [])
                if isinstance(row[0], dict)]
    assert any('MetricName="TasksWaiting"' in s and ",group," in s for s in searches)  # the noisiest groups', by name


def test_the_safety_net_is_told_how_many_noisy_groups_to_publish():
    params = template()["Parameters"]["NoisyGroupMetrics"]
    env = RES["TriggerFunction"]["Properties"]["Environment"]["Variables"]
    assert env["NOISY_GROUP_METRICS"] == {"Ref": "NoisyGroupMetrics"}
    assert (params["Default"], params["MinValue"], params["MaxValue"]) == (3, 0, 20)
