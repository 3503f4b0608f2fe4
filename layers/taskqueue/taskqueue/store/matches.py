"""The queue table's side of a match (the Matcher, queue "calls"): what a pass reads of the waiting calls it may
match, and the write that takes a call from waiting straight to matched inside the match transaction.

A matched call is never held: the match transaction (``taskqueue.matching.agents.AgentStore.match_pairs``) moves it
PENDING -> SUCCESS together with its agent (queued -> busy) and the agent's queue entries, under conditions on
those items alone. So there is no claim write per call, no lease to recover after a crashed matcher, and a hang-up
or another matcher taking the call first simply fails the call's condition.

When several matchers run at once, one of them (the planner) publishes its plan in chunks (``MatchPlans``): every
matcher of the pass takes chunks with a conditional write and writes their pairs, so all of them write one plan
read once, instead of each reading the snapshot and planning on its own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from taskqueue.core.model import encode_json, stored_trace
from taskqueue.core.states import TaskStatus
from taskqueue.core.trace_context import AWS_TRACE_HEADER, TRACEPARENT, TraceContext
from taskqueue.store.control import CONTROL_PREFIX
from taskqueue.store.dynamo import ConditionLost
from taskqueue.store.table import _BATCH_GET_LIMIT, Candidate, QueueTable, _key


@dataclass(frozen=True)
class CallFacts:
    """What never changes about a call once it is created: its payload (the caller's preferences) and its
    creation time (epoch ms), from which the wait at match time is measured."""

    payload: Mapping[str, Any]
    created_ms: int


class MatchTransitions(QueueTable):
    def call_facts(self, task_ids: Sequence[str]) -> dict[str, CallFacts]:
        """Task id -> payload and creation time, 100 per BatchGetItem, eventually consistent (both are written once,
        before the call can be read from the index). Ids no longer in the table are left out; a payload that is
        not JSON comes back as {"invalid": <its first 100 characters>}, for the caller to refuse."""
        found: dict[str, CallFacts] = {}
        ids = list(dict.fromkeys(task_ids))
        for start in range(0, len(ids), _BATCH_GET_LIMIT):
            request = {self._table: {"Keys": [_key(t) for t in ids[start : start + _BATCH_GET_LIMIT]],
                                     "ProjectionExpression": "taskId, payload, taskCreated"}}
            for item in self._batch_get(request):
                text = item.get("payload", {}).get("S")
                try:
                    payload = json.loads(text) if text else {}
                except ValueError:
                    payload = {"invalid": text[:100] if text else None}
                created = int(item.get("taskCreated", {}).get("N", "0"))
                found[item["taskId"]["S"]] = CallFacts(payload, created)
        return found

    def call_traces(self, task_ids: Sequence[str]) -> dict[str, TraceContext]:
        """Task id -> the trace context its producer stored (calls without one are left out), 100 per BatchGetItem,
        eventually consistent (written once, at creation): what a match's span joins (taskqueue.observe.match_traces)."""
        found: dict[str, TraceContext] = {}
        ids = list(dict.fromkeys(task_ids))
        for start in range(0, len(ids), _BATCH_GET_LIMIT):
            request = {self._table: {"Keys": [_key(t) for t in ids[start : start + _BATCH_GET_LIMIT]],
                                     "ProjectionExpression": f"taskId, {TRACEPARENT}, {AWS_TRACE_HEADER}"}}
            for item in self._batch_get(request):
                trace = stored_trace(item.get(TRACEPARENT, {}).get("S"), item.get(AWS_TRACE_HEADER, {}).get("S"))
                if trace is not None:
                    found[item["taskId"]["S"]] = trace
        return found

    def match_update(self, call: Candidate, result: Mapping[str, Any], now_ms: int) -> dict[str, Any]:
        """The ``Update`` of a TransactWriteItems entry that matches a waiting call: PENDING -> SUCCESS with
        ``result``, out of the ReadyIndex. Its condition is the claim's (still PENDING, before its ttl, due), so an
        expired, hung-up or already matched call fails it and nothing is written. No attempt is counted (nothing was
        tried that could fail), and a waiting call carries no lease or StatusIndex key to remove (a release and the
        lease recovery remove them)."""
        request = self._transition_request(
            call.task_id,
            TaskStatus.PENDING,
            TaskStatus.SUCCESS,
            now_ms=now_ms,
            set_=self._finished_attributes(now_ms, TaskStatus.SUCCESS) | {"result": {"S": encode_json(result)}},
            remove=("readyKey", "readySort", "notBefore"),
            condition="#ttl > :nowSeconds AND (attribute_not_exists(notBefore) OR notBefore <= :now)",
            names={"#ttl": "ttl"},
            values={":nowSeconds": {"N": str(now_ms // 1000)}},
        )
        request.pop("ReturnValues")
        return request


# ---- a shared plan: one matcher plans, every matcher of the pass writes its chunks ---------------------------

@dataclass(frozen=True)
class PlanHead:
    """The plan a matcher published for the others (``queue#<queue>#plan``): its id, how many chunks (each one
    match transaction's pairs, in item ``queue#<queue>#plan#<i>``), and until when it may be taken (epoch ms)."""

    plan_id: str
    chunks: int
    expires_ms: int


def plan_id_of(queue: str) -> str:
    return f"{CONTROL_PREFIX}{queue}#plan"


def chunk_id(queue: str, index: int) -> str:
    return f"{CONTROL_PREFIX}{queue}#plan#{index}"


class MatchPlans(QueueTable):
    """Control items (no index keys, like the claim lanes): invisible to every listing, count and stream filter,
    deleted by the table's TTL a minute after they expire."""

    def publish_plan(self, queue: str, head: PlanHead, chunks: Sequence[str]) -> None:
        """Write every chunk (one UpdateItem each: a chunk of an older plan under the same index is replaced, its
        taker forgotten), then the head, so that a reader of the head finds every chunk written."""
        delete_at = {"N": str(head.expires_ms // 1000 + 60)}
        for index, pairs in enumerate(chunks):
            self._call(
                "update_item",
                TableName=self._table,
                Key=_key(chunk_id(queue, index)),
                UpdateExpression="SET planId = :plan, pairs = :pairs, planExpires = :expires, deleteAt = :deleteAt "
                "REMOVE takenBy",
                ExpressionAttributeValues={":plan": {"S": head.plan_id}, ":pairs": {"S": pairs},
                                           ":expires": {"N": str(head.expires_ms)}, ":deleteAt": delete_at},
            )
        self._call(
            "update_item",
            TableName=self._table,
            Key=_key(plan_id_of(queue)),
            UpdateExpression="SET planId = :plan, chunks = :chunks, planExpires = :expires, deleteAt = :deleteAt",
            ExpressionAttributeValues={":plan": {"S": head.plan_id}, ":chunks": {"N": str(head.chunks)},
                                       ":expires": {"N": str(head.expires_ms)}, ":deleteAt": delete_at},
        )

    def read_plan(self, queue: str) -> PlanHead | None:
        """The last plan published for ``queue`` (strongly consistent), or ``None``."""
        item = self._call("get_item", TableName=self._table, Key=_key(plan_id_of(queue)), ConsistentRead=True).get("Item")
        if item is None or "planId" not in item:
            return None
        return PlanHead(item["planId"]["S"], int(item["chunks"]["N"]), int(item["planExpires"]["N"]))

    def take_chunk(self, queue: str, head: PlanHead, index: int, owner: str, take_by_ms: int | None = None) -> str | None:
        """Take chunk ``index`` of plan ``head`` for ``owner`` (one conditional UpdateItem that also reads it): its
        pairs, or ``None`` if another matcher took it first, a newer plan replaced it, or the plan expires by
        ``take_by_ms`` (epoch ms; now if not given)."""
        take_by_ms = self._clock.now_ms() if take_by_ms is None else take_by_ms
        try:
            response = self._call(
                "update_item",
                TableName=self._table,
                Key=_key(chunk_id(queue, index)),
                UpdateExpression="SET takenBy = :owner",
                ConditionExpression="planId = :plan AND attribute_not_exists(takenBy) AND planExpires > :takeBy",
                ExpressionAttributeValues={":owner": {"S": owner}, ":plan": {"S": head.plan_id},
                                           ":takeBy": {"N": str(take_by_ms)}},
                ReturnValues="ALL_NEW",
            )
        except ConditionLost:
            return None
        return str(response["Attributes"]["pairs"]["S"])


    def finish_chunk(self, queue: str, head: PlanHead, index: int) -> None:
        """Mark chunk ``index`` of plan ``head`` written (whatever of it committed): the planner plans again what is
        left of it without waiting for the plan to expire. A newer plan under the same index is left alone."""
        try:
            self._call(
                "update_item",
                TableName=self._table,
                Key=_key(chunk_id(queue, index)),
                UpdateExpression="SET doneAt = :now",
                ConditionExpression="planId = :plan",
                ExpressionAttributeValues={":now": {"N": str(self._clock.now_ms())}, ":plan": {"S": head.plan_id}},
            )
        except ConditionLost:
            pass

    def chunks_done(self, queue: str, head: PlanHead) -> set[int]:
        """The chunks of plan ``head`` marked written (one strongly consistent BatchGetItem per 100 chunks)."""
        ids = {chunk_id(queue, index): index for index in range(head.chunks)}
        keys_ = [_key(i) for i in ids]
        done: set[int] = set()
        for start in range(0, len(keys_), _BATCH_GET_LIMIT):
            request = {self._table: {"Keys": keys_[start : start + _BATCH_GET_LIMIT], "ConsistentRead": True,
                                     "ProjectionExpression": "taskId, planId, doneAt"}}
            for item in self._batch_get(request):
                if item.get("planId", {}).get("S") == head.plan_id and "doneAt" in item:
                    done.add(ids[item["taskId"]["S"]])
        return done
