"""Trigger fuzzed through its two sources: scheduled events (the safety net) and a queue's scheduled wake-up at its
delayed head, plus whole events of garbage. Exactly an EventBridge Scheduled Event runs the safety net; exactly a
``{"wakeQueue": <queue>, "reason": "delayed-head"}`` wakes that queue; anything else is refused before any write."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskqueue.core import schema
from taskqueue.core.model import new_tasks, parse_create_request
from tests.conftest import TABLE
from tests.fuzz.strategies import garbage_events, json_values, mutated
from tests.fuzz.support import RequestSpy, fuzz, fuzz_services, invoke, scan
from tests.support import LambdaContextStub, load_event, load_function

app = load_function("trigger")
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


# ---- the safety net's schedule -------------------------------------------------------------------------------

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
    sns.published.clear()
    sns.down = ()
    spy.clear()
    result, error = run(event)
    scheduled = isinstance(event, dict) and "Records" not in event and schema.is_eventbridge_event(event)
    if scheduled and SCHEDULED_EVENT.is_valid(event):
        assert error is None, f"a Scheduled Event was refused: {error}"
        assert result == {"woken": ["work"]} and sns.published == ["work"]
    elif not (isinstance(event, dict) and event.get("wakeQueue") in ("work", "calls") and event.get("reason") == "delayed-head"):
        assert error is not None, f"not a Scheduled Event, yet taken: {event!r:.300}"
    if error is not None:
        assert spy.writes() == [] and scan(dynamodb, TABLE) == claimable and sns.published == []


delayed_head_cases = st.one_of(
    st.fixed_dictionaries({"wakeQueue": st.sampled_from(["work", "calls"]), "reason": st.just("delayed-head")}),
    st.fixed_dictionaries({"wakeQueue": st.sampled_from(["work", "calls", "nope", "", 5, None]),
                           "reason": st.sampled_from(["delayed-head", "tail-call", None])}),
    mutated({"wakeQueue": "work", "reason": "delayed-head"}, 2),
)


@fuzz
@given(event=delayed_head_cases)
def test_exactly_a_delayed_head_wake_up_of_a_configured_queue_wakes_it(world, fuzz_dynamodb, event):
    svc, sns, spy = world
    sns.published.clear()
    sns.down = ()
    spy.clear()
    result, error = run(event)
    if isinstance(event, dict) and event.get("wakeQueue") in ("work", "calls") and event.get("reason") == "delayed-head" \
            and set(event) == {"wakeQueue", "reason"}:
        assert error is None and result == {"woken": [event["wakeQueue"]]} and sns.published == [event["wakeQueue"]]
    elif error is not None:
        assert sns.published == [] and spy.writes() == []
