"""Pure rules of the worker's start: what a stream batch names (taskqueue.work.stream_batch), backoff, claimability."""

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from taskqueue.core.stream import TTL_PRINCIPAL
from taskqueue.store import is_claimable
from taskqueue.work.outcomes import backoff_ms
from taskqueue.work.stream_batch import is_stream_batch, read_batch

SERVED = ("work",)


def task_image(status: str = "PENDING", queue: str = "work", partition: str = "work#0", **more: Any) -> dict[str, Any]:
    image = {"taskId": {"S": more.pop("task_id", "t1")}, "queue": {"S": queue}, "taskStatus": {"S": status},
             "readyKey": {"S": partition}, "readySort": {"S": "000#000001795349100000#t1"}, "ttl": {"N": "1900000000"}}
    return image | more


def record(name: str, new: dict | None = None, old: dict | None = None, *, created: float = 1_795_349_100,
           identity: dict | None = None) -> dict[str, Any]:
    key = (new or old or {}).get("taskId", {"S": "t1"})
    ddb: dict[str, Any] = {"Keys": {"taskId": key}, "SequenceNumber": "1", "ApproximateCreationDateTime": created}
    if new is not None:
        ddb["NewImage"] = new
    if old is not None:
        ddb["OldImage"] = old
    return {"eventName": name, "eventSource": "aws:dynamodb", "dynamodb": ddb} | ({"userIdentity": identity} if identity else {})


def test_a_new_ready_task_is_named_and_its_queue_runs():
    batch = read_batch([record("INSERT", task_image())], SERVED)
    assert batch.runs == ["work"] and [c.task_id for c in batch.named["work"]] == ["t1"]
    assert not batch.named["work"][0].delayed and batch.oldest_s == 1_795_349_100


def test_a_task_made_pending_again_is_named_but_a_pending_task_changed_is_not():
    released = read_batch([record("MODIFY", task_image(), task_image("TAKEN"))], SERVED)
    assert [c.task_id for c in released.named["work"]] == ["t1"]
    touched = read_batch([record("MODIFY", task_image(), task_image())], SERVED)
    assert touched.runs == [] and touched.named == {}


def test_a_delayed_task_makes_its_queue_run_without_naming_it():
    batch = read_batch([record("INSERT", task_image(partition="work#0#delayed", notBefore={"N": "1795349200000"}))], SERVED)
    assert batch.runs == ["work"] and batch.named == {}


def test_a_resume_mark_runs_its_queue_and_other_control_items_do_not():
    mark = {"taskId": {"S": "queue#work#resume#1795349100000"}, "resumedAt": {"N": "1795349100000"}}
    assert read_batch([record("INSERT", mark)], SERVED).runs == ["work"]
    slot = {"taskId": {"S": "queue#work#slot#0"}, "tokenOwner": {"S": "w"}}
    assert read_batch([record("INSERT", slot), record("MODIFY", slot, slot)], SERVED).runs == []


def test_a_ttl_delete_of_a_pending_task_is_counted_as_shed_and_runs_nothing():
    ttl = {"type": "Service", "principalId": TTL_PRINCIPAL}
    batch = read_batch([record("REMOVE", old=task_image(), identity=ttl),
                        record("REMOVE", old=task_image("SUCCESS"), identity=ttl),
                        record("REMOVE", old=task_image(), identity={"type": "User", "principalId": "me"})], SERVED)
    assert batch.shed == {"work": 1} and batch.runs == []


def test_another_queues_records_are_left_out():
    batch = read_batch([record("INSERT", task_image(queue="calls"))], SERVED)
    assert batch.runs == [] and batch.named == {}


def test_a_record_that_is_no_task_is_skipped_and_said_why_not_raised():
    batch = read_batch([{"eventName": "INSERT", "dynamodb": {"NewImage": {}}}, "not a record",
                        record("INSERT", task_image(task_id="t2"))], SERVED)
    assert len(batch.malformed) == 2 and [c.task_id for c in batch.named["work"]] == ["t2"]


@pytest.mark.parametrize("field, value", [("taskId", {"S": None}), ("taskId", {"S": "t9"}), ("readySort", {"S": 7}),
                                          ("readyKey", {"S": None}), ("ttl", {"N": None})])
def test_a_task_image_with_a_field_of_the_wrong_type_or_another_key_is_skipped_not_named(field, value):
    bad = record("INSERT", task_image())  # keyed t1
    bad["dynamodb"]["NewImage"][field] = value
    batch = read_batch([bad, record("INSERT", task_image(task_id="t2"))], SERVED)
    assert len(batch.malformed) == 1 and field in batch.malformed[0]
    assert [c.task_id for c in batch.named["work"]] == ["t2"]


@given(st.lists(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                             lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                             max_leaves=12), max_size=5))
def test_no_batch_makes_reading_raise(records):
    batch = read_batch(records, SERVED)
    assert len(batch.malformed) <= len(records)


def test_a_batch_is_a_list_of_dynamodb_records():
    assert is_stream_batch({"Records": [record("INSERT", task_image())]})
    assert is_stream_batch({"Records": [7, record("INSERT", task_image())]})  # a bad record is read_batch's to skip
    assert not is_stream_batch({"Records": [{"EventSource": "aws:sns"}]}) and not is_stream_batch({"queue": "work"})


@given(st.integers(1, 30), st.floats(0, 10), st.floats(0, 600), st.integers(0, 2**32))
def test_backoff_stays_within_its_bounds(attempt, base, cap, seed):
    delay = backoff_ms(attempt, base, cap, random.Random(seed))
    assert 0 <= delay <= min(cap, base * 2 ** (attempt - 1)) * 1000 + 1


def test_backoff_grows_exponentially_on_average():
    rng = random.Random(1)
    means = [sum(backoff_ms(a, 1, 1000, rng) for _ in range(400)) / 400 for a in (1, 3, 5)]
    assert means[0] < means[1] < means[2]
    assert 300 < means[0] < 700 and 1600 < means[1] < 2400


def test_claimable_only_before_ttl_and_after_not_before():
    now = 1_000_000_000_000
    assert is_claimable(now // 1000 + 1, None, now)
    assert not is_claimable(now // 1000, None, now)
    assert not is_claimable(now // 1000 + 10, now + 1, now)
    assert is_claimable(now // 1000 + 10, now, now)
