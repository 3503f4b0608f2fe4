"""Every handler answers bad input with a clear error (an InvalidInput naming what was wrong: InvalidTaskInput, InvalidEvent or InvalidAgentInput by where it came from) and writes nothing
for it; in a stream batch the good records are still processed. Each case here was found by fuzzing (tests/fuzz/)
the handlers as they were: a raw TypeError/AttributeError, a default task created from a stray field, a wake-up
of the wrong queue served."""

from __future__ import annotations

import json
from typing import Any

import pytest

from taskqueue.core.errors import InvalidField, InvalidInput, InvalidTaskInput, TaskQueueError
from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.core.states import TaskStatus
from taskqueue.matching.rules import MatchSettings
from taskqueue.services import MatcherServices, Services
from taskqueue.store import TaskStore
from tests.agent_support import AGENT_TABLE, agent_table, create_calls  # noqa: F401 (fixture)
from tests.conftest import TABLE, make_settings
from tests.support import LambdaContextStub, load_event, load_function, metric_totals

create_tasks = load_function("create_tasks")
process_tasks = load_function("process_tasks")
matcher = load_function("matcher")
agent_events = load_function("agent_events")
trigger = load_function("trigger")

NOT_OBJECTS = [42, None, True, 1.5, "work", [], [{"queue": "work"}]]


def table_items(dynamodb: Any, table: str = TABLE) -> list[dict[str, Any]]:
    return sorted(dynamodb.scan(TableName=table, ConsistentRead=True)["Items"], key=json.dumps)


def run_trigger(event: Any, svc: Services) -> dict[str, Any]:
    original = trigger.services
    trigger.services = lambda: svc
    try:
        return trigger.lambda_handler(event, LambdaContextStub(function_name="Trigger"))
    finally:
        trigger.services = original


class Recording:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, task: Any) -> None:
        self.seen.append(task.task_id)


class NeverCalled:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, task: Any) -> None:
        self.calls += 1


# ---- CreateTasks ---------------------------------------------------------------------------------------------


def test_a_detail_type_key_in_a_direct_invoke_is_an_unknown_field_not_a_scheduled_event(services, dynamodb):
    # It used to make CreateTasks read "detail" (absent) and create one default task instead of the 50 asked for.
    with pytest.raises(InvalidField) as refused:
        create_tasks.handle({"queue": "work", "count": 50, "detail-type": "oops"}, services)
    assert refused.value.field == "detail-type"
    assert "unknown field(s) ['detail-type'] in a CreateTasks request" in str(refused.value)
    assert "Scheduled Event is accepted whole only" in str(refused.value)
    assert table_items(dynamodb) == []


@pytest.mark.parametrize("event", NOT_OBJECTS, ids=repr)
def test_create_tasks_refuses_an_input_that_is_not_a_json_object(services, dynamodb, event):
    with pytest.raises(InvalidTaskInput, match="a CreateTasks request must be a JSON object, got"):
        create_tasks.handle(event, services)
    assert table_items(dynamodb) == []


@pytest.mark.parametrize(
    "changes,field,message",
    [
        ({"detail": {"queue": "work", "count": 5}}, "detail", "detail must be {}"),
        ({"detail-type": "Object Created"}, "detail-type", 'detail-type must be "Scheduled Event"'),
        ({"source": "my.app"}, "source", 'source must be "aws.events"'),
        ({"resources": "arn"}, "resources", "resources must be an array"),
        ({"queue": "work"}, "queue", "unknown field(s) ['queue'] in an EventBridge Scheduled Event"),
    ],
)
def test_only_a_real_scheduled_event_is_taken_whole(services, dynamodb, changes, field, message):
    event = load_event("create_tasks-scheduled-event.json") | changes
    with pytest.raises(InvalidField) as refused:
        create_tasks.handle(event, services)
    assert refused.value.field == field and message in str(refused.value)
    assert table_items(dynamodb) == []


def test_a_scheduled_event_without_detail_is_missing_a_field(services, dynamodb):
    event = {k: v for k, v in load_event("create_tasks-scheduled-event.json").items() if k != "detail"}
    with pytest.raises(InvalidField, match=r"is missing field\(s\) \['detail'\]"):
        create_tasks.handle(event, services)
    assert table_items(dynamodb) == []


@pytest.mark.parametrize(
    "event,field,message",
    [
        ({"count": 5000}, "count", "count must be a whole number from 1 to 1000, got 5000"),
        ({"priority": "9"}, "priority", 'priority must be a whole number from 0 to 999, got "9"'),
        ({"count": True}, "count", "count must be a whole number from 1 to 1000, got true"),
        ({"ttlSeconds": 1.5}, "ttlSeconds", "ttlSeconds must be a whole number"),
        ({"payload": "text"}, "payload", "payload must be a JSON object"),
        ({"taskIds": ["a", 7]}, "taskIds[1]", "taskIds[1] must be a string"),
        ({"taskIds": []}, "taskIds", "taskIds must contain at least 1 items"),
        ({"queue": ""}, "queue", "queue must match pattern"),
        ({"maxAttempts": 0}, "maxAttempts", "maxAttempts must be a whole number from 1 to 100"),
        ({"taskIds": ["a\u2028b"]}, "taskIds[0]", "taskIds[0] must be 1-200 printable characters"),
        ({"delaySeconds": 10, "ttlSeconds": 10}, "delaySeconds", "must be less than ttlSeconds"),
        ({"taskIds": ["a"], "count": 2}, "count", "must equal the number of taskIds"),
    ],
)
def test_errors_name_the_field_and_what_is_allowed(services, dynamodb, event, field, message):
    with pytest.raises(InvalidField) as refused:
        create_tasks.handle(event, services)
    assert refused.value.field == field
    assert message in str(refused.value)
    assert table_items(dynamodb) == []


def test_a_whole_number_written_with_a_fraction_of_zero_is_a_whole_number(services, dynamodb):
    # JSON Schema's "integer" takes 2.0 (a JSON parser may give a float for it): so does the model.
    result = create_tasks.handle({"count": 2.0, "priority": 9.0}, services)
    assert result["created"] == 2
    assert {item["priority"]["N"] for item in table_items(dynamodb) if "taskStatus" in item} == {"9"}  # tasks only


# ---- ProcessTasks --------------------------------------------------------------------------------------------


@pytest.fixture
def work_worker(services, dynamodb, topics, clock) -> Services:
    """ProcessTasks as the template configures it: WORKER_QUEUES=work."""
    settings = make_settings(topics, worker_queues=("work",))
    return Services(settings, TaskStore(dynamodb, settings, clock), services.notifier, clock)


def test_process_tasks_refuses_a_wake_up_for_the_matchers_queue_before_any_claim(work_worker, dynamodb, clock, topics):
    # {"queue": "calls"} used to run the matching queue's calls through the fake legacy system (SUCCESS, no agent).
    call_ids = create_calls(work_worker.store, clock.now_ms(), {"language": "fr"}, n=2)
    before = table_items(dynamodb)
    runner = NeverCalled()
    with pytest.raises(InvalidTaskInput, match=r"this worker serves queue 'work' only \(WORKER_QUEUES\), not 'calls'"):
        process_tasks.handle({"queue": "calls"}, 120, "req-1", work_worker, runner)
    assert runner.calls == 0 and table_items(dynamodb) == before
    assert all(work_worker.store.get(i).status is TaskStatus.PENDING for i in call_ids)
    assert topics.tail_calls() == []


def test_process_tasks_still_serves_its_own_queue(work_worker, clock):
    (task,) = new_tasks(parse_create_request({}, work_worker.settings), clock.now_ms(), work_worker.settings)
    work_worker.store.put_tasks([task])
    report = process_tasks.handle(load_event("process_tasks-sns-wake.json"), 120, "req-1", work_worker, lambda t: None)
    assert (report.queue, report.succeeded) == ("work", 1)


def sns(**sns_fields: Any) -> dict[str, Any]:
    record = json.loads(json.dumps(load_event("process_tasks-sns-wake.json")["Records"][0]))
    record["Sns"].update(sns_fields)
    return {"Records": [record]}


GARBAGE_WAKE_UPS = [
    (42, "a wake-up must be a JSON object"),
    (None, "a wake-up must be a JSON object"),
    ([{"queue": "work"}], "a wake-up must be a JSON object"),
    ({"Records": 5}, "Records must be a non-empty list"),
    ({"Records": []}, "Records must be a non-empty list"),
    ({"Records": [5]}, r"Records\[0\] must be an SNS record"),
    ({"Records": [{}]}, r'Records\[0\] has no "Sns" object'),
    ({"Records": [{"EventSource": "aws:sns", "Sns": "work"}]}, r'Records\[0\] has no "Sns" object'),
    ({"Records": [{"eventSource": "aws:sqs", "body": "{}"}]}, r"Records\[0\] is not an SNS record"),
    (sns(MessageAttributes=3), "MessageAttributes must be an object"),
    (sns(MessageAttributes={"queue": "work"}), 'the "queue" message attribute must be'),
    (sns(MessageAttributes={"queue": {"Type": "String", "Value": 5}}), 'the "queue" message attribute must be'),
    (sns(MessageAttributes={}, Message=None), "SNS wake-up names no queue"),
    (sns(MessageAttributes={}, Message="[1]"), "SNS wake-up names no queue"),
    (sns(MessageAttributes={}, Message='{"queue": 5}'), "the message's queue must be a string"),
    ({"queue": 5}, "queue must be a string naming a queue, got 5"),
    ({"queue": ["work"]}, "queue must be a string naming a queue"),
    ({"queue": "wo rk"}, "queue name 'wo rk' is not valid"),
    ({"queue": "work", "count": 5}, r"unknown field\(s\) \['count'\] in a wake-up"),
]


@pytest.mark.parametrize("event,message", GARBAGE_WAKE_UPS, ids=lambda v: repr(v)[:40])
def test_process_tasks_answers_garbage_with_a_clear_error_before_any_claim(work_worker, dynamodb, clock, event, message):
    work_worker.store.put_tasks(new_tasks(parse_create_request({}, work_worker.settings), clock.now_ms(), work_worker.settings))
    before = table_items(dynamodb)
    runner = NeverCalled()
    with pytest.raises(InvalidInput, match=message):
        process_tasks.handle(event, 120, "req-1", work_worker, runner)
    assert runner.calls == 0 and table_items(dynamodb) == before


def test_settings_of_a_worker_with_a_queue_outside_queue_orders_fail_naming_the_variable(topics):
    from taskqueue.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^WORKER_QUEUES='jobs' is not valid: 'jobs' is not in QUEUE_ORDERS"):
        make_settings(topics, worker_queues=("jobs",))


# ---- Matcher and AgentEvents ---------------------------------------------------------------------------------


@pytest.fixture
def calls_worker(services, agent_table, dynamodb, topics, clock) -> MatcherServices:
    """The Matcher as the template configures it: WORKER_QUEUES=calls."""
    settings = make_settings(topics, worker_queues=("calls",))
    base = Services(settings, TaskStore(dynamodb, settings, clock), services.notifier, clock)
    return MatcherServices.of(base, MatchSettings(agent_table_name=AGENT_TABLE), agent_table)


def all_tables(dynamodb: Any) -> tuple[list[Any], list[Any]]:
    return table_items(dynamodb), table_items(dynamodb, AGENT_TABLE)


@pytest.mark.parametrize("event,message", [
    *GARBAGE_WAKE_UPS[:-1],
    ("action", "a wake-up must be a JSON object"),
    ({"queue": "work"}, r"this worker serves queue 'calls' only \(WORKER_QUEUES\), not 'work'"),
    ({"action": {"nested": [1, 2]}}, "go to the AgentEvents function"),
], ids=lambda v: repr(v)[:40])
def test_the_matcher_answers_garbage_with_a_clear_error_before_any_claim(calls_worker, dynamodb, clock, event, message):
    create_calls(calls_worker.base.store, clock.now_ms(), {"language": "fr"})
    before = all_tables(dynamodb)
    with pytest.raises(InvalidInput, match=message):
        matcher.handle(event, 120, "req-1", calls_worker)
    assert all_tables(dynamodb) == before


def test_a_matcher_whose_worker_queues_leave_out_its_queue_says_so(services, agent_table, topics, clock):
    settings = make_settings(topics, worker_queues=("work",))
    msvc = MatcherServices.of(Services(settings, services.store, services.notifier, clock),
                              MatchSettings(agent_table_name=AGENT_TABLE), agent_table)
    with pytest.raises(InvalidTaskInput, match=r"serves queue 'work' only \(WORKER_QUEUES\), not 'calls'"):
        matcher.handle(load_event("matcher-sns-wake.json"), 120, "req-1", msvc)


@pytest.mark.parametrize("event,message", [
    (42, r'AgentEvents takes agent events .*, got a JSON number'),
    (["agentAvailable"], r"got a JSON array"),
    ({"action": ["agentAvailable"]}, r"unknown action \['agentAvailable'\]"),
    ({"action": "agentAvailable", "agent": []}, "agent must be a JSON object"),
    ({"action": "agentAvailable", "agent": 0}, "agent must be a JSON object"),
    ({"action": "agentAvailable", "agent": "agent-1"}, "agent must be a JSON object"),
    ({"action": "agentAvailable"}, "agent must be a JSON object"),
    ({"action": "agentAvailable", "agent": {"agentId": "a", "language": ["fr"]}}, r"unknown agent field\(s\) \['language'\]"),
    ({"action": "agentOffline", "agentID": "a"}, r"unknown field\(s\) \['agentID'\] in a agentOffline event"),
    ({"action": "callEnded", "agentId": "a", "callID": "c"}, r"unknown field\(s\) \['callID'\]"),
    ({"action": "queueDepth", "preferences": []}, "preferences must be a JSON object"),
    ({"action": "queueDepth", "preferences": "fr"}, "preferences must be a JSON object"),
], ids=lambda v: repr(v)[:40])
def test_agent_events_answer_garbage_with_a_clear_error_and_write_nothing(calls_worker, dynamodb, event, message):
    agent_events.handle(load_event("agent_events-agent-available.json"), calls_worker)
    before = all_tables(dynamodb)
    with pytest.raises(InvalidInput, match=message):
        agent_events.handle(event, calls_worker)
    assert all_tables(dynamodb) == before


# ---- Trigger -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("event,message", [
    (42, r"Trigger takes a scheduled event \(the safety net's, or a queue's delayed-head wake-up\); got a int"),
    (None, "got a NoneType, not a JSON object"),
    ([], "not a JSON object"),
    ({"Records": [{"eventSource": "aws:dynamodb"}]}, r"got an event with keys \['Records'\]"),
    ({"wakeQueue": "work", "reason": "tail-call"}, "a wake-up with wakeQueue has reason 'delayed-head'"),
    ({"detail-type": "Scheduled Event", "source": "aws.events", "detail": {"queue": "work"}}, "detail must be {}"),
    ({"detail-type": "Scheduled Event", "source": "aws.events"}, r"missing field\(s\) \['detail'\]"),
    ({"detail-type": "Scheduled Event", "detail": {}}, r"got an event with keys \['detail', 'detail-type'\]"),
], ids=lambda v: repr(v)[:40])
def test_trigger_refuses_an_event_that_is_none_of_its_two_sources(services, dynamodb, topics, event, message):
    with pytest.raises(InvalidInput, match=message):
        run_trigger(event, services)
    assert table_items(dynamodb) == [] and topics.wakeups() == []


def sns_wake(queue: Any = "work", **sns_fields: Any) -> dict[str, Any]:
    record = json.loads(json.dumps(load_event("process_tasks-sns-wake.json")["Records"][0]))
    record["Sns"]["MessageAttributes"]["queue"]["Value"] = queue
    record["Sns"].update(sns_fields)
    return record


@pytest.mark.parametrize("bad,message", [
    (sns_wake(MessageAttributes={}, Message="not json"), "SNS wake-up names no queue"),
    (sns_wake(queue=["work"]), 'the "queue" message attribute must be'),
    (sns_wake(queue="nope"), "a worker's wake-up names one queue; this one names 2"),
    ({"EventSource": "aws:sns"}, r'Records\[1\] has no "Sns" object'),
    (7, r"Records\[1\] must be an SNS record"),
], ids=lambda v: repr(v)[:40])
def test_a_wake_up_is_checked_whole_before_anything_is_claimed(work_worker, dynamodb, clock, bad, message):
    work_worker.store.put_tasks(new_tasks(parse_create_request({}, work_worker.settings), clock.now_ms(), work_worker.settings))
    before, runner = table_items(dynamodb), NeverCalled()
    with pytest.raises(InvalidInput, match=message):
        process_tasks.handle({"Records": [sns_wake("work"), bad]}, 120, "req-1", work_worker, runner)
    assert runner.calls == 0 and table_items(dynamodb) == before


def stream_insert(item: dict[str, Any], sequence: str) -> dict[str, Any]:
    return {"eventID": f"event-{sequence}", "eventName": "INSERT", "eventSource": "aws:dynamodb",
            "dynamodb": {"Keys": {"taskId": item["taskId"]}, "NewImage": item, "SequenceNumber": sequence}}


@pytest.mark.parametrize("bad", [
    7,
    None,
    "INSERT",
    {"eventSource": "aws:dynamodb", "eventName": "INSERT"},
    {"eventSource": "aws:dynamodb", "eventName": "INSERT", "dynamodb": []},
    {"eventSource": "aws:dynamodb", "eventName": "INSERT", "dynamodb": {"Keys": {"taskId": 5}}},
    {"eventSource": "aws:dynamodb", "eventName": ["INSERT"], "dynamodb": {"NewImage": {"queue": "work"}}},
], ids=lambda v: repr(v)[:40])
def test_a_stream_record_that_is_no_stream_record_is_skipped_and_the_good_ones_claimed(work_worker, dynamodb, clock,
                                                                                      bad, capsys):
    tasks = new_tasks(parse_create_request({"count": 2}, work_worker.settings), clock.now_ms(), work_worker.settings)
    work_worker.store.put_tasks(tasks)
    items = [dynamodb.get_item(TableName=TABLE, Key={"taskId": {"S": t.task_id}})["Item"] for t in tasks]
    runner = Recording()
    report = process_tasks.handle({"Records": [stream_insert(items[0], "101"), bad, stream_insert(items[1], "102")]},
                                  120, "req-1", work_worker, runner)
    assert report.succeeded == 2 and sorted(runner.seen) == sorted(t.task_id for t in tasks)
    process_tasks.metrics.flush_metrics()
    assert metric_totals(capsys.readouterr().out).get("MalformedRecords", 0) >= 1


def test_handler_errors_are_task_queue_errors():
    assert issubclass(InvalidField, InvalidTaskInput) and issubclass(InvalidTaskInput, TaskQueueError)
