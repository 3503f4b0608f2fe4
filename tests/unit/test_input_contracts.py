"""The published input contracts: the CreateTasks JSON Schema (valid, linked from the docs, in step with the model's
limits and with the event files) and WORKER_QUEUES (parsed and checked, set by the template on both workers,
in step with their SNS filter policies)."""

from __future__ import annotations

import dataclasses
import json
import re

import jsonschema
import pytest

from taskqueue.core import keys, model, schema
from taskqueue.core.errors import ConfigError, InvalidField, InvalidTaskInput
from taskqueue.core.settings import BOUNDS, Settings
from tests.support import ROOT, template

TPL = template()
PROPS = schema.REQUEST_SCHEMA["properties"]


def test_the_schema_file_is_a_valid_draft_7_json_schema_at_the_documented_path():
    assert (ROOT / schema.SCHEMA_PATH).resolve() == schema.SCHEMA_FILE.resolve()
    jsonschema.Draft7Validator.check_schema(schema.CREATE_TASKS_SCHEMA)


def test_the_configuration_and_the_operations_guide_link_the_schema():
    configuration = (ROOT / "docs" / "configuration.md").read_text()
    operations = (ROOT / "docs" / "operations.md").read_text()
    section = configuration.split("## CreateTasks input", 1)[1].split("\n## ", 1)[0]
    assert f"](../{schema.SCHEMA_PATH})" in section
    assert f"](../{schema.SCHEMA_PATH})" in operations


EXAMPLES = sorted(p.name for p in (ROOT / "events").glob("create_tasks-*.json"))
BAD_EXAMPLES = [name for name in EXAMPLES if "bad-input" in name]  # the documented example of a refused event


@pytest.mark.parametrize("name", [name for name in EXAMPLES if name not in BAD_EXAMPLES])
def test_every_create_tasks_event_file_fits_the_published_schema(name):
    # An independent validator (jsonschema), so the schema file itself is checked, not only fastjsonschema's reading.
    event = json.loads((ROOT / "events" / name).read_text())
    jsonschema.Draft7Validator(schema.CREATE_TASKS_SCHEMA).validate(event)
    schema.check_create_tasks_input(event)


@pytest.mark.parametrize("name", BAD_EXAMPLES)
def test_the_bad_input_example_is_refused_by_both_validators(name):
    event = json.loads((ROOT / "events" / name).read_text())
    assert list(jsonschema.Draft7Validator(schema.CREATE_TASKS_SCHEMA).iter_errors(event))
    with pytest.raises(InvalidTaskInput):
        schema.check_create_tasks_input(event)


@pytest.mark.parametrize("overrides", [{}, {"CreateTasksScheduleTtlSeconds": "86400",
                                           "CreateTasksSchedulePayload": '{"report": "daily", "to": ["ops"]}',
                                           "CreateTasksSchedulePriority": 999, "CreateTasksCount": 1000}])
def test_the_template_schedule_input_fits_the_published_schema(overrides):
    template_input = TPL["Resources"]["CreateTasksFunction"]["Properties"]["Events"]["Schedule"]["Properties"]["Input"]
    text, variables = template_input["Fn::Sub"]
    values = {name: str(overrides.get(name, spec.get("Default", ""))) for name, spec in TPL["Parameters"].items()}
    ttl_condition, ttl_given, ttl_default = variables["TtlSeconds"]["Fn::If"]
    assert ttl_condition == "HasScheduleTtl"
    values["TtlSeconds"] = values[ttl_given["Ref"]] or values[ttl_default["Ref"]]
    request = json.loads(re.sub(r"\$\{(\w+)\}", lambda m: values[m.group(1)], text))
    jsonschema.Draft7Validator(schema.CREATE_TASKS_SCHEMA).validate(request)
    schema.check_create_tasks_input(request)
    assert request["queue"] == "work" and request["ttlSeconds"] == int(overrides.get("CreateTasksScheduleTtlSeconds", 3600))


def test_the_schemas_limits_are_the_models():
    assert (PROPS["count"]["minimum"], PROPS["count"]["maximum"]) == (1, model.MAX_TASKS_PER_REQUEST)
    assert (PROPS["priority"]["minimum"], PROPS["priority"]["maximum"]) == (keys.MIN_PRIORITY, keys.MAX_PRIORITY)
    assert (PROPS["ttlSeconds"]["minimum"], PROPS["ttlSeconds"]["maximum"]) == BOUNDS["DEFAULT_TTL_SECONDS"]
    assert (PROPS["maxAttempts"]["minimum"], PROPS["maxAttempts"]["maximum"]) == BOUNDS["MAX_ATTEMPTS"]
    assert PROPS["taskIds"]["maxItems"] == model.MAX_TASKS_PER_REQUEST
    assert PROPS["taskIds"]["items"]["maxLength"] == model._TASK_ID_MAX
    assert str(model.MAX_PAYLOAD_BYTES) in PROPS["payload"]["description"]
    assert PROPS["queue"]["pattern"] == keys._QUEUE_NAME.pattern
    # One schema property per CreateRequest field (the JSON names are the fields' camelCase).
    camel = {re.sub(r"_(.)", lambda m: m.group(1).upper(), f.name) for f in dataclasses.fields(model.CreateRequest)}
    # but the trace context, given as its two headers' values (taskqueue.core.trace_context)
    camel = camel - {"trace"} | {"traceparent", "awsTraceHeader"}
    assert set(PROPS) == camel


def test_the_layer_ships_the_validation_engine_pinned_as_in_development():
    layer = (ROOT / "layers" / "taskqueue" / "requirements.txt").read_text()
    dev = (ROOT / "requirements-dev.txt").read_text()
    assert "aws-lambda-powertools[tracer,validation]==" in layer
    pin = re.search(r"^fastjsonschema==\S+$", dev, re.M)
    assert pin and pin.group(0) in layer.splitlines()


@pytest.mark.parametrize("event", [{"count": 3}, {}, {"detail-type": "Scheduled Event", "source": "aws.events", "detail": {}}])
def test_valid_inputs_pass(event):
    schema.check_create_tasks_input(event)


def test_a_schema_error_is_an_invalid_task_input_naming_the_field():
    with pytest.raises(InvalidField) as refused:
        schema.check_create_tasks_input({"taskIds": ["ok", "no#hash"]})
    assert isinstance(refused.value, InvalidTaskInput) and refused.value.field == "taskIds[1]"
    assert "a task id: 1-200 printable characters without '#'" in str(refused.value)


# ---- WORKER_QUEUES -------------------------------------------------------------------------------------------


def env(**values: str) -> dict[str, str]:
    return {"QUEUE_TABLE_NAME": "t", **values}


@pytest.mark.parametrize("raw,served", [("", ("work", "calls")), ("work", ("work",)), (" calls ", ("calls",)),
                                        ("work,calls", ("work", "calls"))])
def test_worker_queues_are_a_subset_of_queue_orders(raw, served):
    assert Settings.from_env(env(WORKER_QUEUES=raw)).served_queues == served


@pytest.mark.parametrize("raw,problem", [
    ("jobs", "'jobs' is not in QUEUE_ORDERS (calls, work)"),
    ("work,work", "a queue is named twice"),
    (",", "names no queue"),
    ("work,jobs,x", "'jobs', 'x' are not in QUEUE_ORDERS"),
])
def test_bad_worker_queues_fail_naming_the_variable(raw, problem):
    with pytest.raises(ConfigError, match=f"^WORKER_QUEUES={re.escape(repr(raw))} is not valid: .*{re.escape(problem)}"):
        Settings.from_env(env(WORKER_QUEUES=raw))


def test_worker_queues_follow_the_configured_queue_orders():
    settings = Settings.from_env(env(QUEUE_ORDERS="jobs=FIFO", WORKER_QUEUES="jobs"))
    assert settings.check_served("jobs") == keys.Order.FIFO
    with pytest.raises(ConfigError, match="'work' is not in QUEUE_ORDERS"):
        Settings.from_env(env(QUEUE_ORDERS="jobs=FIFO", WORKER_QUEUES="work"))


def test_a_queue_the_worker_does_not_serve_is_refused_naming_what_it_serves():
    settings = Settings.from_env(env(WORKER_QUEUES="work"))
    assert settings.check_served("work") == keys.Order.LIFO
    with pytest.raises(InvalidTaskInput, match=r"serves queue 'work' only \(WORKER_QUEUES\), not 'calls'"):
        settings.check_served("calls")
    with pytest.raises(InvalidTaskInput, match="'jobs' is not a configured queue either"):
        settings.check_served("jobs")


@pytest.mark.parametrize("function,queue", [("ProcessTasksFunction", "work"), ("MatcherFunction", "calls")])
def test_the_template_sets_worker_queues_as_the_wake_up_filter_policy(function, queue):
    props = TPL["Resources"][function]["Properties"]
    assert props["Environment"]["Variables"]["WORKER_QUEUES"] == queue
    assert props["Events"]["Wake"]["Properties"]["FilterPolicy"] == {"queue": [queue]}
    queue_orders = TPL["Globals"]["Function"]["Environment"]["Variables"]["QUEUE_ORDERS"]
    assert Settings.from_env(env(QUEUE_ORDERS=queue_orders, WORKER_QUEUES=queue)).served_queues == (queue,)


def test_the_configuration_documents_worker_queues():
    configuration = (ROOT / "docs" / "configuration.md").read_text().split("## CreateTasks input", 1)[0]
    assert "`WORKER_QUEUES`" in configuration
