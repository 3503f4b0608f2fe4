"""template.yaml: cfn-lint clean, and the wiring the design depends on."""

import json
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT, template

TPL = template()
RES = TPL["Resources"]


def events(function: str) -> dict:
    return RES[function]["Properties"]["Events"]


def test_cfn_lint_is_clean():
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    run = subprocess.run([str(cfn_lint), str(ROOT / "template.yaml")], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_globals_runtime_architecture_tracing_and_layer():
    fn = TPL["Globals"]["Function"]
    assert (fn["Runtime"], fn["Architectures"], fn["Tracing"]) == ("python3.13", ["arm64"], "Active")
    assert fn["Layers"] == [{"Ref": "QueueLayer"}]
    assert RES["QueueLayer"]["Metadata"]["BuildMethod"] == "python3.13"
    for name in ("POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE", "QUEUE_TABLE_NAME", "TRIGGER_TOPIC_ARN", "PROCESS_TASKS_TOPIC_ARN"):
        assert name in fn["Environment"]["Variables"]


def test_table_stream_ttl_and_sparse_indexes():
    props = RES["QueueTable"]["Properties"]
    assert props["KeySchema"] == [{"AttributeName": "taskId", "KeyType": "HASH"}]
    assert props["StreamSpecification"]["StreamViewType"] == "NEW_AND_OLD_IMAGES"
    assert props["TimeToLiveSpecification"] == {"AttributeName": "ttl", "Enabled": True}
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"] is True
    indexes = {i["IndexName"]: i for i in props["GlobalSecondaryIndexes"]}
    ready = indexes["ReadyIndex"]
    assert [k["AttributeName"] for k in ready["KeySchema"]] == ["readyKey", "readySort"]
    # Only what a claim decision needs is projected.
    assert ready["Projection"] == {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["ttl", "notBefore"]}
    assert indexes["StatusIndex"]["Projection"] == {"ProjectionType": "KEYS_ONLY"}


def test_trigger_stream_delivers_only_inserts_and_ttl_deletions():
    stream = events("TriggerFunction")["QueueStream"]["Properties"]
    patterns = [json.loads(f["Pattern"]) for f in stream["FilterCriteria"]["Filters"]]
    assert {"eventName": ["INSERT"]} in patterns
    assert {
        "eventName": ["REMOVE"],
        "userIdentity": {"type": ["Service"], "principalId": ["dynamodb.amazonaws.com"]},
    } in patterns
    assert stream["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert stream["BatchSize"] == {"Ref": "TriggerBatchSize"}
    assert stream["MaximumBatchingWindowInSeconds"] == {"Ref": "TriggerBatchingWindowSeconds"}
    assert stream["DestinationConfig"]["OnFailure"]["Destination"] == {"Fn::GetAtt": ["FailedEventsQueue", "Arn"]}
    assert TPL["Parameters"]["TriggerBatchSize"]["Default"] == 10
    assert TPL["Parameters"]["TriggerBatchingWindowSeconds"]["Default"] == 10


def test_trigger_tail_calls_and_safety_net():
    ev = events("TriggerFunction")
    assert ev["TailCall"]["Properties"]["Topic"] == {"Ref": "TriggerTopic"}
    assert ev["SafetyNet"]["Type"] == "Schedule"
    assert RES["TriggerFunction"]["Properties"]["EventInvokeConfig"]["MaximumRetryAttempts"] == 0


def test_workers_subscribe_with_queue_filter_policies_and_reserved_concurrency():
    for function, queue, concurrency in (
        ("ProcessTasksFunction", "work", "ProcessTasksConcurrency"),
        ("MatcherFunction", "calls", "MatcherConcurrency"),
    ):
        props = RES[function]["Properties"]
        wake = props["Events"]["Wake"]["Properties"]
        assert wake["Topic"] == {"Ref": "ProcessTasksTopic"}
        assert wake["FilterPolicy"] == {"queue": [queue]}
        assert props["ReservedConcurrentExecutions"] == {"Ref": concurrency}
        assert TPL["Parameters"][concurrency]["Default"] == 1
    process = RES["ProcessTasksFunction"]["Properties"]
    assert process["EventInvokeConfig"]["MaximumRetryAttempts"] == 1
    # The Lambda timeout leaves room after the default time budget for tasks in flight.
    assert process["Timeout"] >= 2 * TPL["Parameters"]["TimeBudgetSeconds"]["Default"]


def test_create_tasks_schedule_rate_and_state_are_parameters():
    schedule = events("CreateTasksFunction")["Schedule"]["Properties"]
    assert schedule["Schedule"] == {"Ref": "CreateTasksScheduleRate"}
    assert schedule["State"] == {"Ref": "CreateTasksScheduleState"}
    assert TPL["Parameters"]["CreateTasksScheduleRate"]["Default"] == "rate(1 minute)"
    assert TPL["Parameters"]["CreateTasksScheduleState"]["AllowedValues"] == ["ENABLED", "DISABLED"]


def test_topics_encrypted_and_policies_scoped():
    for topic in ("TriggerTopic", "ProcessTasksTopic"):
        assert RES[topic]["Properties"]["KmsMasterKeyId"] == "alias/aws/sns"
    for function in ("CreateTasksFunction", "TriggerFunction", "ProcessTasksFunction", "MatcherFunction"):
        for policy in RES[function]["Properties"]["Policies"]:
            (name, scope), = policy.items()
            assert "*" not in json.dumps(scope), f"{function} {name} is not scoped"
