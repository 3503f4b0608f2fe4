"""Least privilege by what the code calls: each function's role grants exactly the DynamoDB / SNS / SQS actions,
on exactly the resources, that its code (and Lambda on its behalf) really uses.

Granted: template.yaml expanded by the SAM transform (aws-sam-translator, as ``sam validate`` and CloudFormation
run it), so SAM's policy templates (DynamoDBCrudPolicy, SNSPublishMessagePolicy, ...) and the policies SAM adds
itself (an event source's on-failure destination, AWS managed policies) become the IAM statements AWS evaluates.

Called: each handler runs through its Lambda entry point against moto, with the environment the template gives it
(Globals + its own variables, references resolved to the moto resources) and the boto3 clients its own code builds;
a botocore hook (``before-parameter-build``) records every request. The paths run cover what each function does in
production, errors included (see the scenario of each function below). A request maps to the IAM actions AWS
authorizes for it: most are the operation's name on the table (or ``table/<t>/index/<i>`` for an index query);
TransactWriteItems is authorized per item (PutItem / UpdateItem / DeleteItem / ConditionCheckItem on each item's
table). What Lambda itself does with the role is derived from the translated template: a stream event source
reads its stream and sends failed batches to its on-failure destination, an asynchronous on-failure destination
gets SendMessage, tracing writes to X-Ray, and every function writes its logs.

EventBridge Scheduler requests (the queues' wake-ups at their delayed heads) map to ``scheduler:<Operation>`` on
``schedule/<group>/<name>`` (the stack's name standing for itself), and a Create/Update passing the wake-up role to
``iam:PassRole`` on ``WakeScheduleRole``.

Asserted per function: every call is granted (no AccessDenied on AWS), and every action granted on a resource of
this template is called by some path (nothing extra). Grants on ``*`` come only from the AWS managed policies SAM
attaches and are the documented ones (BROADER_GRANTS; docs/operations.md, "Security").
"""

from __future__ import annotations

import contextlib
import copy
import fnmatch
import functools
import json
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import boto3
import botocore.session
import pytest

from taskqueue.client import TaskQueueClient
from taskqueue.core.errors import InvalidAgentInput, InvalidEvent, InvalidTaskInput, PermanentTaskError, TaskQueueError
from taskqueue.core.model import Task, new_tasks, parse_create_request
from taskqueue.core.settings import Settings
from taskqueue.matching.agents import AgentNotFound, AgentStore
from taskqueue.matching.pairing import Pair
from taskqueue.matching.rules import MatchSettings, parse_profile
from taskqueue.services import Services
from taskqueue.store import TaskStore
from taskqueue.work.lease import extend_lease
from tests.agent_support import AGENT_TABLE, create_agent_table
from tests.conftest import TABLE, make_settings
from tests.support import FakeClock, LambdaContextStub, load_event, load_function, template

# Error paths end without metrics: Powertools warns that it has none to publish.
pytestmark = pytest.mark.filterwarnings("ignore:No application metrics to publish:UserWarning")

FUNCTIONS = ("CreateTasksFunction", "TriggerFunction", "ProcessTasksFunction", "MatcherFunction", "AgentEventsFunction")
DATA_TYPES = ("AWS::DynamoDB::Table", "AWS::SNS::Topic", "AWS::SQS::Queue", "AWS::IAM::Role")
# The stack's name in the functions' environment here; requests naming it are mapped back to ${AWS::StackName}.
STACK = "teststack"
SCHEDULE_GROUP = "teststack-WakeScheduleGroup-1A2B3C"  # the stack's schedule group, as CloudFormation names it
SCHEDULES = "schedule/${WakeScheduleGroup}/*"  # the scheduled wake-ups (template: WAKE_SCHEDULE_GROUP)

# ---- what the role grants: the SAM transform's output ------------------------------------------------------

# The AWS managed policies SAM attaches to the roles it generates, as AWS publishes them (their ARNs are fixed).
# SAM adds them by itself; a function with its own generated role cannot drop them.
MANAGED_POLICIES: dict[str, list[dict[str, Any]]] = {
    "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole": [
        {"Effect": "Allow", "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"], "Resource": "*"},
    ],
    "arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess": [
        {
            "Effect": "Allow",
            "Action": [
                "xray:PutTraceSegments", "xray:PutTelemetryRecords", "xray:GetSamplingRules",
                "xray:GetSamplingTargets", "xray:GetSamplingStatisticSummaries",
            ],
            "Resource": "*",
        },
    ],
    "arn:aws:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole": [
        {
            "Effect": "Allow",
            "Action": [
                "logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents", "ec2:CreateNetworkInterface",
                "ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets", "ec2:DeleteNetworkInterface",
                "ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses",
            ],
            "Resource": "*",
        },
    ],
    "arn:aws:iam::aws:policy/service-role/AWSLambdaDynamoDBExecutionRole": [
        {
            "Effect": "Allow",
            "Action": [
                "dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams",
                "logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents",
            ],
            "Resource": "*",
        },
    ],
}

_LOGS = {"logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"}
_XRAY = {"xray:PutTraceSegments", "xray:PutTelemetryRecords", "xray:GetSamplingRules", "xray:GetSamplingTargets",
         "xray:GetSamplingStatisticSummaries"}
_STREAM_READ = {"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams"}
_VPC_ENI = {"ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets",
            "ec2:DeleteNetworkInterface", "ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"}
# The runner's own grants (RunnerManagedPolicyArns, RunnerPolicy) are the deployer's choice and off under the defaults.
RUNNER_CONDITIONS = ("HasRunnerManagedPolicy1", "HasRunnerManagedPolicy2", "HasRunnerManagedPolicy3")
# Every grant on "*" that remains, and why (docs/operations.md, "Security" lists them too).
BROADER_GRANTS: dict[str, dict[str, str]] = {
    "*": {
        **{a: "AWSLambdaBasicExecutionRole (SAM adds it to every generated role): logs in any log group, where the "
              "function only needs /aws/lambda/<its name>" for a in _LOGS},
        **{a: "AWSXrayWriteOnlyAccess (SAM adds it for Tracing: Active): X-Ray has no resource-level permissions; "
              "the GetSampling* actions are unused in Lambda, which makes the sampling decision" for a in _XRAY},
    },
    "ProcessTasksFunction": {
        **{a: "AWSLambdaVPCAccessExecutionRole (SAM adds it because ProcessTasks declares a VpcConfig, which is empty "
              "unless RunnerSubnetIds is set): Lambda creates the function's network interfaces with it" for a in _VPC_ENI},
        **{a: "AWSLambdaDynamoDBExecutionRole (SAM adds it for the TaskStream event source): the stream poller reads "
              "the queue table's stream with the function's role, but the policy allows reading every stream"
           for a in _STREAM_READ},
    },
    "MatcherFunction": {
        a: "AWSLambdaDynamoDBExecutionRole (SAM adds it for its DynamoDB event sources, CallStream and AgentStream): the "
           "stream poller reads the two tables' streams with the function's role, but the policy allows reading every "
           "stream" for a in _STREAM_READ
    },
}

# IAM-only DynamoDB actions (no API operation has these names): a wildcard in a policy also grants them.
_IAM_ONLY = {"dynamodb": {"ConditionCheckItem", "PartiQLSelect", "PartiQLInsert", "PartiQLUpdate", "PartiQLDelete"}}


@functools.cache
def translated() -> dict[str, Any]:
    """template.yaml after the SAM transform, as `sam validate` runs it: local code paths as S3 URIs, no managed
    policy lookups (the managed policies SAM attaches by ARN need none)."""
    from samtranslator.parser.parser import Parser
    from samtranslator.translator.translator import Translator

    sam = copy.deepcopy(template())
    for resource in sam["Resources"].values():
        props = resource.get("Properties") or {}
        for key in ("CodeUri", "ContentUri"):
            if isinstance(props.get(key), str):
                props[key] = f"s3://bucket/{props[key]}"
    translator = Translator(managed_policy_map={}, sam_parser=Parser(),
                            boto_session=boto3.session.Session(region_name="us-east-1"))
    return translator.translate(sam_template=sam, parameter_values={}, get_managed_policy_map=lambda: {})


def _logical(expr: Any) -> str:
    if isinstance(expr, dict) and "Ref" in expr:
        return str(expr["Ref"])
    if isinstance(expr, dict) and "Fn::GetAtt" in expr:
        target = expr["Fn::GetAtt"]
        return str(target[0] if isinstance(target, list) else target.split(".", 1)[0])
    raise AssertionError(f"cannot tell which resource {expr!r} names")


def resource_key(expr: Any) -> str:
    """A policy Resource as '<LogicalId>[/index/<name>]' or '*'."""
    if expr == "*":
        return "*"
    if isinstance(expr, dict) and ("Ref" in expr or "Fn::GetAtt" in expr):
        return _logical(expr)
    if isinstance(expr, dict) and "Fn::Sub" in expr:
        body = expr["Fn::Sub"]
        text, variables = (body, {}) if isinstance(body, str) else body
        if text.startswith("arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:"):
            return "schedule/" + text.split(":schedule/", 1)[1]  # schedule/${WakeScheduleGroup}/<name pattern>

        def name(match: re.Match[str]) -> str:
            var = match.group(1)
            if var in variables:
                return f"<{_logical(variables[var])}>"
            if var.endswith(".Arn"):
                return f"<{var[:-4]}>"
            if var.startswith("AWS::"):
                return var
            raise AssertionError(f"unknown variable {var!r} in {expr!r}")

        resolved = re.sub(r"\$\{([^}]+)\}", name, text)
        found = re.search(r"<(\w+)>(.*)$", resolved)
        assert found, f"cannot tell which resource {expr!r} names"
        return found.group(1) + found.group(2)
    raise AssertionError(f"cannot read the policy resource {expr!r}")


@functools.cache
def _operations(service: str) -> frozenset[str]:
    return frozenset(botocore.session.get_session().get_service_model(service).operation_names) | _IAM_ONLY.get(service, set())


def expand(action: str) -> set[str]:
    """'sqs:SendMessage*' -> {'sqs:SendMessage', 'sqs:SendMessageBatch'}; other services' actions as written."""
    service, _, pattern = action.partition(":")
    if service in ("dynamodb", "sns", "sqs") and any(c in pattern for c in "*?"):
        return {f"{service}:{op}" for op in _operations(service) if fnmatch.fnmatchcase(op, pattern)}
    return {action}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def grants(function: str) -> set[tuple[str, str]]:
    """(action, resource key) pairs the function's role allows, wildcards in actions expanded."""
    out = translated()["Resources"]
    role = out[f"{function}Role"]["Properties"]
    statements = [s for p in role.get("Policies", []) for s in p["PolicyDocument"]["Statement"]]
    for arn in role.get("ManagedPolicyArns", []):
        if isinstance(arn, dict) and arn.get("Fn::If", [None])[0] in RUNNER_CONDITIONS:
            continue  # off unless the deployer names a policy (test_runner_grants_are_off_by_default)
        assert arn in MANAGED_POLICIES, f"{function}: managed policy {arn} is not known to this test: add its document"
        statements += MANAGED_POLICIES[arn]
    found: set[tuple[str, str]] = set()
    for statement in statements:
        assert statement["Effect"] == "Allow" and "NotAction" not in statement and "NotResource" not in statement
        for action in _as_list(statement["Action"]):
            for resource in _as_list(statement["Resource"]):
                found |= {(a, resource_key(resource)) for a in expand(action)}
    return found


def allows(granted: set[tuple[str, str]], action: str, resource: str) -> bool:
    return any(a == action and fnmatch.fnmatchcase(resource, r) for a, r in granted)


def platform_calls(function: str) -> set[tuple[str, str]]:
    """What Lambda does with the function's role, read from the translated template."""
    out = translated()["Resources"]
    calls = {(a, f"log-group:/aws/lambda/{function}") for a in _LOGS}
    if (out[function]["Properties"].get("TracingConfig") or {}).get("Mode") == "Active":
        calls |= {("xray:PutTraceSegments", "*"), ("xray:PutTelemetryRecords", "*")}

    def on_failure(props: dict[str, Any]) -> set[tuple[str, str]]:
        destination = ((props.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
        if destination is None:
            return set()
        target = _logical(destination)
        action = {"AWS::SQS::Queue": "sqs:SendMessage", "AWS::SNS::Topic": "sns:Publish"}[out[target]["Type"]]
        return {(action, target)}

    for resource in out.values():
        props = resource.get("Properties") or {}
        if props.get("FunctionName") != {"Ref": function}:
            continue
        if resource["Type"] == "AWS::Lambda::EventSourceMapping":
            table = _logical(props["EventSourceArn"])
            calls |= {(a, f"{table}/stream/*") for a in _STREAM_READ} | on_failure(props)
        elif resource["Type"] == "AWS::Lambda::EventInvokeConfig":
            calls |= on_failure(props)
    return calls


# ---- what the code calls: a botocore hook on the clients the handlers build --------------------------------

_TRANSACT_ACTIONS = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem"}


class Recorder:
    """Records (IAM action, resource key) of every request made while ``recording`` is on."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = names  # physical name (table name, topic ARN, queue URL) -> logical id
        self.calls: set[tuple[str, str]] = set()
        self.operations: list[str] = []
        self._on = False
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def recording(self) -> Iterator[None]:
        self._on = True
        try:
            yield
        finally:
            self._on = False

    def __call__(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        if not self._on:
            return
        service = model.service_model.endpoint_prefix
        with self._lock:
            self.operations.append(f"{service}:{model.name}")
            self.calls |= set(self.iam_requests(service, model.name, params))

    def _name(self, physical: str) -> str:
        return self.names.get(physical, f"?{physical}")

    def iam_requests(self, service: str, operation: str, params: dict[str, Any]) -> Iterator[tuple[str, str]]:
        if service == "dynamodb":
            if operation == "TransactWriteItems":
                for item in params["TransactItems"]:
                    (kind, body), = item.items()
                    yield f"dynamodb:{_TRANSACT_ACTIONS[kind]}", self._name(body["TableName"])
            elif operation == "TransactGetItems":
                for item in params["TransactItems"]:
                    yield "dynamodb:GetItem", self._name(item["Get"]["TableName"])
            elif operation in ("BatchGetItem", "BatchWriteItem"):
                for table in params["RequestItems"]:
                    yield f"dynamodb:{operation}", self._name(table)
            elif "TableName" in params:
                resource = self._name(params["TableName"])
                if params.get("IndexName"):
                    resource += f"/index/{params['IndexName']}"
                yield f"dynamodb:{operation}", resource
            else:
                yield f"dynamodb:{operation}", "?unmapped"
        elif service == "sns" and "TopicArn" in params:
            yield f"sns:{operation}", self._name(params["TopicArn"])
        elif service == "sqs" and "QueueUrl" in params:
            yield f"sqs:{operation}", self._name(params["QueueUrl"])
        elif service == "scheduler" and "Name" in params:
            group = params.get("GroupName") or "default"
            group = "${WakeScheduleGroup}" if group == SCHEDULE_GROUP else group
            yield f"scheduler:{operation}", f"schedule/{group}/{params['Name']}"
            if "RoleArn" in (params.get("Target") or {}):
                yield "iam:PassRole", self._name(params["Target"]["RoleArn"])
        else:
            yield f"{service}:{operation}", "?unmapped"


@pytest.fixture
def world(dynamodb, topics, monkeypatch):
    """The template's data resources in moto, a recorder on the default boto3 session (the one the handlers'
    clients come from), and a way to run a function with its template environment."""
    create_agent_table(dynamodb)
    failed_url = boto3.client("sqs").create_queue(QueueName="failed-events")["QueueUrl"]
    boto3.client("scheduler").create_schedule_group(Name=SCHEDULE_GROUP)
    physical = {
        "QueueTable": TABLE,
        "AgentTable": AGENT_TABLE,
        "WakeScheduleGroup": SCHEDULE_GROUP,
        "WorkerWakeUpTopic": topics.wake_up_arn,
        "FailedEventsQueue": failed_url,
        "WakeScheduleRole": "arn:aws:iam::123456789012:role/teststack-WakeScheduleRole",
        "TriggerFunction": "arn:aws:lambda:us-east-1:123456789012:function:teststack-Trigger",
    }
    recorder = Recorder({v: k for k, v in physical.items()})
    session = boto3._get_default_session()
    session.events.register("before-parameter-build", recorder, unique_id="iam-least-privilege")
    try:
        yield World(physical, recorder, monkeypatch, dynamodb)
    finally:
        session.events.unregister("before-parameter-build", unique_id="iam-least-privilege")


class World:
    def __init__(self, physical: dict[str, str], recorder: Recorder, monkeypatch: pytest.MonkeyPatch, client: Any) -> None:
        self.physical = physical
        self.recorder = recorder
        self.monkeypatch = monkeypatch
        self.setup_client = client  # made before the recorder: setup requests are never recorded

    def environment(self, function: str) -> dict[str, str]:
        """The function's environment as Lambda gives it: Globals merged with its own variables."""
        tpl = template()
        variables = dict(tpl["Globals"]["Function"]["Environment"]["Variables"])
        variables.update(((tpl["Resources"][function]["Properties"].get("Environment") or {}).get("Variables")) or {})
        return {name: self._resolve(value) for name, value in variables.items()}

    def _resolve(self, value: Any) -> str:
        if isinstance(value, dict) and "Fn::If" in value:  # a value that depends on a parameter
            condition, if_true, if_false = value["Fn::If"]
            return self._resolve(if_true if self._holds(template()["Conditions"][condition]) else if_false)
        if isinstance(value, dict) and "Fn::GetAtt" in value and _logical(value) in self.physical:
            return self.physical[_logical(value)]  # an ARN: the role, the function
        if isinstance(value, dict) and "Fn::Sub" in value and isinstance(value["Fn::Sub"], str):
            assert set(re.findall(r"\$\{([^}]+)\}", value["Fn::Sub"])) <= {"AWS::StackName"}, value
            return value["Fn::Sub"].replace("${AWS::StackName}", STACK)
        if isinstance(value, dict) and "Ref" in value:
            ref = value["Ref"]
            if ref in self.physical:
                return self.physical[ref]
            parameter = template()["Parameters"].get(ref)
            assert parameter is not None and "Default" in parameter, f"cannot resolve {value!r} for the test"
            return str(parameter["Default"])
        assert not isinstance(value, (dict, list)), f"cannot resolve {value!r} for the test"
        return str(value).lower() if isinstance(value, bool) else str(value)

    def _holds(self, condition: Any) -> bool:
        """A template condition with the parameters' defaults (Fn::Not, Fn::Equals of Refs and literals)."""
        if "Fn::Not" in condition:
            return not self._holds(condition["Fn::Not"][0])
        left, right = condition["Fn::Equals"]
        return self._resolve(left) == self._resolve(right)

    def use_environment(self, function: str, **overrides: str) -> None:
        for name, value in (self.environment(function) | overrides).items():
            self.monkeypatch.setenv(name, value)

    def invoke(self, module: Any, event: dict[str, Any], *, remaining_ms: int = 60_000, request_id: str = "req-1",
               expect: type[BaseException] | None = None) -> Any:
        """The Lambda entry point, with the services the handler builds itself from the environment."""
        for cached in ("services", "runner"):
            if hasattr(getattr(module, cached, None), "cache_clear"):
                getattr(module, cached).cache_clear()
        context = LambdaContextStub(remaining_ms=remaining_ms, request_id=request_id)
        with self.recorder.recording():
            if expect is None:
                return module.lambda_handler(event, context)
            with pytest.raises(expect):
                module.lambda_handler(event, context)
            return None

    def settings(self, function: str) -> Settings:
        return Settings.from_env(self.environment(function) | {"RETRY_BASE_SECONDS": "0"})

    def store(self, function: str, clock: Any = None) -> TaskStore:
        return TaskStore(self.setup_client, self.settings(function), clock)

    def agents(self, function: str, store: TaskStore) -> AgentStore:
        return AgentStore(self.setup_client, MatchSettings.from_env(self.environment(function)), store)


def now_ms() -> int:
    return int(time.time() * 1000)


def seed(store: TaskStore, clock: Any = None, **body: Any) -> Task:
    (task,) = new_tasks(parse_create_request(body, store.settings), (clock.now_ms() if clock else now_ms()), store.settings)
    store.put_tasks([task])
    return task


def taken_with_expired_lease(store: TaskStore, past: FakeClock, **body: Any) -> Task:
    """A task a crashed worker claimed an hour ago: its lease has long passed."""
    seeded = seed(store, past, ttlSeconds=7200, **body)
    candidates = store.candidates(seeded.queue, 1000, past.now_ms(), shed=False)
    task = store.claim(next(c for c in candidates if c.task_id == seeded.task_id), "crashed-worker", past.now_ms())
    assert task is not None
    return task


# ---- the paths each function runs in production -------------------------------------------------------------

def scripted_runner(task: Task) -> dict[str, Any]:
    """ProcessTasks' TASK_RUNNER in this test: the payload says what the legacy system does."""
    action = task.payload.get("do", "ok")
    if action == "permanent":
        raise PermanentTaskError("the legacy system refuses this task")
    if action == "retry":
        raise RuntimeError("the legacy system timed out")
    if action == "heartbeat":
        extend_lease(600)  # a runner that knows it needs longer (the heartbeat's own renewal is the same request)
    return {"done": task.task_id}


def run_create_tasks(world: World) -> None:
    app = load_function("create_tasks")
    world.use_environment("CreateTasksFunction")
    # The schedule (asynchronous; Lambda retries it with the same request id), and its retry.
    assert world.invoke(app, load_event("create_tasks-schedule.json"), request_id="sched-1")["created"] == 15
    assert world.invoke(app, load_event("create_tasks-schedule.json"), request_id="sched-1")["created"] == 0
    assert world.invoke(app, load_event("create_tasks-scheduled-event.json"), request_id="sched-2")["created"] >= 1
    # A caller's system with its own ids (idempotent), twice.
    assert world.invoke(app, load_event("create_tasks-urgent.json"), request_id="direct-1")["created"] == 1
    assert world.invoke(app, load_event("create_tasks-urgent.json"), request_id="direct-2")["alreadyExisted"] == 1
    # A call and a delayed task (its announcement of the queue's delayed head): the table's stream starts the workers.
    assert world.invoke(app, load_event("create_tasks-call.json"), request_id="call-1")["wakeup"] == "stream"
    assert world.invoke(app, {"queue": "work", "delaySeconds": 60}, request_id="delayed-1")["wakeup"] == "stream"
    # Refused input.
    world.invoke(app, {"queue": "nope"}, expect=InvalidTaskInput)


def run_trigger(world: World) -> None:
    app = load_function("trigger")
    world.use_environment("TriggerFunction")
    store = world.store("TriggerFunction")
    past = FakeClock(now_ms() - 3_600_000)
    # Safety net, a queue with only a delayed task: its scheduled wake-up is looked at (GetSchedule) and set (none
    # there); then an earlier head moves it (UpdateSchedule).
    seed(store, queue="work", delaySeconds=900)
    assert world.invoke(app, load_event("trigger-safety-net.json"))["woken"] == []
    seed(store, queue="work", delaySeconds=600)
    assert world.invoke(app, load_event("trigger-safety-net.json"))["woken"] == []
    # The schedule fires: Trigger wakes the queue.
    assert world.invoke(app, load_event("trigger-delayed-head.json")) == {"woken": ["work"]}
    # Safety net: an expired lease to recover (and one out of attempts), claimable work, an expired entry to shed, a
    # paused queue left asleep (its pause read).
    taken_with_expired_lease(store, past, queue="work")
    taken_with_expired_lease(store, past, queue="calls", maxAttempts=1)
    seed(store, queue="work")
    seed(store, past, queue="calls", ttlSeconds=60)
    seed(store, queue="calls")
    assert sorted(world.invoke(app, load_event("trigger-safety-net.json"))["woken"]) == ["calls", "work"]
    # Error path: SNS refuses the wake-up (the topic is gone): the invocation fails, and Lambda retries it.
    boto3.client("sns").delete_topic(TopicArn=world.physical["WorkerWakeUpTopic"])
    world.invoke(app, load_event("trigger-delayed-head.json"), expect=TaskQueueError)
    world.invoke(app, {"unexpected": True}, expect=InvalidEvent)


def stream_records(store: TaskStore, *task_ids: str) -> dict[str, Any]:
    """The INSERTs Lambda would deliver for these tasks (their items as written), from the TaskStream sample."""
    template_record = load_event("process_tasks-stream-insert.json")["Records"][0]
    records = []
    for n, task_id in enumerate(task_ids):
        item = store._db.get_item(TableName=TABLE, Key={"taskId": {"S": task_id}})["Item"]
        record = json.loads(json.dumps(template_record))
        record["dynamodb"].update({"Keys": {"taskId": item["taskId"]}, "NewImage": item, "SequenceNumber": str(500 + n),
                                   "ApproximateCreationDateTime": now_ms() // 1000})
        records.append(record)
    return {"Records": records}


def run_process_tasks(world: World) -> None:
    app = load_function("process_tasks")
    # The running limit's slots (RunnerCapacity) whatever starts the worker.
    world.use_environment(
        "ProcessTasksFunction",
        TASK_RUNNER=f"{__name__}:scripted_runner",
        RETRY_BASE_SECONDS="0",
        RETRY_MAX_SECONDS="0",
        DEFAULT_RUN_SECONDS="5",  # tasks this short fit in the 20 s the invocation below has
    )
    store = world.store("ProcessTasksFunction")
    past = FakeClock(now_ms() - 3_600_000)
    taken_with_expired_lease(store, past, payload={"do": "ok"})  # lease recovery: back to PENDING, then run
    taken_with_expired_lease(store, past, maxAttempts=1)  # lease recovery: attempts used up -> FAILURE
    seed(store, past, ttlSeconds=60)  # expired while waiting: shed
    for action in ("ok", "permanent", "heartbeat"):
        seed(store, payload={"do": action})
    seed(store, payload={"do": "retry"}, maxAttempts=2)  # released for a retry, then dead-lettered
    seed(store, delaySeconds=30)  # due after the claims end: a scheduled wake-up at its head (CreateSchedule)
    # 20 s left: claims for up to 10 s; the delayed task falls due after that, so the run ends scheduling a wake-up.
    report = world.invoke(app, load_event("process_tasks-sns-wake.json"), remaining_ms=20_000)
    assert report["recovered"] == 2 and report["shed"] == 1 and report["work_remains"] is False, report
    assert (report["succeeded"], report["released"]) == (3, 1), report  # "heartbeat" extended its lease and succeeded
    assert report["failed"] == 3, report  # the permanent error, the exhausted retry, the lease out of attempts
    seed(store, delaySeconds=20)  # an earlier head: the schedule moves (UpdateSchedule)
    assert world.invoke(app, load_event("process_tasks-sns-wake.json"), remaining_ms=20_000)["claimed"] == 0
    # Out of time with a claimable task left: a tail call.
    left = seed(store, payload={"do": "ok"})
    assert world.invoke(app, load_event("process_tasks-sns-wake.json"), remaining_ms=1)["work_remains"] is True
    # The table's stream: a batch naming new tasks (claimed by key), then the same batch replayed later (read first),
    # and a TTL deletion of a waiting task (counted as shed).
    fresh = [seed(store, payload={"do": "ok"}) for _ in range(2)]
    batch = stream_records(store, left.task_id, *(t.task_id for t in fresh))
    assert world.invoke(app, batch, remaining_ms=20_000)["succeeded"] == 3
    for record in batch["Records"]:
        record["dynamodb"]["ApproximateCreationDateTime"] -= 600
    assert world.invoke(app, batch, remaining_ms=20_000)["claimed"] == 0
    world.invoke(app, load_event("process_tasks-stream-ttl-remove.json"))
    world.invoke(app, {"queue": "nope"}, expect=InvalidTaskInput)


def run_matcher(world: World) -> None:
    app = load_function("matcher")
    world.use_environment("MatcherFunction", RETRY_BASE_SECONDS="0")
    store = world.store("MatcherFunction")
    agents = world.agents("MatcherFunction", store)
    past = FakeClock(now_ms() - 3_600_000)
    attributes = agents.settings.attributes
    for agent_id, language in (("a-en", "en"), ("a-fr", "fr")):
        agents.put_available(parse_profile({"agentId": agent_id, "attributes": {"language": [language], "gender": ["f"]}}, attributes))
    seed(store, queue="calls", payload={"preferences": {"language": "en"}})  # matched
    seed(store, queue="calls", payload={"preferences": {"language": "de"}})  # no agent: keeps waiting, untouched
    seed(store, queue="calls", payload={"preferences": {"planet": "mars"}})  # can never match: dead-lettered
    seed(store, past, queue="calls", ttlSeconds=60)  # the caller hung up: shed
    taken_with_expired_lease(store, past, queue="calls", payload={"preferences": {"language": "fr"}})  # recovered
    report = world.invoke(app, load_event("matcher-sns-wake.json"))
    assert (report["matched"], report["invalid"], report["shed"]) == (2, 1, 1), report
    # Out of time with calls still waiting: a tail call.
    assert world.invoke(app, load_event("matcher-sns-wake.json"), remaining_ms=1)["work_remains"] is True
    # Started by the tables' streams: an agent who became available, a new call; a batch of sheds only.
    assert "stopped_by" in world.invoke(app, load_event("matcher-stream-agent-entry.json"))
    assert "stopped_by" in world.invoke(app, load_event("matcher-stream-call.json"))
    shed = load_event("process_tasks-stream-ttl-remove.json")
    shed["Records"][0]["dynamodb"]["OldImage"]["queue"]["S"] = "calls"
    assert world.invoke(app, shed) == {"stoppedBy": "nothing-to-run"}
    world.invoke(app, {"action": "agentAvailable"}, expect=InvalidEvent)


def run_agent_events(world: World) -> None:
    app = load_function("agent_events")
    world.use_environment("AgentEventsFunction")
    store = world.store("AgentEventsFunction")
    # The agent queues (the agent table's stream starts the Matcher: nothing here wakes it).
    available = load_event("agent_events-agent-available.json")
    assert world.invoke(app, available)["outcome"] == "queued"
    assert world.invoke(app, available)["outcome"] == "already-queued"
    changed = json.loads(json.dumps(available))
    changed["agent"]["attributes"]["language"] = ["de"]
    assert world.invoke(app, changed)["outcome"] == "requeued"
    assert world.invoke(app, load_event("agent_events-queue-depth.json"))["depth"] == 0
    # An agent on a call (a match made it busy) ends its call; another goes offline; an unknown one is refused.
    agents = world.agents("AgentEventsFunction", store)
    busy = parse_profile({"agentId": "busy-1", "attributes": {"language": ["en"], "gender": ["m"]}}, agents.settings.attributes)
    agents.put_available(busy)
    call = seed(store, queue="calls")
    waiting = store.candidates("calls", 1)[0]
    head = next(h for key in agents.get("busy-1").entries if (h := agents.head(key)) and h.agent_id == "busy-1")
    assert call.task_id == waiting.task_id
    assert agents.match_pairs([Pair(waiting, head, call.created_ms)]).committed
    assert world.invoke(app, {"action": "callEnded", "agentId": "busy-1", "callId": call.task_id})["outcome"] == "queued"
    assert world.invoke(app, load_event("agent_events-agent-offline.json"))["outcome"] == "offline"
    assert world.invoke(app, load_event("agent_events-call-ended.json"))["outcome"] == "already-offline"
    world.invoke(app, {"action": "agentOffline", "agentId": "nobody"}, expect=AgentNotFound)
    world.invoke(app, {"action": "dance"}, expect=InvalidAgentInput)
    # Presence: a heartbeat of a queued agent; of an agent gone offline.
    assert world.invoke(app, {"action": "agentHeartbeat", "agentId": "busy-1"})["outcome"] == "seen"
    assert world.invoke(app, {"action": "agentHeartbeat", "agentId": "agent-0042"})["outcome"] == "already-offline"
    # A caller hangs up: the waiting call is cancelled (GetItem + UpdateItem on the queue table); a repeat says so.
    waiting = seed(store, queue="calls")
    hung_up = {"action": "callerHungUp", "callId": waiting.task_id}
    assert world.invoke(app, hung_up)["outcome"] == "hung-up"
    assert world.invoke(app, hung_up)["outcome"] == "already-hung-up"
    assert world.invoke(app, {"action": "callerHungUp", "callId": call.task_id}) == {
        "action": "callerHungUp", "callId": call.task_id, "outcome": "already-matched", "agentId": "busy-1"}


SCENARIOS = {
    "CreateTasksFunction": run_create_tasks,
    "TriggerFunction": run_trigger,
    "ProcessTasksFunction": run_process_tasks,
    "MatcherFunction": run_matcher,
    "AgentEventsFunction": run_agent_events,
}


def _show(pairs: set[tuple[str, str]]) -> str:
    return "\n  ".join(f"{a} on {r}" for a, r in sorted(pairs, key=lambda p: (p[1], p[0]))) or "-"


# ---- the tests -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("function", FUNCTIONS)
def test_role_grants_exactly_what_the_code_and_lambda_call(world, function):
    SCENARIOS[function](world)
    code_calls = world.recorder.calls
    assert code_calls, f"{function}: the scenario made no AWS request"
    needed = code_calls | platform_calls(function)
    granted = grants(function)
    denied = {(a, r) for a, r in needed if not allows(granted, a, r)}
    data = {name for name, r in translated()["Resources"].items() if r["Type"] in DATA_TYPES}
    unused = {
        (a, r) for a, r in granted
        if r != "*" and not any(a == na and fnmatch.fnmatchcase(nr, r) for na, nr in needed)
    }
    assert not denied and not unused, (
        f"{function}:\nAccessDenied on AWS (called, not granted):\n  {_show(denied)}\n"
        f"granted, never called by any path:\n  {_show(unused)}\n"
        f"(requests seen: {sorted(set(world.recorder.operations))})"
    )
    # Every grant names a resource of this template, or is one of the documented broader grants on "*".
    for action, resource in granted:
        assert resource in ("*", SCHEDULES) or resource.split("/", 1)[0] in data, (function, action, resource)


def test_the_wake_schedule_role_is_for_scheduler_alone_and_may_only_invoke_trigger():
    resources = translated()["Resources"]
    trust = resources["WakeScheduleRole"]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert [(t["Principal"], t["Action"]) for t in trust] == [({"Service": "scheduler.amazonaws.com"}, "sts:AssumeRole")]
    assert all(t["Condition"]["StringEquals"]["aws:SourceAccount"] == {"Ref": "AWS::AccountId"} for t in trust)
    attached = [r for r in resources.values() if r["Type"] == "AWS::IAM::Policy"
                and {"Ref": "WakeScheduleRole"} in r["Properties"]["Roles"]]
    statements = [st for policy in attached for st in policy["Properties"]["PolicyDocument"]["Statement"]]
    assert [(st["Action"], resource_key(st["Resource"])) for st in statements] == [("lambda:InvokeFunction", "TriggerFunction")]
    assert not resources["WakeScheduleRole"]["Properties"].get("Policies") and not resources["WakeScheduleRole"]["Properties"].get("ManagedPolicyArns")


@pytest.mark.parametrize("function", FUNCTIONS)
def test_grants_on_every_resource_are_only_the_documented_managed_policies(function):
    broad = {a for a, r in grants(function) if r == "*"}
    documented = set(BROADER_GRANTS["*"]) | set(BROADER_GRANTS.get(function, {}))
    assert broad == documented, f"{function}: undocumented grants on '*': {sorted(broad - documented)}; " \
                                f"documented but gone: {sorted(documented - broad)}"


def test_every_broader_grant_is_explained_in_the_operations_guide():
    from tests.support import ROOT

    security = (ROOT / "docs" / "operations.md").read_text().split("## Security", 1)
    assert len(security) == 2, "docs/operations.md has no Security section"
    text = security[1]
    for policy in ("AWSLambdaBasicExecutionRole", "AWSXrayWriteOnlyAccess", "AWSLambdaDynamoDBExecutionRole"):
        assert policy in text, policy
    for function in FUNCTIONS:
        assert function.removesuffix("Function") in text, function


def test_runner_grants_are_off_by_default_and_the_deployers_when_given():
    """ProcessTasks gets what a team's runner needs only when the deployer names it: its managed policies
    (RunnerManagedPolicyArns, up to three) and one statement (RunnerPolicyActions on RunnerPolicyResources)."""
    tpl = template()
    for name in ("RunnerManagedPolicyArns", "RunnerPolicyActions", "RunnerPolicyResources", "RunnerSubnetIds"):
        assert tpl["Parameters"][name]["Default"] == "", name
    out = translated()["Resources"]
    conditional = [a for a in out["ProcessTasksFunctionRole"]["Properties"]["ManagedPolicyArns"] if isinstance(a, dict)]
    assert [a["Fn::If"][0] for a in conditional] == list(RUNNER_CONDITIONS)
    assert [a["Fn::If"][1] for a in conditional] == [{"Fn::Select": [i, {"Ref": "RunnerManagedPolicyArns"}]} for i in range(3)]
    policy = out["RunnerPolicy"]
    assert policy["Condition"] == "HasRunnerPolicy"
    assert policy["Properties"]["Roles"] == [{"Ref": "ProcessTasksFunctionRole"}]
    assert policy["Properties"]["PolicyDocument"]["Statement"] == [
        {"Effect": "Allow", "Action": {"Ref": "RunnerPolicyActions"}, "Resource": {"Ref": "RunnerPolicyResources"}}]


# ---- the producers' managed policy (output ProducerPolicyArn) ----------------------------------------------------
# A team attaches it to its application's role so that taskqueue.client can enqueue. It must allow every request an
# enqueue makes (or the enqueue fails with AccessDenied) and nothing else; its
# conditions on the partition key (dynamodb:LeadingKeys) keep a producer's UpdateItem to the queues' control items
# and its writes of tasks off them.

class ItemRecorder(Recorder):
    """Also records each DynamoDB item request with the partition key it names: (action, resource, taskId)."""

    def __init__(self, names: dict[str, str]) -> None:
        super().__init__(names)
        self.items: set[tuple[str, str, str]] = set()

    def __call__(self, params: dict[str, Any], model: Any, **kwargs: Any) -> None:
        super().__call__(params, model, **kwargs)
        if not self._on or model.service_model.endpoint_prefix != "dynamodb":
            return
        name = model.name
        if name == "BatchWriteItem":
            for table, requests in params["RequestItems"].items():
                for request in requests:
                    (kind, body), = request.items()
                    item = body["Item"] if kind == "PutRequest" else body["Key"]
                    self.items.add((f"dynamodb:{name}", self._name(table), item["taskId"]["S"]))
        elif name in ("PutItem", "UpdateItem", "DeleteItem", "GetItem"):
            item = params["Item"] if name == "PutItem" else params["Key"]
            self.items.add((f"dynamodb:{name}", self._name(params["TableName"]), item["taskId"]["S"]))


def producer_statements() -> list[dict[str, Any]]:
    policy = translated()["Resources"]["ProducerPolicy"]
    assert policy["Type"] == "AWS::IAM::ManagedPolicy"
    return policy["Properties"]["PolicyDocument"]["Statement"]


def _condition_holds(condition: dict[str, Any] | None, leading_key: str | None) -> bool:
    """The only conditions the producer policy uses: ForAllValues:StringLike / StringNotLike on dynamodb:LeadingKeys."""
    for operator, tests in (condition or {}).items():
        (key, patterns), = tests.items()
        assert key == "dynamodb:LeadingKeys" and operator in ("ForAllValues:StringLike", "ForAllValues:StringNotLike")
        if leading_key is None:
            return False  # a call without an item: this test never makes one against a conditioned statement
        matched = any(fnmatch.fnmatchcase(leading_key, p) for p in _as_list(patterns))
        if matched != (operator == "ForAllValues:StringLike"):
            return False
    return True


def producer_allows(action: str, resource: str, leading_key: str | None = None) -> bool:
    for statement in producer_statements():
        assert statement["Effect"] == "Allow" and "NotAction" not in statement and "NotResource" not in statement
        actions = {a for pattern in _as_list(statement["Action"]) for a in expand(pattern)}
        resources = {resource_key(r) for r in _as_list(statement["Resource"])}
        if action in actions and resource in resources and _condition_holds(statement.get("Condition"), leading_key):
            return True
    return False


@pytest.fixture
def producer_world(dynamodb, topics):
    recorder = ItemRecorder({TABLE: "QueueTable", topics.wake_up_arn: "WorkerWakeUpTopic"})
    session = boto3._get_default_session()
    session.events.register("before-parameter-build", recorder, unique_id="iam-producer-policy")
    try:
        settings = make_settings(topics)
        clock = FakeClock(now_ms())
        # Clients of the default session, so the recorder sees their requests (as the client's own would be).
        services = Services(settings, TaskStore(boto3.client("dynamodb"), settings, clock), None, clock)
        yield recorder, services, clock
    finally:
        session.events.unregister("before-parameter-build", unique_id="iam-producer-policy")


def run_producer(services: Any, clock: FakeClock) -> list[str]:
    """Every path of the client's enqueue: generated ids, a caller's id (new, then again), a delayed task, a batch
    over 25, both queues."""
    client = TaskQueueClient(services)
    outcomes = [client.enqueue({"n": 1}).wakeup]  # BatchWriteItem
    outcomes.append(client.enqueue({"n": 2}, task_id="order-42").wakeup)  # PutItem
    outcomes.append(client.enqueue({"n": 2}, task_id="order-42").wakeup)  # already there: PutItem refused
    outcomes.append(client.enqueue(delay_seconds=30).wakeup)  # the delayed head's announcement on the control item
    outcomes.append(client.enqueue_many(count=30, queue="calls").wakeup)
    return [str(o) for o in outcomes]


def test_producer_policy_grants_exactly_what_the_clients_enqueue_calls(producer_world):
    recorder, services, clock = producer_world
    with recorder.recording():
        outcomes = run_producer(services, clock)
    assert outcomes == ["stream"] * 5, outcomes
    calls = set(recorder.calls)
    item_calls = recorder.items
    assert not any(a.startswith("sns:") for a, _ in calls)  # a producer publishes nothing
    denied = [c for c in item_calls if not producer_allows(*c)]
    denied += [(a, r) for a, r in calls if not a.startswith("dynamodb:") and not producer_allows(a, r)]
    assert not denied, f"the producer policy refuses what enqueue calls: {sorted(denied)}"
    assert {a for a, _ in calls if a.startswith("dynamodb:")} == {a for a, _, _ in item_calls}  # every call keyed
    # Nothing extra: every action on every resource the policy names is called by enqueue.
    granted = {(a, resource_key(r)) for s in producer_statements() for p in _as_list(s["Action"]) for a in expand(p)
               for r in _as_list(s["Resource"])}
    assert granted == calls, f"granted, never called:\n  {_show(granted - calls)}\ncalled:\n  {_show(calls - granted)}"


def test_producer_policy_keeps_producers_off_the_tasks_state_and_the_queues_control():
    # A producer may not move a task (UpdateItem on a task: marking it done, say) ...
    assert not producer_allows("dynamodb:UpdateItem", "QueueTable", "order-42")
    assert producer_allows("dynamodb:UpdateItem", "QueueTable", "queue#work")
    # ... nor overwrite or delete a queue's control item (its pause, its watcher) with a put or a batch write.
    assert not producer_allows("dynamodb:PutItem", "QueueTable", "queue#work")
    assert not producer_allows("dynamodb:BatchWriteItem", "QueueTable", "queue#work")
    assert producer_allows("dynamodb:PutItem", "QueueTable", "order-42")
    # No wake-up, not the indexes, no reads.
    assert not producer_allows("sns:Publish", "WorkerWakeUpTopic")
    assert not producer_allows("dynamodb:GetItem", "QueueTable", "order-42")
    assert not producer_allows("dynamodb:Query", "QueueTable/index/ReadyIndex")


def test_the_stack_outputs_the_producer_policy_arn_and_attaches_it_to_no_role_of_its_own():
    out = translated()
    assert out["Outputs"]["ProducerPolicyArn"]["Value"] == {"Ref": "ProducerPolicy"}
    props = out["Resources"]["ProducerPolicy"]["Properties"]
    assert not {"Roles", "Users", "Groups"} & set(props), "the team attaches it to its application's role"
