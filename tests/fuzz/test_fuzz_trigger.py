"""Trigger fuzzed through its three sources: stream batches (good, malformed and mutated records, SNS sometimes
down for a queue), SNS tail calls, and scheduled events — plus whole events of garbage.

Stream batches: the good records are processed (each queue woken once, sheds counted), the malformed ones are
counted as MalformedRecords and never failed, and only a retryable failure (SNS refusing a wake-up) and the
records after it appear in batchItemFailures. SNS: every record checked before any wake-up. Schedule: exactly an
EventBridge Scheduled Event runs the safety net. Trigger never writes the table for any of this here."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskqueue.core import schema
from taskqueue.core.model import new_tasks, parse_create_request
from tests.conftest import TABLE
from tests.fuzz.strategies import garbage_events, json_values, mutated, near
from tests.fuzz.support import RequestSpy, forget_wake_records, fuzz, fuzz_services, invoke, scan
from tests.support import LambdaContextStub, load_event, load_function, metric_totals

app = load_function("trigger")
QUEUES = ("work", "calls")
SCHEDULED_EVENT = jsonschema.Draft7Validator(schema.SCHEDULED_EVENT_SCHEMA)


@pytest.fixture
def world(fuzz_dynamodb, clock, sns, monkeypatch) -> Any:
    svc = fuzz_services(fuzz_dynamodb, clock, sns)
    monkeypatch.setattr(app, "services", lambda: svc)
    spy = RequestSpy(fuzz_dynamodb)
    yield svc, sns, spy
    spy.close()


def run(event: Any) -> tuple[Any, Any]:
    return invoke(lambda: app.lambda_handler(event, LambdaContextStub(function_name="Trigger")))


# ---- stream batches ------------------------------------------------------------------------------------------

INSERT = load_event("trigger-stream-insert.json")["Records"][0]
SHED = load_event("trigger-stream-ttl-remove.json")["Records"][0]
AGENT = load_event("trigger-stream-agent-entry.json")["Records"][0]
NOT_A_TASK = load_event("trigger-stream-malformed.json")["Records"][1]
STREAM_RECORDS = [INSERT, SHED, AGENT, NOT_A_TASK]


def with_image(record: dict[str, Any], **changes: Any) -> dict[str, Any]:
    record = copy.deepcopy(record)
    image = record["dynamodb"].get("NewImage") or record["dynamodb"]["OldImage"]
    image.update(changes)
    return record


def good_records() -> st.SearchStrategy[tuple[tuple[str, ...], Any]]:
    return st.one_of(
        st.sampled_from(QUEUES).map(lambda q: (("wake", q), with_image(INSERT, queue={"S": q}))),
        st.sampled_from(QUEUES).map(lambda q: (("shed", q), with_image(SHED, queue={"S": q}))),
        st.just((("wake", "calls"), copy.deepcopy(AGENT))),
        # Records Trigger has nothing to do for: a task inserted finished, a change that is no TTL deletion.
        st.just((("other",), with_image(INSERT, taskStatus={"S": "SUCCESS"}))),
        st.just((("other",), {**copy.deepcopy(SHED), "userIdentity": None})),
        st.just((("other",), {**copy.deepcopy(INSERT), "eventName": "MODIFY"})),
    )


def bad_records() -> st.SearchStrategy[tuple[tuple[str, ...], Any]]:
    """Records that can never be processed, whatever is retried."""
    bad = [
        copy.deepcopy(NOT_A_TASK),
        with_image(INSERT, taskStatus={"S": "NOPE"}),
        with_image(INSERT, queue={"S": "nope"}),
        with_image(INSERT, queue={"N": "5"}),
        with_image(INSERT, priority={"Q": "1"}),
        with_image(INSERT, ttl={"N": "not a number"}),
        with_image(SHED, taskStatus={"S": "PENDING "}),
        {**copy.deepcopy(INSERT), "eventName": "SPLIT"},
        {**copy.deepcopy(INSERT), "eventName": ["INSERT"]},
        {**copy.deepcopy(INSERT), "eventSource": "aws:sns"},
        {**copy.deepcopy(INSERT), "userIdentity": "dynamodb.amazonaws.com"},
        {**copy.deepcopy(INSERT), "dynamodb": {"SequenceNumber": "1"}},
        {**copy.deepcopy(AGENT), "dynamodb": {**AGENT["dynamodb"], "NewImage": {"entity": {"S": "entry"}}}},
        {k: v for k, v in INSERT.items() if k != "dynamodb"},
        {**copy.deepcopy(INSERT), "dynamodb": []},
    ]
    return st.one_of(st.sampled_from(bad).map(copy.deepcopy), st.sampled_from([5, None, "INSERT", [INSERT]])).map(
        lambda r: (("bad",), r))


def unknown_records() -> st.SearchStrategy[tuple[tuple[str, ...], Any]]:
    return st.one_of(
        st.sampled_from(STREAM_RECORDS).flatmap(lambda r: mutated(r, 2)),
        json_values,
    ).map(lambda r: (("unknown",), r))


def renumber(records: list[tuple[tuple[str, ...], Any]]) -> list[tuple[tuple[str, ...], Any]]:
    """Distinct sequence numbers and event ids, in batch order, for the records that have a sequence number."""
    out = []
    for index, (label, record) in enumerate(records):
        record = copy.deepcopy(record)
        if sequence_of(record) is not None:
            record["dynamodb"]["SequenceNumber"] = f"{500 + index:021d}"
            record["eventID"] = f"event-{index}"
        out.append((label, record))
    return out


def sequence_of(record: Any) -> str | None:
    ddb = record.get("dynamodb") if isinstance(record, dict) else None
    sequence = ddb.get("SequenceNumber") if isinstance(ddb, dict) else None
    return sequence if isinstance(sequence, str) and sequence else None


def expected_outcome(records: list[tuple[tuple[str, ...], Any]], down: tuple[str, ...]) -> dict[str, Any]:
    """What the documented rules say a labelled batch gives (docs/operations.md, 'malformed stream records')."""
    failures: list[str] = []
    woken: list[str] = []
    malformed = shed = 0
    failed = False
    for label, record in records:
        sequence = sequence_of(record)
        if sequence is None:  # cannot be named as failed: malformed, counted unless the batch already failed
            assert label == ("bad",)
            malformed += 0 if failed else 1
            continue
        if failed:
            failures.append(sequence)
        elif label == ("bad",):
            malformed += 1
        elif label[0] == "shed":
            shed += 1
        elif label[0] == "wake" and label[1] in down:
            failed = True
            failures.append(sequence)
        elif label[0] == "wake" and label[1] not in woken:
            woken.append(label[1])
    return {"failures": failures, "woken": woken, "malformed": malformed, "shed": shed}


labelled = st.one_of(good_records(), good_records(), bad_records())
stream_cases = st.one_of(
    # labelled batches, SNS sometimes down for a queue: the exact outcome is known
    st.tuples(st.just("labelled"), st.lists(labelled, min_size=1, max_size=8).map(renumber),
              st.sampled_from([(), (), ("work",), ("calls",)])),
    # with mutated records of the event files and garbage among them: SNS up, no failure allowed
    st.tuples(st.just("mixed"), st.lists(st.one_of(labelled, unknown_records()), min_size=1, max_size=8).map(renumber),
              st.just(())),
    # a whole stream event mutated
    st.tuples(st.just("event"), near("trigger-stream-insert.json", "trigger-stream-ttl-remove.json",
                                     "trigger-stream-agent-entry.json", "trigger-stream-malformed.json"), st.just(())),
)


@fuzz
@given(case=stream_cases)
def test_stream_batches_process_the_good_records_and_fail_only_what_a_retry_can_fix(world, capsys, case):
    svc, sns, spy = world
    kind, records, down = case
    event = records if kind == "event" else {"Records": [record for _, record in records]}
    forget_wake_records(svc.store._db)  # every example starts with no queue woken: each wake-up is published
    sns.published.clear()
    sns.down = down
    spy.clear()
    capsys.readouterr()
    result, error = run(event)
    # The stream path writes no task; only a queue's control item, to claim the wake-up it sends.
    assert spy.task_writes() == [], "the stream path never writes a task"
    assert set(sns.published) <= set(QUEUES) and len(sns.published) == len(set(sns.published)), sns.published
    if kind == "event":
        if error is None and isinstance(result, dict) and "batchItemFailures" in result:
            assert result["batchItemFailures"] == [], "nothing failed that a retry could fix"
        return
    if not any(isinstance(r, dict) and (r.get("eventSource") or r.get("EventSource")) == "aws:dynamodb"
               for r in event["Records"]):
        return  # no record says it comes from a stream: not recognisably a stream batch (refused, or read as SNS)
    assert error is None, f"a stream batch raised {error!r}"
    metrics = metric_totals(capsys.readouterr().out)
    if kind == "mixed":
        assert result == {"batchItemFailures": []}, "nothing failed that a retry could fix"
        good = {label[1] for label, _ in records if label[0] == "wake"}
        assert good <= set(sns.published)
        return
    expected = expected_outcome(records, down)
    assert result == {"batchItemFailures": [{"itemIdentifier": s} for s in expected["failures"]]}
    assert sns.published == expected["woken"]
    assert metrics.get("MalformedRecords", 0) == expected["malformed"]
    assert metrics.get("TasksShed", 0) == expected["shed"]
    assert metrics.get("Wakeups", 0) == len(expected["woken"])


# ---- SNS tail calls ------------------------------------------------------------------------------------------

TAIL_CALL = load_event("trigger-sns-tail-call.json")["Records"][0]


def tail_call(queue: str, by_message: bool = False) -> dict[str, Any]:
    record = copy.deepcopy(TAIL_CALL)
    record["Sns"]["MessageAttributes"]["queue"]["Value"] = queue
    if by_message:  # no attribute: the JSON body names the queue
        record["Sns"]["MessageAttributes"] = {}
        record["Sns"]["Message"] = json.dumps({"queue": queue, "reason": "tail-call"})
    return record


def with_sns(**changes: Any) -> dict[str, Any]:
    record = copy.deepcopy(TAIL_CALL)
    record["Sns"].update(changes)
    return record


good_tail_calls = st.builds(tail_call, st.sampled_from(QUEUES), st.booleans()).map(lambda r: ("good", r))
bad_tail_calls = st.sampled_from([
    {"EventSource": "aws:sns"},
    {**copy.deepcopy(TAIL_CALL), "Sns": "work"},
    with_sns(MessageAttributes={"queue": {"Type": "String", "Value": ["work"]}}),
    with_sns(MessageAttributes={"queue": {"Type": "Number", "Value": "5"}}),
    with_sns(MessageAttributes={"queue": "work"}),
    with_sns(MessageAttributes={}, Message="not json"),
    with_sns(MessageAttributes={}, Message=json.dumps({"queue": 5})),
    with_sns(MessageAttributes=[]),
    tail_call("nope"),
    tail_call("nope", by_message=True),
    tail_call(""),
    7,
    None,
]).map(lambda r: ("bad", copy.deepcopy(r)))
unknown_tail_calls = st.one_of(mutated(TAIL_CALL, 2), json_values).map(lambda r: ("unknown", r))
sns_cases = st.one_of(
    st.lists(st.one_of(good_tail_calls, good_tail_calls, bad_tail_calls, unknown_tail_calls), min_size=1, max_size=4)
    .map(lambda rs: ("records", rs)),
    st.one_of(near("trigger-sns-tail-call.json"), garbage_events).map(lambda e: ("event", e)),
)


@fuzz
@given(case=sns_cases)
def test_a_tail_call_wakes_every_queue_it_names_or_none_at_all(world, case):
    svc, sns, spy = world
    kind, content = case
    event = {"Records": [record for _, record in content]} if kind == "records" else content
    labels = {label for label, _ in content} if kind == "records" else {"unknown"}
    sns.published.clear()
    sns.down = ()
    spy.clear()
    result, error = run(event)
    assert spy.writes() == []
    if error is not None:
        assert labels != {"good"}, f"a good tail call was refused: {error}"
        if kind == "records":
            assert sns.published == [], f"refused ({error}) after waking {sns.published}"
        return
    if "Records" in event and "aws:dynamodb" in json.dumps(event["Records"]):
        return  # a record says it comes from a stream: read as a stream batch (the test above)
    assert "bad" not in labels, f"a bad tail call was taken: {event!r:.300}"
    if "Records" in event and result.keys() == {"woken"}:
        assert sns.published == result["woken"] and set(result["woken"]) <= set(QUEUES)
    if labels == {"good"}:
        queues = [json.loads(r["Sns"]["Message"])["queue"] if not r["Sns"]["MessageAttributes"]
                  else r["Sns"]["MessageAttributes"]["queue"]["Value"] for _, r in content]
        assert result == {"woken": list(dict.fromkeys(queues))}


# ---- the safety-net schedule ---------------------------------------------------------------------------------

SAFETY_NET = load_event("trigger-safety-net.json")


@st.composite
def scheduled_events(draw: st.DrawFn) -> dict[str, Any]:
    keep = draw(st.sets(st.sampled_from(["version", "id", "account", "time", "region", "resources"])))
    return {k: v for k, v in SAFETY_NET.items() if k in keep or k in ("detail-type", "source", "detail")}


schedule_cases = st.one_of(
    scheduled_events(),
    scheduled_events().flatmap(lambda e: mutated(e, 2)),
    st.dictionaries(st.sampled_from(["detail-type", "source", "detail", "id", "Records"]),
                    st.sampled_from(["Scheduled Event", "aws.events", {}, "x", None, []]) | json_values, max_size=4),
    garbage_events,
)


@pytest.fixture
def claimable(world, fuzz_dynamodb) -> list[dict[str, Any]]:
    """One task waiting on queue "work" (the safety net must wake it), none on "calls"."""
    svc = world[0]
    svc.store.put_tasks(new_tasks(parse_create_request({"taskIds": ["waiting"]}, svc.settings),
                                  svc.clock.now_ms(), svc.settings))
    return scan(fuzz_dynamodb, TABLE)


@fuzz
@given(event=schedule_cases)
def test_exactly_a_scheduled_event_runs_the_safety_net(world, claimable, fuzz_dynamodb, event):
    dynamodb = fuzz_dynamodb
    svc, sns, spy = world
    forget_wake_records(dynamodb)  # every example starts with no queue woken
    sns.published.clear()
    sns.down = ()
    spy.clear()
    result, error = run(event)
    scheduled = isinstance(event, dict) and "Records" not in event and schema.is_eventbridge_event(event)
    if scheduled and SCHEDULED_EVENT.is_valid(event):
        assert error is None, f"a Scheduled Event was refused: {error}"
        assert result == {"woken": ["work"]} and sns.published == ["work"]
    elif scheduled or not isinstance(event, dict) or "Records" not in event:
        assert error is not None, f"not a Scheduled Event, yet taken: {event!r:.300}"
    if error is not None:
        assert spy.writes() == [] and scan(dynamodb, TABLE) == claimable
        if not (isinstance(event, dict) and "Records" in event):
            assert sns.published == []
