"""The local engine's template reader: short-form tags, intrinsic functions, parameters, Globals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from local.template.template import Resolver, Template, TemplateError, load_yaml

REPO = Path(__file__).resolve().parents[2]


def resolver() -> Resolver:
    return Resolver(
        refs={"Table": "tq-Table", "Topic": "arn:aws:sns:us-east-1:123456789012:tq-Topic", "Count": "15",
              "AWS::Region": "us-east-1", "AWS::NoValue": None},
        attrs={"Table.StreamArn": "arn:stream", "Topic.TopicName": "tq-Topic"},
        conditions={"IsProd": False},
    )


def test_short_tags_load_as_long_form():
    doc = load_yaml("a: !Ref X\nb: !GetAtt T.Arn\nc: !Sub '${X}'\nd: !Join [',', [a, !Ref Y]]\ne: !GetAtt [T, StreamArn]\n")
    assert doc == {"a": {"Ref": "X"}, "b": {"Fn::GetAtt": ["T", "Arn"]}, "c": {"Fn::Sub": "${X}"},
                   "d": {"Fn::Join": [",", ["a", {"Ref": "Y"}]]}, "e": {"Fn::GetAtt": ["T", "StreamArn"]}}


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ({"Ref": "Table"}, "tq-Table"),
        ({"Fn::GetAtt": ["Table", "StreamArn"]}, "arn:stream"),
        ({"Fn::GetAtt": "Topic.TopicName"}, "tq-Topic"),
        ({"Fn::Sub": '{"queue": "work", "count": ${Count}}'}, '{"queue": "work", "count": 15}'),
        ({"Fn::Sub": "${Topic.TopicName}-${AWS::Region}"}, "tq-Topic-us-east-1"),
        ({"Fn::Sub": "${!Literal}"}, "${Literal}"),
        ({"Fn::Sub": ["${A}-${Table}", {"A": {"Ref": "Count"}}]}, "15-tq-Table"),
        ({"Fn::Join": ["/", ["a", {"Ref": "Table"}]]}, "a/tq-Table"),
        ({"Fn::Select": [1, ["a", "b"]]}, "b"),
        ({"Fn::Split": [",", "a,b"]}, ["a", "b"]),
        ({"Fn::If": ["IsProd", "p", "d"]}, "d"),
        ({"Fn::Equals": [{"Ref": "Count"}, 15]}, True),
        ({"Fn::Not": [{"Fn::Equals": ["a", "a"]}]}, False),
        ({"Fn::ToJsonString": {"a": {"Ref": "Count"}}}, '{"a":"15"}'),
        ({"Nested": [{"Ref": "Table"}, {"k": {"Ref": "Count"}}]}, {"Nested": ["tq-Table", {"k": "15"}]}),
    ],
)
def test_intrinsics(expr, expected):
    assert resolver().resolve(expr) == expected


def test_no_value_removes_the_key():
    r = resolver()
    r.refs["AWS::NoValue"] = None
    assert r.resolve({"a": 1, "b": {"Ref": "AWS::NoValue"}}) == {"a": 1}


@pytest.mark.parametrize("expr", [{"Ref": "Nope"}, {"Fn::GetAtt": ["Table", "Nope"]}, {"Fn::Sub": "${Nope}"},
                                  {"Fn::If": ["NoSuchCondition", 1, 2]}, {"Fn::Cidr": ["10.0.0.0/16", 2, 8]}])
def test_unresolvable_references_name_what_is_missing(expr):
    with pytest.raises(TemplateError):
        resolver().resolve(expr)


def test_the_project_template_resolves_with_overrides_and_globals():
    t = Template(REPO / "template.yaml", {"TimeBudgetSeconds": 7, "CreateTasksCount": 4, "TaskRunner": "m:run"})
    for logical in t.of_type("AWS::DynamoDB::Table"):  # known only once the emulator made the table
        t.resolver.attrs[f"{logical}.StreamArn"] = f"arn:aws:dynamodb:us-east-1:123456789012:table/{logical}/stream/now"
    fns = t.functions()
    process = fns["ProcessTasksFunction"]
    assert process.environment["TIME_BUDGET_SECONDS"] == "7"  # a parameter through Globals
    assert process.environment["QUEUE_TABLE_NAME"] == t.resolver.refs["QueueTable"]  # Ref to a table: its name
    assert process.environment["WORKER_WAKE_UP_TOPIC_ARN"].startswith("arn:aws:sns:")  # Ref to a topic: its ARN
    assert process.environment["TASK_RUNNER"] == "m:run"  # function's own variables merged
    assert process.environment["POWERTOOLS_SERVICE_NAME"] == "taskqueue"
    # No reserved concurrency unless asked (a new account's small quota); the running limit still holds.
    assert process.reserved_concurrency is None and process.timeout == 180
    assert "CLAIM_LANES" not in process.environment and process.environment["RUNNING_LIMIT"] == ""
    reserving = Template(REPO / "template.yaml", {"ProcessTasksConcurrency": 2})
    for logical in reserving.of_type("AWS::DynamoDB::Table"):
        reserving.resolver.attrs[f"{logical}.StreamArn"] = f"arn:aws:dynamodb:us-east-1:123456789012:table/{logical}/stream/now"
    reserved = reserving.functions()["ProcessTasksFunction"]
    assert reserved.reserved_concurrency == 2 and reserved.events["TaskStream"]["Properties"].get("Enabled", True)
    # Wake-ups expire after 5 minutes and are dropped, not parked in FailedEventsQueue (no destination).
    for worker in (process, fns["MatcherFunction"]):
        assert (worker.max_retry_attempts, worker.max_event_age_seconds, worker.on_failure) == (1, 300, None)
    assert process.layer_dirs == [REPO / "layers" / "taskqueue", REPO / "runner"]  # Globals' layer first, as SAM does
    assert process.code_dir == REPO / "functions" / "process_tasks"
    schedule = fns["CreateTasksFunction"].events["Schedule"]["Properties"]
    assert schedule["State"] == "DISABLED"  # nothing is created unless asked
    assert json.loads(schedule["Input"]) == {"queue": "work", "count": 4, "priority": 0, "ttlSeconds": 3600, "payload": {}}
    stream = fns["ProcessTasksFunction"].events["TaskStream"]["Properties"]
    assert stream["Stream"].endswith("/QueueTable/stream/now")
    assert fns["TriggerFunction"].timeout == 30  # from Globals
    assert fns["ProcessTasksFunction"].events["Wake"]["Properties"]["FilterPolicy"] == {"queue": ["work"]}


def test_parameter_overrides_are_checked():
    with pytest.raises(TemplateError, match="not declared"):
        Template(REPO / "template.yaml", {"NoSuchParameter": 1})
    with pytest.raises(TemplateError, match="AllowedValues|not one of"):
        Template(REPO / "template.yaml", {"CreateTasksScheduleState": "MAYBE"})
    with pytest.raises(TemplateError, match="MinValue"):
        Template(REPO / "template.yaml", {"TimeBudgetSeconds": 0})


def test_globals_lists_are_added_and_maps_merged_like_sam(tmp_path):
    (tmp_path / "template.yaml").write_text(
        """Transform: AWS::Serverless-2016-10-31
Globals:
  Function:
    Runtime: python3.13
    Handler: app.lambda_handler
    Timeout: 30
    Layers: [!Ref CoreLayer]
    Environment:
      Variables: {A: "1", B: "1"}
Resources:
  CoreLayer:
    Type: AWS::Serverless::LayerVersion
    Properties: {ContentUri: core/}
    Metadata: {BuildMethod: python3.13}
  ExtraLayer:
    Type: AWS::Serverless::LayerVersion
    Properties: {ContentUri: extra/}
    Metadata: {BuildMethod: python3.13}
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: fn/
      Timeout: 90
      Layers: [!Ref ExtraLayer]
      Environment:
        Variables: {B: "2"}
"""
    )
    fn = Template(tmp_path / "template.yaml").functions()["Fn"]
    assert fn.layer_dirs == [tmp_path / "core", tmp_path / "extra"]
    assert fn.environment == {"A": "1", "B": "2"}
    assert fn.timeout == 90


LAYERED = """Transform: AWS::Serverless-2016-10-31
Globals:
  Function:
    Runtime: python3.13
    Handler: app.lambda_handler
Resources:
  RunnerLayer:
    Type: AWS::Serverless::LayerVersion
    Properties: {ContentUri: mylayer/}
    %s
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: fn/
      Layers: [!Ref RunnerLayer]
"""


def test_a_layer_whose_code_lambda_would_not_import_is_refused(tmp_path):
    """Lambda puts only a layer's python/ (and python/lib/python3.x/site-packages) on the import path: a module at
    the root of a layer built as it is (no BuildMethod) would import here and not there."""
    (tmp_path / "mylayer").mkdir()
    (tmp_path / "mylayer" / "my_runner.py").write_text("def run(task):\n    return {}\n")
    (tmp_path / "template.yaml").write_text(LAYERED % "")
    with pytest.raises(TemplateError, match=r"layer RunnerLayer\w* \(ContentUri mylayer/\): Python code at the layer's "
                                            r"root \(my_runner.py\).*move it under python/.*BuildMethod: python3.13"):
        Template(tmp_path / "template.yaml").functions()


def test_a_layers_python_folder_or_a_python_build_is_where_lambda_looks(tmp_path):
    (tmp_path / "mylayer" / "python" / "lib" / "python3.13" / "site-packages").mkdir(parents=True)
    (tmp_path / "mylayer" / "python" / "my_runner.py").write_text("def run(task):\n    return {}\n")
    (tmp_path / "template.yaml").write_text(LAYERED % "")
    as_is = Template(tmp_path / "template.yaml").functions()["Fn"].layer_dirs
    assert as_is == [tmp_path / "mylayer" / "python", tmp_path / "mylayer" / "python" / "lib" / "python3.13" / "site-packages"]
    # With BuildMethod python3.13, sam build lays the folder's content (and its requirements) out under python/.
    (tmp_path / "mylayer" / "my_runner.py").write_text("def run(task):\n    return {}\n")
    (tmp_path / "template.yaml").write_text(LAYERED % "Metadata: {BuildMethod: python3.13}")
    assert Template(tmp_path / "template.yaml").functions()["Fn"].layer_dirs == [tmp_path / "mylayer"]
