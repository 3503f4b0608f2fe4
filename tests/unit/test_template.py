"""template.yaml: cfn-lint clean, and the wiring the design depends on."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from taskqueue.core import keys
from taskqueue.core.model import MAX_TASKS_PER_REQUEST
from taskqueue.core.settings import Settings
from tests.support import ROOT, template

TPL = template()
RES = TPL["Resources"]


def events(function: str) -> dict:
    return RES[function]["Properties"]["Events"]


def test_cfn_lint_is_clean():
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    run = subprocess.run([str(cfn_lint), str(ROOT / "template.yaml")], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_layer_is_built_for_the_runtime_of_every_function_that_loads_it():
    fn = TPL["Globals"]["Function"]
    assert fn["Layers"] == [{"Ref": "QueueLayer"}]
    functions = {name: r["Properties"] for name, r in RES.items() if r["Type"] == "AWS::Serverless::Function"}
    assert functions
    for name, props in functions.items():
        # A layer built for another Python cannot be imported (compiled wheels, stdlib changes): the layer's
        # Makefile picks wheels for this runtime (tests/unit/test_layer_build.py checks its pip flags).
        assert props.get("Runtime", fn["Runtime"]) in RES["QueueLayer"]["Properties"]["CompatibleRuntimes"]
        # ProcessTasks adds the team's runner (SAM puts Globals' layers first); the others take Globals' only.
        own = [{"Ref": "RunnerLayer"}] if name == "ProcessTasksFunction" else fn["Layers"]
        assert props.get("Layers", fn["Layers"]) == own, name
    assert RES["QueueLayer"]["Metadata"]["BuildMethod"] == "makefile"
    # The runner's layer: sam build puts runner/ and its requirements.txt under python/ for the functions' runtime.
    runner = RES["RunnerLayer"]
    assert runner["Properties"]["ContentUri"] == "runner/"
    assert runner["Metadata"] == {"BuildMethod": fn["Runtime"], "BuildArchitecture": fn["Architectures"][0]}
    assert runner["Properties"]["CompatibleRuntimes"] == [fn["Runtime"]]


def placeholder(value) -> str:
    """A resolved stand-in for an environment value: a parameter gives its default, a Ref or GetAtt of a resource
    names the resource, a literal stays."""
    if isinstance(value, dict) and value.get("Ref") in TPL["Parameters"]:
        return str(TPL["Parameters"][value["Ref"]]["Default"])
    if isinstance(value, dict) and "Fn::If" in value and value["Fn::If"][0] == "HasProcessTasksConcurrency":
        return placeholder(value["Fn::If"][2])  # the default: no reserved concurrency
    refs = refs_in(value)
    return "resolved-" + "-".join(sorted(refs)) if refs else str(value)


def test_every_resource_handed_to_the_functions_reaches_their_settings():
    """Settings.from_env reads the environment the template gives every function: each table and topic it names
    ends up in a setting (a variable renamed on one side only would leave the code without its table or topic)."""
    variables = TPL["Globals"]["Function"]["Environment"]["Variables"]
    env = {name: placeholder(value) for name, value in variables.items()}
    settings = Settings.from_env(env)
    values = {v for v in vars(settings).values() if isinstance(v, str)}
    handed = {value for name, value in env.items() if value.startswith("resolved-")}
    assert handed, "the template hands the functions no table or topic"
    assert handed <= values, f"given by the template but read by no setting: {sorted(handed - values)}"


def test_table_stream_ttl_and_sparse_indexes():
    props = RES["QueueTable"]["Properties"]
    assert props["KeySchema"] == [{"AttributeName": "taskId", "KeyType": "HASH"}]
    assert props["StreamSpecification"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    # DynamoDB deletes by deleteAt, not by the shed deadline ttl (a running task must outlive its ttl).
    assert props["TimeToLiveSpecification"] == {"AttributeName": "deleteAt", "Enabled": True}
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    indexes = {i["IndexName"]: i for i in props["GlobalSecondaryIndexes"]}
    ready = indexes["ReadyIndex"]
    assert [k["AttributeName"] for k in ready["KeySchema"]] == ["readyKey", "readySort"]
    # Only what a claim decision needs is projected.
    assert ready["Projection"] == {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["ttl", "notBefore"]}
    assert indexes["StatusIndex"]["Projection"] == {"ProjectionType": "KEYS_ONLY"}


STREAMS = (("ProcessTasksFunction", "TaskStream"), ("MatcherFunction", "CallStream"), ("MatcherFunction", "AgentStream"))


def test_the_tables_streams_start_the_workers_at_once_and_hand_failures_on():
    for function, name in STREAMS:
        stream = events(function)[name]["Properties"]
        # Which records the filters pass: tests/unit/test_local_patterns.py applies them to records; tests/e2e shows
        # the engine delivering by them.
        assert stream["FilterCriteria"]["Filters"], name
        assert stream["MaximumBatchingWindowInSeconds"] == 0 and stream["BatchSize"] == 100, name
        # A batch that keeps failing is split to find the record, then handed to FailedEventsQueue (FailedEventsAlarm).
        assert stream["BisectBatchOnFunctionError"] is True and 1 <= stream["MaximumRetryAttempts"] <= 10, name
        assert stream["DestinationConfig"]["OnFailure"] == {"Type": "SQS", "Destination": {"Fn::GetAtt": ["FailedEventsQueue", "Arn"]}}
        # The stream is the start of new work: never switched off by a parameter (one design, reservation or none).
        assert "Enabled" not in stream, name
    for function, name in STREAMS[:2]:  # the queue table's: as many lanes per shard as the deployer asks
        assert events(function)[name]["Properties"]["ParallelizationFactor"] == {"Ref": "StreamParallelization"}
    lanes = TPL["Parameters"]["StreamParallelization"]
    assert 1 <= lanes["MinValue"] <= lanes["Default"] <= lanes["MaxValue"] <= 10  # Lambda's range


def test_trigger_is_the_safety_net_and_the_delayed_heads_target_only():
    ev = events("TriggerFunction")
    assert set(ev) == {"SafetyNet"} and ev["SafetyNet"]["Type"] == "Schedule"
    assert "TriggerTopic" not in RES
    # A scheduled wake-up whose publish failed fails the invocation and is retried by Lambda, inside an event age that
    # the two retries (about 1 and 2 minutes apart) fit in.
    config = RES["TriggerFunction"]["Properties"]["EventInvokeConfig"]
    assert config["MaximumRetryAttempts"] == 2
    assert 180 <= config["MaximumEventAgeInSeconds"] <= 900


def optional_reservation(function: str, parameter: str) -> None:
    """The function's reserved concurrency is the parameter when it is set, and none (not 0) when it is empty."""
    props = RES[function]["Properties"]
    condition = f"Has{parameter}"
    assert props["ReservedConcurrentExecutions"] == {"Fn::If": [condition, {"Ref": parameter}, {"Ref": "AWS::NoValue"}]}
    assert TPL["Conditions"][condition] == {"Fn::Not": [{"Fn::Equals": [{"Ref": parameter}, ""]}]}
    spec = TPL["Parameters"][parameter]
    assert spec["Type"] == "String" and spec["Default"] == "", f"{parameter} must default to no reservation"
    pattern = re.compile(spec["AllowedPattern"])
    assert pattern.fullmatch("") and pattern.fullmatch("1") and pattern.fullmatch("10")
    assert not pattern.fullmatch("0") and not pattern.fullmatch("-1") and not pattern.fullmatch("x")


def test_workers_subscribe_with_queue_filter_policies_and_reserve_no_concurrency_unless_asked():
    for function, queue, concurrency in (
        ("ProcessTasksFunction", "work", "ProcessTasksConcurrency"),
        ("MatcherFunction", "calls", "MatcherConcurrency"),
    ):
        props = RES[function]["Properties"]
        wake = props["Events"]["Wake"]["Properties"]
        assert wake["Topic"] == {"Ref": "WorkerWakeUpTopic"}
        assert wake["FilterPolicy"] == {"queue": [queue]}
        optional_reservation(function, concurrency)
        assert "CLAIM_LANES" not in props["Environment"]["Variables"]
        assert re.compile(TPL["Parameters"][concurrency]["AllowedPattern"]).fullmatch("100")
        assert not re.compile(TPL["Parameters"][concurrency]["AllowedPattern"]).fullmatch("101")
    # However many workers run (stream lanes, shards, a tail call), the running limit holds: RUNNER_CAPACITY unless set.
    assert Settings(queue_table_name="t").running_limit_of("work") == 3
    process = RES["ProcessTasksFunction"]["Properties"]
    assert process["Environment"]["Variables"]["RUNNING_LIMIT"] == {"Ref": "WorkRunningLimit"}
    assert TPL["Parameters"]["WorkRunningLimit"]["Default"] == ""
    assert process["EventInvokeConfig"]["MaximumRetryAttempts"] == 1
    # The Lambda timeout leaves room after the default time budget for tasks in flight: by default, a task that
    # declares nothing (DefaultRunSeconds) claimed at the end of the budget still finishes (taskqueue/run_time.py).
    from taskqueue.core.run_time import fits

    parameters = TPL["Parameters"]
    assert process["Timeout"] == {"Ref": "ProcessTasksTimeout"}
    timeout, budget = parameters["ProcessTasksTimeout"]["Default"], parameters["TimeBudgetSeconds"]["Default"]
    assert fits(parameters["DefaultRunSeconds"]["Default"], timeout - budget)
    # Lambda's limit; the creation check and the worker's claims read the same number.
    assert parameters["ProcessTasksTimeout"]["MaxValue"] == 900
    assert process["Environment"]["Variables"]["WORKER_TIMEOUT_SECONDS"] == {"Ref": "ProcessTasksTimeout"}
    create = RES["CreateTasksFunction"]["Properties"]["Environment"]["Variables"]
    assert create["WORKER_TIMEOUT_SECONDS"] == {"Ref": "ProcessTasksTimeout"}


def test_no_function_reserves_concurrency_by_default_so_a_new_account_can_deploy_the_stack():
    """An account's unreserved concurrency may not fall below 100, and a new account's quota is often 10: any
    reservation at all makes the stack fail to create there. The defaults reserve nothing."""
    reserved = {}
    for name, resource in RES.items():
        if resource["Type"] == "AWS::Serverless::Function":
            value = resource["Properties"].get("ReservedConcurrentExecutions")
            if value is not None:
                assert "Fn::If" in value, f"{name} always reserves concurrency ({value})"
                _, if_set, _ = value["Fn::If"]
                reserved[name] = TPL["Parameters"][if_set["Ref"]]["Default"]
    assert set(reserved) == {"CreateTasksFunction", "ProcessTasksFunction", "MatcherFunction"}
    assert all(default == "" for default in reserved.values()), reserved
    optional_reservation("CreateTasksFunction", "CreateTasksConcurrency")


def test_create_tasks_schedule_rate_and_state_are_parameters_with_valid_defaults():
    schedule = events("CreateTasksFunction")["Schedule"]["Properties"]
    assert schedule["Schedule"] == {"Ref": "CreateTasksScheduleRate"}
    assert schedule["State"] == {"Ref": "CreateTasksScheduleState"}
    # EventBridge's syntax: rate(1 minute) or rate(N minutes|hours|days), N >= 1 (cron is not offered here).
    rate = TPL["Parameters"]["CreateTasksScheduleRate"]["Default"]
    assert re.fullmatch(r"rate\((1 (minute|hour|day)|([2-9]|[1-9][0-9]+) (minutes|hours|days))\)", rate), rate
    state = TPL["Parameters"]["CreateTasksScheduleState"]
    assert set(state["AllowedValues"]) == {"ENABLED", "DISABLED"} and state["Default"] in state["AllowedValues"]


def test_the_schedule_creates_nothing_unless_the_deployer_turns_it_on():
    """A production stack must not put junk tasks into a real queue: in LIFO queue "work" they would be served
    before older real work, whose tasks would then be shed."""
    assert TPL["Parameters"]["CreateTasksScheduleState"]["Default"] == "DISABLED"


def test_the_schedule_is_a_real_repeating_job_whose_input_the_deployer_chooses():
    schedule = events("CreateTasksFunction")["Schedule"]["Properties"]
    text, variables = schedule["Input"]["Fn::Sub"]
    named = set(re.findall(r"\$\{(\w+)\}", text))
    assert named == {"CreateTasksScheduleQueue", "CreateTasksCount", "CreateTasksSchedulePriority", "TtlSeconds",
                     "CreateTasksSchedulePayload"}
    assert variables == {"TtlSeconds": {"Fn::If": ["HasScheduleTtl", {"Ref": "CreateTasksScheduleTtlSeconds"},
                                                    {"Ref": "DefaultTtlSeconds"}]}}
    params = TPL["Parameters"]
    # What the parameters admit is what CreateTasks admits (its JSON Schema and the model's rules).
    assert re.compile(params["CreateTasksScheduleQueue"]["AllowedPattern"]).pattern == keys._QUEUE_NAME.pattern
    assert (params["CreateTasksSchedulePriority"]["MinValue"], params["CreateTasksSchedulePriority"]["MaxValue"]) == (
        keys.MIN_PRIORITY, keys.MAX_PRIORITY)
    assert (params["CreateTasksCount"]["MinValue"], params["CreateTasksCount"]["MaxValue"]) == (1, MAX_TASKS_PER_REQUEST)
    ttl = re.compile(params["CreateTasksScheduleTtlSeconds"]["AllowedPattern"])
    assert ttl.fullmatch("") and ttl.fullmatch("60") and not ttl.fullmatch("0") and not ttl.fullmatch("1e3")
    payload = re.compile(params["CreateTasksSchedulePayload"]["AllowedPattern"])
    assert payload.fullmatch("{}") and payload.fullmatch('{"report": "daily"}') and not payload.fullmatch("[1]")


def test_tables_are_retained_and_protected_from_deletion_by_default():
    """sam delete, or a change that replaces a table, must not delete every task and agent."""
    for table in ("QueueTable", "AgentTable"):
        resource = RES[table]
        # DynamoDB tables have no Snapshot deletion policy (CloudFormation offers it for RDS, EBS, Redshift...).
        assert (resource["DeletionPolicy"], resource["UpdateReplacePolicy"]) == ("Retain", "Retain"), table
        assert resource["Properties"]["DeletionProtectionEnabled"] == {"Fn::If": ["ProtectTables", True, False]}, table
        assert resource["Properties"]["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    assert TPL["Conditions"]["ProtectTables"] == {"Fn::Equals": [{"Ref": "TableDeletionProtection"}, "true"]}
    assert TPL["Parameters"]["TableDeletionProtection"]["Default"] == "true"
    operations = (ROOT / "docs" / "operations.md").read_text()
    assert "## Removing the stack" in operations and "--no-deletion-protection-enabled" in operations


def test_dead_letters_are_kept_apart_from_successful_tasks():
    env = TPL["Globals"]["Function"]["Environment"]["Variables"]
    assert env["DEAD_LETTER_RETENTION_SECONDS"] == {"Ref": "DeadLetterRetentionSeconds"}
    assert env["RETENTION_SECONDS"] == {"Ref": "RetentionSeconds"}
    assert TPL["Parameters"]["DeadLetterRetentionSeconds"]["Default"] == 14 * 86400
    assert TPL["Parameters"]["RetentionSeconds"]["Default"] == 86400


def test_stream_mappings_start_where_no_record_is_skipped():
    """LATEST would skip every record written while a mapping is (re)created; TRIM_HORIZON reads from the oldest
    record the stream keeps (24 h), and the record age bounds how far back a recreated mapping reads again (its old
    batches read their tasks before claiming: tests/integration/test_process_tasks_stream.py)."""
    for function, name in STREAMS:
        props = events(function)[name]["Properties"]
        assert props["StartingPosition"] == "TRIM_HORIZON", name
        assert props["MaximumRecordAgeInSeconds"] == {"Ref": "StreamMaximumRecordAgeSeconds"}, name
    age = TPL["Parameters"]["StreamMaximumRecordAgeSeconds"]
    # Lambda's range is 60..604800; the stream keeps records 24 h, so more than that means nothing.
    assert 60 <= age["MinValue"] <= age["Default"] <= age["MaxValue"] <= 86400


def test_worker_wakeups_expire_and_do_not_fill_the_failed_events_queue():
    """A wake-up carries only a queue name and the safety net wakes every queue with work each minute: a throttled
    wake-up must expire within minutes, and is dropped, not parked beside real failures in FailedEventsQueue."""
    for function in ("ProcessTasksFunction", "MatcherFunction"):
        props = RES[function]["Properties"]
        config = props["EventInvokeConfig"]
        assert 60 <= config["MaximumEventAgeInSeconds"] <= 900, function
        # One retry after a function error (Lambda waits about a minute) still falls inside the age.
        assert config["MaximumRetryAttempts"] == 1, function
        assert "DestinationConfig" not in config, function
        # Stream batches end there (the event sources' destination): `Type: SQS` makes SAM grant exactly
        # sqs:SendMessage on the queue; SQSSendMessagePolicy would add SendMessageBatch, which nothing calls.
        assert not any("SQSSendMessagePolicy" in policy for policy in props["Policies"]), function


def test_create_tasks_scheduled_invocations_that_fail_land_in_the_failed_events_queue():
    """The schedule invokes CreateTasks asynchronously: once Lambda's retries (same request id: idempotent) are used
    up, or the event is an hour old, the event must be kept for an operator, not dropped."""
    props = RES["CreateTasksFunction"]["Properties"]
    config = props["EventInvokeConfig"]
    assert config["DestinationConfig"]["OnFailure"] == {"Type": "SQS", "Destination": {"Fn::GetAtt": ["FailedEventsQueue", "Arn"]}}
    assert config["MaximumRetryAttempts"] == 2 and config["MaximumEventAgeInSeconds"] == 3600
    # A producer's cap is the deployer's choice (none by default: a new account could not create the stack).
    optional_reservation("CreateTasksFunction", "CreateTasksConcurrency")
    description = TPL["Outputs"]["FailedEventsQueueUrl"]["Description"]
    assert "CreateTasks" in description and "stream batches" in description and "taskq failed-events" in description


def test_failed_events_queue_is_kms_encrypted_and_alarmed():
    queue = RES["FailedEventsQueue"]["Properties"]
    assert queue["KmsMasterKeyId"] == "alias/aws/sqs" and "SqsManagedSseEnabled" not in queue
    alarm = RES["FailedEventsAlarm"]["Properties"]
    assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/SQS", "ApproximateNumberOfMessagesVisible")
    assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": ["FailedEventsQueue", "QueueName"]}}]
    assert (alarm["ComparisonOperator"], alarm["Threshold"], alarm["Statistic"]) == ("GreaterThanThreshold", 0, "Maximum")
    for actions in ("AlarmActions", "OKActions"):
        assert alarm[actions] == {"Fn::If": ["HasAlarmEmail", [{"Ref": "AlarmTopic"}], {"Ref": "AWS::NoValue"}]}
    assert "taskq failed-events" in alarm["AlarmDescription"]


def checkov_skips() -> dict[tuple[str, str], str]:
    """(resource, check id) -> reason, from each resource's Metadata.checkov.skip (scripts/security-check)."""
    found = {}
    for name, resource in RES.items():
        for skip in ((resource.get("Metadata") or {}).get("checkov") or {}).get("skip", []):
            found[name, skip["id"]] = skip.get("comment", "")
    return found


def test_every_skipped_checkov_check_says_why_and_is_in_the_security_docs():
    skips = checkov_skips()
    assert skips, "no checkov skips found: scripts/security-check would fail on the checks they cover"
    security = (ROOT / "docs" / "operations.md").read_text().split("## Security", 1)[-1]
    for (resource, check), reason in skips.items():
        assert len(reason) > 40, f"{resource} skips {check} without a reason"
        assert check in security, f"{check} (skipped on {resource}) is not explained in docs/operations.md, Security"
    # The checks this project fixes instead of skipping.
    for fixed in ("CKV_AWS_27", "CKV_AWS_28", "CKV_AWS_26", "CKV_AWS_7"):
        assert not any(check == fixed for _, check in skips), fixed
    assert ("CreateTasksFunction", "CKV_AWS_115") not in skips or "CreateTasksConcurrency" in skips["CreateTasksFunction", "CKV_AWS_115"]


def refs_in(value) -> set[str]:
    """Logical ids referenced anywhere in ``value`` (Ref and GetAtt, through Fn::If and lists)."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, arg in value.items():
            if key == "Ref" and isinstance(arg, str):
                found.add(arg)
            elif key == "Fn::GetAtt":
                found.add(arg[0] if isinstance(arg, list) else arg.split(".", 1)[0])
            else:
                found |= refs_in(arg)
    elif isinstance(value, list):
        for item in value:
            found |= refs_in(item)
    return found


def key_behind(key_id) -> tuple[str, dict]:
    """Follow a KmsMasterKeyId to the AWS::KMS::Key of this template (through an alias if need be)."""
    named = refs_in(key_id) & set(RES)
    assert len(named) == 1, f"{key_id!r} does not name a key of this template"
    (logical,) = named
    resource = RES[logical]
    if resource["Type"] == "AWS::KMS::Alias":
        return key_behind(resource["Properties"]["TargetKeyId"])
    assert resource["Type"] == "AWS::KMS::Key", (logical, resource["Type"])
    return logical, resource


def test_alarm_topics_are_encrypted_with_a_key_cloudwatch_may_use():
    """CloudWatch cannot publish to a topic under the AWS-managed alias/aws/sns key: every topic an alarm
    notifies must use a customer-managed key of this template whose policy lets cloudwatch.amazonaws.com
    generate data keys and decrypt."""
    alarms = {name: r for name, r in RES.items() if r["Type"] == "AWS::CloudWatch::Alarm"}
    topics = set()
    for alarm in alarms.values():
        props = alarm["Properties"]
        for actions in ("AlarmActions", "OKActions", "InsufficientDataActions"):
            topics |= {t for t in refs_in(props.get(actions)) if RES.get(t, {}).get("Type") == "AWS::SNS::Topic"}
    assert topics, "no alarm notifies a topic of this template"
    for topic in sorted(topics):
        key_id = RES[topic]["Properties"].get("KmsMasterKeyId")
        assert key_id is not None, f"{topic} is not encrypted"
        assert key_id != "alias/aws/sns", f"{topic} uses the AWS-managed key, which CloudWatch cannot use"
        logical, key = key_behind(key_id)
        assert key.get("Condition") == RES[topic].get("Condition"), (topic, logical)
        props = key["Properties"]
        assert props["EnableKeyRotation"] is True
        statements = props["KeyPolicy"]["Statement"]
        cloudwatch = [
            s for s in statements
            if s["Effect"] == "Allow" and (s.get("Principal") or {}).get("Service") in ("cloudwatch.amazonaws.com", ["cloudwatch.amazonaws.com"])
        ]
        assert cloudwatch, f"{logical}'s policy does not let CloudWatch use it"
        actions = {a for s in cloudwatch for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
        assert {"kms:Decrypt", "kms:GenerateDataKey*"} <= actions, actions
        assert "kms:*" not in actions
        # The account keeps full administration of its key (else the key could become unmanageable).
        admins = [s for s in statements if s["Effect"] == "Allow" and s["Action"] in ("kms:*", ["kms:*"])]
        assert admins and all(":root" in json.dumps(s["Principal"]) for s in admins), admins


def test_topics_encrypted_and_policies_scoped():
    for topic, resource in RES.items():
        if resource["Type"] == "AWS::SNS::Topic":
            assert resource["Properties"].get("KmsMasterKeyId"), f"{topic} is not encrypted"
    for function in ("CreateTasksFunction", "TriggerFunction", "ProcessTasksFunction", "MatcherFunction", "AgentEventsFunction"):
        for policy in RES[function]["Properties"]["Policies"]:
            (name, scope), = policy.items()
            for wildcard in re.findall(r'"[^"]*\*[^"]*"', json.dumps(scope)):
                # Only this stack's own schedule group (its wake-up schedules) may end in a wildcard.
                assert wildcard.endswith(':schedule/${WakeScheduleGroup}/*"'), f"{function} {name}: {wildcard}"


def agent_table_actions(function: str) -> set[str]:
    statements = [s for p in RES[function]["Properties"]["Policies"] for s in p.get("Statement", [])]
    return {a for s in statements if s["Resource"] == {"Fn::GetAtt": ["AgentTable", "Arn"]} for a in s["Action"]}


def test_agent_events_have_their_own_function_without_reserved_concurrency():
    # Lambda refuses a synchronous invoke over reserved concurrency with 429: agent events must not share the
    # Matcher's slot, which a matching run holds for up to its time budget.
    props = RES["AgentEventsFunction"]["Properties"]
    assert "ReservedConcurrentExecutions" not in props
    assert (ROOT / props["CodeUri"] / "app.py").is_file()
    assert props["Timeout"] == 30
    assert "Events" not in props  # invoked directly by the contact center
    matcher_env = RES["MatcherFunction"]["Properties"]["Environment"]["Variables"]
    for name in ("AGENT_TABLE_NAME", "AGENT_ORDER", "MATCH_ATTRIBUTES"):
        assert props["Environment"]["Variables"][name] == matcher_env[name]
    assert TPL["Outputs"]["AgentEventsFunctionName"]["Value"] == {"Ref": "AgentEventsFunction"}


def test_agent_table_access_is_least_privilege_for_each_function():
    # AgentStore: find (GetItem), depth and head (Query), transactions of Put/Delete/Update items.
    assert agent_table_actions("AgentEventsFunction") == {
        "dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"}
    # Matching: the head of a queue (Query); the match transaction updates the agent and deletes its entries.
    assert agent_table_actions("MatcherFunction") == {"dynamodb:Query", "dynamodb:UpdateItem", "dynamodb:DeleteItem"}
    # On the queue table AgentEvents writes a hung-up call (GetItem, UpdateItem of the call), nothing else.
    queue_table = [st for p in RES["AgentEventsFunction"]["Properties"]["Policies"] for st in p.get("Statement", [])
                   if "QueueTable" in json.dumps(st["Resource"])]
    actions = sorted((a, json.dumps(st["Resource"])) for st in queue_table
                     for a in (st["Action"] if isinstance(st["Action"], list) else [st["Action"]]))
    assert actions == [
        ("dynamodb:GetItem", json.dumps({"Fn::GetAtt": ["QueueTable", "Arn"]})),
        ("dynamodb:UpdateItem", json.dumps({"Fn::GetAtt": ["QueueTable", "Arn"]})),
    ]


def test_billing_mode_is_on_demand_by_default_and_provisioned_scales_every_table_and_index():
    """Issue 21: BillingMode PROVISIONED gives every table and index provisioned throughput and target-tracking auto
    scaling, reads and writes apart; the default stays on-demand, with no scaling resource created."""
    raw = template(billing_as_deployed=False)
    param = raw["Parameters"]["BillingMode"]
    assert param["Default"] == "PAY_PER_REQUEST" and set(param["AllowedValues"]) == {"PAY_PER_REQUEST", "PROVISIONED"}
    assert raw["Conditions"]["Provisioned"] == {"Fn::Equals": [{"Ref": "BillingMode"}, "PROVISIONED"]}
    wanted: set[tuple[str, str]] = set()
    for logical, resource in raw["Resources"].items():
        if resource["Type"] != "AWS::DynamoDB::Table":
            continue
        props = resource["Properties"]
        assert props["BillingMode"] == {"Ref": "BillingMode"}
        for entry, resource_id in [(props, f"table/${{{logical}}}")] + [
            (index, f"table/${{{logical}}}/index/{index['IndexName']}") for index in props.get("GlobalSecondaryIndexes", [])
        ]:
            assert entry["ProvisionedThroughput"]["Fn::If"][0] == "Provisioned", resource_id
            assert entry["ProvisionedThroughput"]["Fn::If"][2] == {"Ref": "AWS::NoValue"}, resource_id
            kind = "index" if "/index/" in resource_id else "table"
            wanted |= {(resource_id, f"dynamodb:{kind}:ReadCapacityUnits"), (resource_id, f"dynamodb:{kind}:WriteCapacityUnits")}
    targets = {name: r for name, r in raw["Resources"].items() if r["Type"] == "AWS::ApplicationAutoScaling::ScalableTarget"}
    found = {(t["Properties"]["ResourceId"]["Fn::Sub"], t["Properties"]["ScalableDimension"]) for t in targets.values()}
    assert found == wanted  # QueueTable, ReadyIndex, StatusIndex, AgentTable: reads and writes each
    assert all(t["Condition"] == "Provisioned" for t in targets.values())
    policies = [r for r in raw["Resources"].values() if r["Type"] == "AWS::ApplicationAutoScaling::ScalingPolicy"]
    assert {p["Properties"]["ScalingTargetId"]["Ref"] for p in policies} == set(targets)
    for policy in policies:
        assert policy["Condition"] == "Provisioned" and policy["Properties"]["PolicyType"] == "TargetTrackingScaling"
        config = policy["Properties"]["TargetTrackingScalingPolicyConfiguration"]
        assert config["TargetValue"] == {"Ref": "AutoScalingTargetUtilization"}


@pytest.mark.parametrize(
    ("parameter", "variable", "accepted", "refused"),
    [
        ("WorkGroupConcurrency", "GROUP_CONCURRENCY", ["", "0", "1", "25", "1000"], ["1001", "-1", "x", "01"]),
        ("WorkGroupRateLimit", "GROUP_RATE_LIMIT", ["", "0", "10", "10/1", "600/60", "5/0.5", "3/2.5"], ["0/1", "10/0", "a/1", "10/0.0", "10/"]),
    ],
)
def test_fair_share_parameters_take_only_values_the_worker_reads(parameter, variable, accepted, refused):
    spec = TPL["Parameters"][parameter]
    process = TPL["Resources"]["ProcessTasksFunction"]["Properties"]
    assert process["Environment"]["Variables"][variable] == {"Ref": parameter} and spec["Default"] == ""
    pattern = re.compile(spec["AllowedPattern"])
    for value in accepted:
        assert pattern.fullmatch(value), value
        Settings.from_env({"QUEUE_TABLE_NAME": "t", variable: value})  # a deployable value never fails a cold start
    for value in refused:
        assert not pattern.fullmatch(value), value
