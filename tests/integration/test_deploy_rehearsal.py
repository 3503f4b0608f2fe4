"""A deploy rehearsal: template.yaml through the SAM transform (aws-sam-translator, what `sam deploy` runs), then
created as a stack in moto's CloudFormation, with the production defaults and with reserved concurrency asked for.

What it shows: the stack creates; no function reserves concurrency unless asked, so an account whose quota is 10
concurrent executions (a new account) can create it, while the reservations the seed's defaults made are refused
there with Lambda's own message; the schedule is off; the tables are protected and outlive the stack; the workers'
stream mappings start at the oldest record kept (TRIM_HORIZON: nothing written before they exist is skipped); the workers' environment still gives the running limit; no task runner is set, so ProcessTasks, run with the deployed environment, claims nothing and says so.

moto's CloudFormation has no AWS::CloudWatch::Alarm: the alarms are left out of the rehearsal (a reference to one
becomes a placeholder string); cfn-lint, `sam validate --lint` and tests/unit/test_observability_template.py check
them.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from local.template.sam_transform import LOCAL_BUCKET, transform
from local.template.template import load_yaml
from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.core.settings import Settings
from taskqueue.core.states import TaskStatus
from taskqueue.services import Services
from tests.support import ROOT, LambdaContextStub, emitted, load_event, load_function

# moto warns for every resource type its CloudFormation only records (SNS subscriptions, EventInvokeConfig).
pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse:UserWarning")

# moto's CloudFormation cannot create these: the rehearsal leaves them out.
NOT_IN_MOTO = {"AWS::CloudWatch::Alarm"}
# What the template reserved before reservations became optional (1 + 1 + 10 = 12 units).
SEED_RESERVATIONS = {"ProcessTasksConcurrency": "1", "MatcherConcurrency": "1", "CreateTasksConcurrency": "10"}
NEW_ACCOUNT_QUOTA = "10"
UNRESERVED_MINIMUM_MESSAGE = "decreases account's UnreservedConcurrentExecution below its minimum value of [100]"


def cloudformation(parameters: dict[str, str]) -> dict[str, Any]:
    """The template as CloudFormation (the SAM transform with these parameter values), alarms left out."""
    doc = load_yaml((ROOT / "template.yaml").read_text())
    values = {name: str(parameters.get(name, spec.get("Default", ""))) for name, spec in doc["Parameters"].items()}
    cfn = transform(doc, values, "template.yaml")
    left_out = {name for name, res in cfn["Resources"].items() if res["Type"] in NOT_IN_MOTO}
    for name in left_out:
        del cfn["Resources"][name]

    def scrub(value: Any) -> Any:
        if isinstance(value, dict):
            if value.get("Ref") in left_out:
                return f"left-out-{value['Ref']}"
            if "Fn::GetAtt" in value and value["Fn::GetAtt"][0] in left_out:
                return f"left-out-{value['Fn::GetAtt'][0]}"
            return {key: scrub(item) for key, item in value.items()}
        if isinstance(value, list):
            return [scrub(item) for item in value]
        return value

    return scrub(cfn)


class Rehearsal:
    def __init__(self, name: str, parameters: dict[str, str]) -> None:
        self.name = name
        self.cfn = cloudformation(parameters)
        self._upload_code()
        self.cloudformation = boto3.client("cloudformation")
        self.cloudformation.create_stack(
            StackName=name,
            TemplateBody=json.dumps(self.cfn),
            Parameters=[{"ParameterKey": k, "ParameterValue": str(v)} for k, v in parameters.items()],
            Capabilities=["CAPABILITY_IAM", "CAPABILITY_AUTO_EXPAND"],
        )
        self.stack = self.cloudformation.describe_stacks(StackName=name)["Stacks"][0]
        self.physical = {
            r["LogicalResourceId"]: r["PhysicalResourceId"]
            for r in self.cloudformation.list_stack_resources(StackName=name)["StackResourceSummaries"]
        }

    def _upload_code(self) -> None:
        """The code the transform points at (s3://LOCAL_BUCKET/<path>), as `sam deploy` uploads it."""
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket=LOCAL_BUCKET)
        archive = io.BytesIO()
        with zipfile.ZipFile(archive, "w") as zipped:
            zipped.writestr("app.py", "def lambda_handler(event, context):\n    return None\n")
        for resource in self.cfn["Resources"].values():
            for key in ("Code", "Content"):
                code = (resource.get("Properties") or {}).get(key)
                if isinstance(code, dict) and code.get("S3Bucket") == LOCAL_BUCKET:
                    s3.put_object(Bucket=LOCAL_BUCKET, Key=code["S3Key"], Body=archive.getvalue())

    def environment(self, logical: str) -> dict[str, str]:
        """A function's environment as Lambda holds it (strings; moto's CloudFormation keeps numbers as given)."""
        found = boto3.client("lambda").get_function(FunctionName=self.physical[logical])
        return {k: str(v) for k, v in found["Configuration"]["Environment"]["Variables"].items()}

    def reserved(self) -> dict[str, int]:
        """Reserved concurrency per function of the stack (functions without any left out)."""
        client = boto3.client("lambda")
        found = {}
        for logical, resource in self.cfn["Resources"].items():
            if resource["Type"] == "AWS::Lambda::Function":
                value = client.get_function_concurrency(FunctionName=self.physical[logical]).get("ReservedConcurrentExecutions")
                if value is not None:
                    found[logical] = int(value)
        return found


@pytest.fixture
def rehearse(aws: None) -> Iterator[Any]:
    made = []

    def make(parameters: dict[str, str] | None = None) -> Rehearsal:
        rehearsal = Rehearsal(f"rehearsal-{len(made)}", parameters or {})
        made.append(rehearsal)
        return rehearsal

    yield make


def apply_reservations_under_quota(rehearsal: Rehearsal, monkeypatch: pytest.MonkeyPatch) -> None:
    """What CloudFormation asks Lambda for each function that reserves concurrency (PutFunctionConcurrency), in an
    account whose quota is NEW_ACCOUNT_QUOTA: moto then enforces Lambda's rule (unreserved >= 100)."""
    monkeypatch.setenv("MOTO_LAMBDA_CONCURRENCY_QUOTA", NEW_ACCOUNT_QUOTA)
    client = boto3.client("lambda")
    for logical, units in rehearsal.reserved().items():
        client.delete_function_concurrency(FunctionName=rehearsal.physical[logical])
        client.put_function_concurrency(FunctionName=rehearsal.physical[logical], ReservedConcurrentExecutions=units)


def test_the_defaults_create_a_stack_that_a_new_account_can_hold(rehearse, monkeypatch):
    stack = rehearse()
    assert stack.stack["StackStatus"] == "CREATE_COMPLETE"
    assert stack.reserved() == {}
    apply_reservations_under_quota(stack, monkeypatch)  # nothing to reserve: nothing refused

    # The workers hold the legacy system's limit without a reservation.
    env = stack.environment("ProcessTasksFunction")
    settings = Settings.from_env(env)
    assert settings.running_limit_of("work") == settings.runner_capacity == 3
    assert env["DEAD_LETTER_RETENTION_SECONDS"] == str(14 * 86400) and env["RETENTION_SECONDS"] == "86400"


def test_the_seeds_reservations_cannot_be_created_in_a_new_account(rehearse, monkeypatch):
    stack = rehearse(SEED_RESERVATIONS)
    assert stack.reserved() == {"ProcessTasksFunction": 1, "MatcherFunction": 1, "CreateTasksFunction": 10}
    env = stack.environment("ProcessTasksFunction")
    assert Settings.from_env(env).running_limit_of("work") == 3  # one design: the running limit holds either way
    with pytest.raises(ClientError, match=r"UnreservedConcurrentExecution below its minimum value of \[100\]"):
        apply_reservations_under_quota(stack, monkeypatch)


def test_the_schedule_is_off_and_the_stream_mappings_skip_no_record(rehearse):
    stack = rehearse()
    events = boto3.client("events")
    rule = events.describe_rule(Name=stack.physical["CreateTasksFunctionSchedule"])
    assert rule["State"] == "DISABLED"
    (target,) = events.list_targets_by_rule(Rule=rule["Name"])["Targets"]
    assert json.loads(target["Input"]) == {"queue": "work", "count": 1, "priority": 0, "ttlSeconds": 3600, "payload": {}}
    mappings = [m for function in ("ProcessTasksFunction", "MatcherFunction") for m in boto3.client(
        "lambda").list_event_source_mappings(FunctionName=stack.physical[function])["EventSourceMappings"]]
    assert len(mappings) == 3 and {m.get("StartingPosition") for m in mappings} == {"TRIM_HORIZON"}
    assert not boto3.client("lambda").list_event_source_mappings(
        FunctionName=stack.physical["TriggerFunction"])["EventSourceMappings"]

    asked = rehearse({"CreateTasksScheduleState": "ENABLED", "CreateTasksScheduleQueue": "calls", "CreateTasksCount": "2",
                      "CreateTasksSchedulePayload": '{"caller": "nightly", "preferences": {}}',
                      "CreateTasksSchedulePriority": "7", "CreateTasksScheduleTtlSeconds": "900"})
    rule = events.describe_rule(Name=asked.physical["CreateTasksFunctionSchedule"])
    assert rule["State"] == "ENABLED"
    (target,) = events.list_targets_by_rule(Rule=rule["Name"])["Targets"]
    assert json.loads(target["Input"]) == {"queue": "calls", "count": 2, "priority": 7, "ttlSeconds": 900,
                                           "payload": {"caller": "nightly", "preferences": {}}}


def test_the_tables_and_their_items_outlive_the_stack_until_removed_as_the_readme_says(rehearse):
    stack = rehearse()
    ddb = boto3.client("dynamodb")
    tables = {logical: stack.physical[logical] for logical in ("QueueTable", "AgentTable")}
    for name in tables.values():
        assert ddb.describe_table(TableName=name)["Table"]["DeletionProtectionEnabled"] is True
    lam = boto3.client("lambda")  # no Lambda runs here: moto would try to invoke the workers for the stream record
    for function in ("ProcessTasksFunction", "MatcherFunction"):
        for mapping in lam.list_event_source_mappings(FunctionName=stack.physical[function])["EventSourceMappings"]:
            lam.update_event_source_mapping(UUID=mapping["UUID"], Enabled=False)
    ddb.put_item(TableName=tables["QueueTable"], Item={"taskId": {"S": "kept"}})

    stack.cloudformation.delete_stack(StackName=stack.name)

    assert ddb.get_item(TableName=tables["QueueTable"], Key={"taskId": {"S": "kept"}})["Item"]
    for name in tables.values():
        with pytest.raises(ClientError, match="(?i)deletion ?protection"):
            ddb.delete_table(TableName=name)
        # README, "Removing the stack": turn the protection off, then delete.
        ddb.update_table(TableName=name, DeletionProtectionEnabled=False)
        ddb.delete_table(TableName=name)
    assert not set(tables.values()) & set(ddb.list_tables()["TableNames"])


def test_with_no_parameters_process_tasks_claims_nothing_and_reports_it(rehearse, monkeypatch, capsys, caplog):
    """Issue 28: a stack deployed without TaskRunner must not fake the work. The real handler, run with ProcessTasks'
    environment as the stack deployed it (its table, topics, settings), is woken with tasks waiting: it claims
    nothing, logs why, counts NoTaskRunner (NoTaskRunnerAlarm's metric), and every task stays PENDING."""
    stack = rehearse()
    env = stack.environment("ProcessTasksFunction")
    assert env["TASK_RUNNER"] == ""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    svc = Services.from_env()
    request = parse_create_request({"queue": "work", "count": 3}, svc.settings)
    tasks = new_tasks(request, svc.clock.now_ms(), svc.settings)
    svc.store.put_tasks(tasks)

    process_tasks = load_function("process_tasks")  # imported with the deployed environment, as Lambda starts it
    capsys.readouterr()
    result = process_tasks.lambda_handler(load_event("process_tasks-direct.json"), LambdaContextStub())

    assert (result["claimed"], result["succeeded"], result["stopped_by"]) == (0, 0, "no-runner")
    assert [svc.store.get(t.task_id).status for t in tasks] == [TaskStatus.PENDING] * 3
    counted = [(m.name, m.value, m.dims.get("queue")) for m in emitted(capsys.readouterr().out) if m.name == "NoTaskRunner"]
    assert counted == [("NoTaskRunner", 1, "work")]
    assert any("no task runner is configured" in r.getMessage() for r in caplog.records if r.levelname == "WARNING")
