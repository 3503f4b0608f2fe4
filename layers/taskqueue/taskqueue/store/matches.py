"""The queue table's side of a match (the Matcher, queue "calls"): what a pass reads of the waiting calls it may
match, and the write that takes a call from waiting straight to matched inside the match transaction.

A matched call is never held: the match transaction (``taskqueue.agents.AgentStore.match_pairs``) moves it
PENDING -> SUCCESS together with its agent (queued -> busy) and the agent's queue entries, under conditions on
those items alone. So there is no claim write per call, no lease to recover after a crashed matcher, and a hang-up
or another matcher taking the call first simply fails the call's condition.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from taskqueue.model import encode_json
from taskqueue.states import TaskStatus
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
