"""What a worker (ProcessTasks, the Matcher) does with the tasks it found (``store/finding.py``): claim them, renew
their leases, finish them, hand them back, and recover the leases of crashed workers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools import Logger

from taskqueue.core import fairness, keys
from taskqueue.core.errors import InvalidTaskInput, TaskNotFound, TaskQueueError, TaskTooLong
from taskqueue.core.model import Task, encode_json, from_item
from taskqueue.core.run_time import effective_run_seconds
from taskqueue.core.states import TaskStatus
from taskqueue.store.dynamo import ConditionLost
from taskqueue.store.finding import WorkFinding
from taskqueue.store.table import _BATCH_GET_LIMIT, READY_INDEX, AttributeValue, Candidate, is_claimable
from taskqueue.store.unmarked_leases import LEASE_MARK_AFTER_SECONDS

logger = Logger(child=True)

# What a runner reported of an attempt (taskqueue.work.progress); a claim removes them, so each attempt starts afresh.
PROGRESS_ATTRIBUTES = ("progress", "progressMessage", "progressUpdated")
# A TAKEN task's ReadyIndex entry (with its lease as notBefore), removed when it finishes.
READY_ENTRY = ("readyKey", "readySort", "notBefore")
# ... and a StatusIndex TAKEN entry, which tasks claimed by a version before the lease moved to the ReadyIndex carry.
LEASED_ENTRY = (*READY_ENTRY, "statusKey", "statusSort")


class WorkerTransitions(WorkFinding):
    def claim(
        self, candidate: Candidate, owner: str, now_ms: int | None = None, *, run_within: float | None = None,
        mark: bool = True,
    ) -> Task | None:
        """PENDING -> TAKEN with a lease; ``None`` if someone else got it or it is no longer claimable.

        The task keeps its ReadyIndex entry, its lease marked on it as ``notBefore`` (one index write in place of a
        StatusIndex put and delete, taskqueue.core.keys); an entry read from a delayed partition moves to its ready
        partition, so that a lease is never taken for a due time. A ``leased`` candidate is a task whose worker died
        (its lease passed): it is recovered first, then claimed at its place in the order.

        ``run_within``: the longest run the claiming invocation can still finish (taskqueue.core.run_time.run_within);
        a task that declares a longer one (``runSeconds``, else DEFAULT_RUN_SECONDS) is refused by the write's
        condition and raises ``TaskTooLong``, so it stays PENDING for a fresh invocation.

        ``mark`` False (a lone watcher, ``taskqueue.work.worker``): the lease is not marked on the entry; this store
        passes the task over and marks it only if it still runs LEASE_MARK_AFTER_SECONDS later (``mark_leases``;
        store/unmarked_leases.py). A claim refused because the task runs unmarked elsewhere passes it over too."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        if candidate.leased and self.recover_in_look(candidate, now_ms) is not TaskStatus.PENDING:
            return None
        expires = now_ms + self._settings.lease_seconds * 1000
        # DynamoDB's TTL deletes late: an expired task must be refused here, not only skipped above. The entry must
        # still be where the candidate was read (a stale stream image or index entry names a task since moved, e.g.
        # released into its delayed partition: claimed from there, its entry would sit where no lease recovery looks).
        condition = ("#ttl > :nowSeconds AND (attribute_not_exists(notBefore) OR notBefore <= :now) "
                     "AND readyKey = :partition")
        values: dict[str, AttributeValue] = {":nowSeconds": {"N": str(now_ms // 1000)},
                                             ":partition": {"S": candidate.partition}}
        if run_within is not None:
            values[":runWithin"] = {"N": f"{run_within:.3f}"}
            fits = "runSeconds <= :runWithin"
            if self._settings.default_run_seconds <= run_within:
                fits = f"(attribute_not_exists(runSeconds) OR {fits})"
            condition += f" AND {fits}"
        moved: dict[str, AttributeValue] = {}
        mark = mark or candidate.delayed  # a delayed entry moves (its index entry is rewritten anyway): marked for free
        if candidate.delayed:  # to its ready partition, at the place its ready sort key gives it
            ready = keys.ready_key(candidate.queue, candidate.shard) if candidate.group is None else (
                fairness.group_ready_key(candidate.queue, candidate.shard, candidate.group))
            moved = {"readyKey": {"S": ready}, "readySort": {"S": candidate.ready_sort}}
        request = self._transition_request(
            candidate.task_id,
            TaskStatus.PENDING,
            TaskStatus.TAKEN,
            now_ms=now_ms,
            set_={
                "leaseOwner": {"S": owner},
                "claimedAt": {"N": str(now_ms)},
                **moved,
                **self._lease_attributes(expires, mark=mark),
            },
            # A new attempt starts without the last one's progress.
            remove=PROGRESS_ATTRIBUTES,
            count_attempt=True,
            condition=condition,
            names={"#ttl": "ttl"},
            values=values,
        )
        # The item as it was, if refused: tells a run too long from a lost race, and a task running unmarked.
        request["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        try:
            task = from_item(self._call("update_item", **request)["Attributes"])
        except ConditionLost as lost:
            if lost.item is not None:
                if run_within is not None:
                    self._raise_if_too_long(lost.item, run_within, now_ms)
                self._refused_as_running(candidate, lost.item, now_ms)
            return None
        if not mark:
            self._unmarked.claimed(task.task_id, expires, now_ms)
        return task

    def still_waiting(self, candidates: list[Candidate]) -> list[Candidate]:
        """Those of ``candidates`` still PENDING where they were read (one strongly consistent BatchGetItem a hundred,
        a read unit each): what an old stream batch names may have been claimed, or have moved, since; a claim of it
        would be refused and still cost its write."""
        waiting: set[str] = set()
        for start in range(0, len(candidates), _BATCH_GET_LIMIT):
            part = candidates[start : start + _BATCH_GET_LIMIT]
            request = {self._table: {"Keys": [{"taskId": {"S": c.task_id}} for c in part], "ConsistentRead": True,
                                     "ProjectionExpression": "taskId, taskStatus, readyKey, notBefore"}}
            places = {c.task_id: c.partition for c in part}
            for item in self._batch_get(request):
                task_id = item["taskId"]["S"]
                if (item.get("taskStatus", {}).get("S") == TaskStatus.PENDING.value and "notBefore" not in item
                        and item.get("readyKey", {}).get("S") == places[task_id]):
                    waiting.add(task_id)
        return [c for c in candidates if c.task_id in waiting]

    def _refused_as_running(self, candidate: Candidate, item: Mapping[str, Any], now_ms: int) -> None:
        """A claim lost to a task that runs with no lease mark on its entry (another store's lone watcher claimed
        it): pass it over until its owner should have marked it, and mark it if that time has passed (it likely died
        before its mark: marked, lease recovery finds it once the lease passes). A lapsed one is recovered at once."""
        task = from_item(item)
        if task.status is not TaskStatus.TAKEN or "notBefore" in item or task.lease_expires_ms is None:  # marked: known
            return
        if task.lease_expires_ms <= now_ms:
            self.recover_in_look(candidate, now_ms)
            return
        claimed_ms = task.claimed_ms if task.claimed_ms is not None else task.updated_ms
        marked_by_ms = claimed_ms + int(2 * LEASE_MARK_AFTER_SECONDS * 1000)  # its owner, if alive, marked it by then
        if marked_by_ms <= now_ms:
            self._mark_lease(task.task_id, task.lease_expires_ms, now_ms)
        # Passed over until then only: a task its owner releases for a retry is claimable again at its place.
        self._unmarked.seen_running(task.task_id, min(task.lease_expires_ms, max(marked_by_ms, now_ms + 1)))

    def mark_leases(self, owner: str, now_ms: int | None = None) -> int:
        """Mark on their index entries the leases of this store's unmarked tasks claimed LEASE_MARK_AFTER_SECONDS
        ago or more (one write each, and its index write): from then on every reader sees them running, the board
        counts them TAKEN, lease recovery finds them. How many were marked."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        marked = 0
        for task_id, expires in self._unmarked.due(now_ms - int(LEASE_MARK_AFTER_SECONDS * 1000)):
            written = self._mark_lease(task_id, expires, now_ms, owner)  # a refusal raises: the next beat tries again
            self._unmarked.done(task_id)  # marked, or no longer this store's lease as it knew it (renewed, finished)
            marked += written
        return marked

    def _mark_lease(self, task_id: str, expires_ms: int, now_ms: int, owner: str | None = None) -> bool:
        condition = "leaseExpires = :expires AND attribute_not_exists(notBefore)"
        values: dict[str, AttributeValue] = {":expires": {"N": str(expires_ms)}}
        if owner is not None:
            condition += " AND leaseOwner = :owner"
            values[":owner"] = {"S": owner}
        written = self._transition(
            task_id, TaskStatus.TAKEN, TaskStatus.TAKEN, now_ms=now_ms, set_={"notBefore": {"N": str(expires_ms)}},
            condition=condition, values=values,
        )
        return written is not None

    def _raise_if_too_long(self, item: Mapping[str, Any], run_within: float, now_ms: int) -> None:
        """A refused claim of a task that was still claimable is refused for its run time: say so."""
        task = from_item(item)
        if task.status is not TaskStatus.PENDING or not is_claimable(task.ttl, task.not_before_ms, now_ms):
            return
        run_seconds = effective_run_seconds(task.run_seconds, self._settings.default_run_seconds)
        if run_seconds > run_within:
            raise TaskTooLong(task.task_id, run_seconds, run_within)

    def record_progress(
        self, task: Task, owner: str, progress: float, message: str | None, now_ms: int | None = None
    ) -> bool:
        """TAKEN -> TAKEN with what the runner reports of its attempt, only by the lease owner while the lease holds.
        A MODIFY on the stream, which Trigger's filter (INSERTs of PENDING tasks) never passes on."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        set_: dict[str, AttributeValue] = {"progress": {"N": repr(float(progress))}, "progressUpdated": {"N": str(now_ms)}}
        if message:
            set_["progressMessage"] = {"S": message}
        written = self._transition(
            task.task_id,
            TaskStatus.TAKEN,
            TaskStatus.TAKEN,
            now_ms=now_ms,
            set_=set_,
            remove=() if message else ("progressMessage",),
            condition="leaseOwner = :owner AND leaseExpires > :now",
            values={":owner": {"S": owner}},
        )
        return written is not None

    def complete(self, task: Task, owner: str, result: Mapping[str, Any] | None = None, now_ms: int | None = None) -> bool:
        """TAKEN -> SUCCESS, only by the lease owner while the lease holds."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        set_ = self._finished_attributes(now_ms, TaskStatus.SUCCESS)
        if result is not None:
            set_["result"] = {"S": encode_json(result)}
        set_ |= self.workflow_end_attributes(task, TaskStatus.SUCCESS, now_ms)  # type: ignore[attr-defined]  # workflows
        return self._owned_transition(task, owner, TaskStatus.SUCCESS, now_ms, set_, LEASED_ENTRY) and self._ended(task, now_ms)

    def renew_lease(self, task: Task, owner: str, seconds: float | None = None, now_ms: int | None = None) -> int | None:
        """TAKEN -> TAKEN with the lease extended to now + ``seconds`` (default LEASE_SECONDS): a heartbeat,
        only by the lease owner while its lease holds, and only ever later (extend-only). The item's deletion
        time moves with it. Returns the new expiry (epoch ms), or ``None`` if the lease is no longer ours."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        lease_ms = int((self._settings.lease_seconds if seconds is None else seconds) * 1000)
        if lease_ms <= 0:
            raise InvalidTaskInput(f"a lease extension must be positive, got {seconds!r} s")
        expires = now_ms + lease_ms
        unmarked = self._unmarked.is_own(task.task_id)  # not marked yet: the heartbeat's ``mark_leases`` will
        written = self._transition(
            task.task_id,
            TaskStatus.TAKEN,
            TaskStatus.TAKEN,
            now_ms=now_ms,
            set_=self._lease_attributes(expires, mark=not unmarked),
            condition="leaseOwner = :owner AND leaseExpires > :now AND leaseExpires < :newExpiry",
            values={":owner": {"S": owner}, ":newExpiry": {"N": str(expires)}},
        )
        if written is None:
            self._unmarked.done(task.task_id)
            return None
        self._unmarked.renewed(task.task_id, expires)
        return expires

    def fail(self, task: Task, owner: str, error: str, now_ms: int | None = None) -> bool:
        """TAKEN -> FAILURE (the dead-letter state), only by the lease owner while the lease holds."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        set_ = self._finished_attributes(now_ms, TaskStatus.FAILURE) | {
            "lastError": {"S": error[:1000]},
            "statusKey": {"S": keys.status_key(task.queue, TaskStatus.FAILURE.value, task.shard)},
            "statusSort": {"N": str(now_ms)},
        } | self.workflow_end_attributes(task, TaskStatus.FAILURE, now_ms)  # type: ignore[attr-defined]  # workflows
        return self._owned_transition(task, owner, TaskStatus.FAILURE, now_ms, set_, READY_ENTRY) and self._ended(task, now_ms)

    def _ended(self, task: Task, now_ms: int) -> bool:
        """After a terminal write: what it does to the tasks that wait for ``task`` (a workflow's; never raises)."""
        self.workflow_ended(task, now_ms)  # type: ignore[attr-defined]  # store/workflow_fan_out.py, joined in TaskStore
        return True

    def release(
        self,
        task: Task,
        owner: str,
        *,
        not_before_ms: int | None = None,
        error: str | None = None,
        refund_attempt: bool = False,
        now_ms: int | None = None,
    ) -> bool:
        """TAKEN -> PENDING at the task's old place in the order (a retry, or work handed back).

        ``refund_attempt`` gives back the attempt the claim counted, for work handed back without being
        tried (e.g. a call with no matching agent yet), so waiting never exhausts a task's attempts.
        """
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        set_ = self._ready_attributes(task.with_changes(not_before_ms=not_before_ms))
        if error is not None:
            set_["lastError"] = {"S": error[:1000]}
        if refund_attempt:
            set_["attempts"] = {"N": str(max(0, task.attempts - 1))}
        # Back at its place: the same entry (its lease mark removed), or the delayed partition's for a backoff.
        remove = ("statusKey", "statusSort") if "notBefore" in set_ else ("statusKey", "statusSort", "notBefore")
        released = self._owned_transition(task, owner, TaskStatus.PENDING, now_ms, set_, remove)
        if released and not_before_ms is not None:
            # The task is released: a refused announcement must not fail the release, whose retry could undo a new
            # claim of the task by the same owner. The safety net lowers a head nobody announced.
            try:
                self.note_delayed_tasks([(task.queue, not_before_ms)], now_ms)
            except TaskQueueError as exc:
                logger.warning("released task's delayed head not announced; the safety net repairs it",
                               extra={"task_id": task.task_id, "error": str(exc)})
        return released

    def completion_update(
        self, task: Task, owner: str, result: Mapping[str, Any] | None = None, now_ms: int | None = None
    ) -> dict[str, Any]:
        """The ``Update`` of a TransactWriteItems entry that completes ``task`` (TAKEN -> SUCCESS) under the
        same conditions as ``complete``, for callers that must finish a task atomically with other writes."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        set_ = self._finished_attributes(now_ms, TaskStatus.SUCCESS)
        if result is not None:
            set_["result"] = {"S": encode_json(result)}
        request = self._transition_request(
            task.task_id,
            TaskStatus.TAKEN,
            TaskStatus.SUCCESS,
            now_ms=now_ms,
            set_=set_,
            remove=("leaseOwner", "leaseExpires", *LEASED_ENTRY),
            condition="leaseOwner = :owner AND leaseExpires > :now",
            values={":owner": {"S": owner}},
        )
        request.pop("ReturnValues")
        return request

    def expired_leases(self, queue: str, now_ms: int | None = None, limit: int = 100, *, legacy: bool = False) -> list[str]:
        """Ids of TAKEN tasks whose lease has passed, among the first ``limit`` entries of each shard's ready
        partition in serving order: where running tasks sit (the newest in a LIFO queue, the oldest in a FIFO one).
        A lease entry (``Candidate.leased``) further down, or in a group's partition, is recovered by the look that
        reaches it (``claim``), at its place in the order like any waiting task. One index read a shard, no scan.

        ``legacy`` (the safety net): also the StatusIndex's TAKEN entries whose lease passed, which tasks claimed by a
        version before the lease moved to the ReadyIndex carry (they have no ReadyIndex entry a look could find)."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        found = self._status_index_ids(queue, TaskStatus.TAKEN, limit, until_ms=now_ms) if legacy else []
        for shard in range(self._settings.queue_shards):
            response = self._call(
                "query", TableName=self._table, IndexName=READY_INDEX, KeyConditionExpression="readyKey = :k",
                FilterExpression="notBefore <= :now", ScanIndexForward=False, Limit=limit,
                ExpressionAttributeValues={":k": {"S": keys.ready_key(queue, shard)}, ":now": {"N": str(now_ms)}},
            )
            found += [item["taskId"]["S"] for item in response.get("Items", [])]
        return found

    def recover_lease(self, task_id: str, retry_at_ms: int | None, now_ms: int | None = None) -> TaskStatus | None:
        """Return a TAKEN task whose lease expired to PENDING, or to FAILURE once its attempts are used up.

        The write is conditional on the lease expiry it read, so a worker that renewed or finished in the
        meantime wins. Returns the new status, or ``None`` if there was nothing to recover.
        """
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        try:
            task = self.get(task_id)
        except TaskNotFound:
            return None
        if task.status is not TaskStatus.TAKEN or task.lease_expires_ms is None or task.lease_expires_ms > now_ms:
            return None
        error = f"lease of {task.lease_owner} expired at attempt {task.attempts}"
        condition = "leaseExpires = :seenExpiry"
        values = {":seenExpiry": {"N": str(task.lease_expires_ms)}}
        if task.attempts >= task.max_attempts:
            target = TaskStatus.FAILURE
            set_ = self._finished_attributes(now_ms, TaskStatus.FAILURE) | {
                "lastError": {"S": error},
                "statusKey": {"S": keys.status_key(task.queue, TaskStatus.FAILURE.value, task.shard)},
                "statusSort": {"N": str(now_ms)},
            } | self.workflow_end_attributes(task, target, now_ms)  # type: ignore[attr-defined]  # workflows
            remove: tuple[str, ...] = ("leaseOwner", "leaseExpires", *READY_ENTRY)
        else:
            target = TaskStatus.PENDING
            set_ = self._ready_attributes(task.with_changes(not_before_ms=retry_at_ms)) | {"lastError": {"S": error}}
            remove = ("leaseOwner", "leaseExpires", "statusKey", "statusSort") + (() if "notBefore" in set_ else ("notBefore",))
        written = self._transition(
            task_id, TaskStatus.TAKEN, target, now_ms=now_ms, set_=set_, remove=remove, condition=condition, values=values
        )
        if written is not None and target is TaskStatus.PENDING and retry_at_ms is not None:
            self.note_delayed_tasks([(task.queue, retry_at_ms)], now_ms)
        if written is not None and target is TaskStatus.FAILURE:
            self._ended(task, now_ms)
        return target if written is not None else None

    def recover_in_look(self, candidate: Candidate, now_ms: int) -> TaskStatus | None:
        """``recover_lease`` of a running task's entry whose lease a look found passed (no backoff: it waited a whole
        lease), counted for ``drain_recovered``."""
        status = self.recover_lease(candidate.task_id, None, now_ms)
        if status is not None:
            with self._shed_lock:
                self._recovered[(candidate.queue, status.value)] += 1
        return status

    def drain_recovered(self, queue: str) -> dict[str, int]:
        """Leases of ``queue`` that looks and claims of this store recovered since the last drain, per new status
        (PENDING, FAILURE): the caller counts them as ``LeasesRecovered`` / ``TasksFailed``."""
        with self._shed_lock:
            found = {status: n for (q, status), n in self._recovered.items() if q == queue}
            for status in found:
                del self._recovered[(queue, status)]
        return found

    def recover_expired_leases(
        self, queue: str, retry_at_ms: int | None = None, now_ms: int | None = None, *, legacy: bool = False
    ) -> dict[str, int]:
        """Recover the expired leases ``expired_leases`` finds; counts per new status."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        outcome = {TaskStatus.PENDING.value: 0, TaskStatus.FAILURE.value: 0}
        for task_id in dict.fromkeys(self.expired_leases(queue, now_ms, legacy=legacy)):
            status = self.recover_lease(task_id, retry_at_ms, now_ms)
            if status is not None:
                outcome[status.value] += 1
        return outcome

