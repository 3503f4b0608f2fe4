"""A Python port of the seed LIFO demo (seeds 002/003: "Implementing a LIFO task queue using AWS Lambda and
Amazon DynamoDB"), for the benchmarks only. Written from the articles and DESIGN.md's account of its code;
its defects are kept on purpose, since they are what the product is measured against.

- **Table**: hash key ``taskId``; one GSI ``task-status-created-index`` on ``taskStatus`` (hash) and
  ``taskCreated`` (range), projection ALL, so every status change moves the item's index entry (a delete
  and a put of the whole item) and each status is one index partition. The stream carries every change.
- **Tasks**: ``taskId``, ``taskStatus``, ``taskCreated``, ``taskUpdated`` (epoch ms) and ``ttl`` written in
  **milliseconds** (creation + 1 h): DynamoDB reads TTL as epoch seconds, so nothing ever expires and
  nothing is ever shed. One PutItem per task.
- **ProcessTasks** (one invocation = ``process_tasks``): until 59 s have passed, query a page of 10 PENDING
  tasks, newest first (eventually consistent index query); for each, 200 ms after the previous one: PENDING ->
  TAKEN (condition ``taskStatus = :from``), hand it to the runner, then TAKEN -> SUCCESS, or TAKEN -> PENDING
  when the runner was full (claim-then-bounce: 2 wasted writes); wait until every task of the page settled,
  wait 500 ms, next page. An empty page ends the invocation; tasks left at 59 s end it with a tail call.
  No lease: a crash would leave a task TAKEN for ever (not exercised here).
- **Fake runner**: 3 tasks at once; above that it refuses at once ("PENDING").
- **Trigger** (modelled in ``bench/invocation_model.py``): every stream record reaches it (no filter;
  batch 10, window 10 s); it publishes one wake-up when its batch holds an INSERT. Wake-ups expire after
  60 s (its EventInvokeConfig), and there is no safety net.

The timing constants (200 ms, 500 ms, 59 s, page 10, runner 3 x 15 s) are the seed's; they are
parameters so a scaled clock can shrink them with the rest of time.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

SEED_INDEX = "task-status-created-index"
PENDING, TAKEN, SUCCESS, FAILURE = "PENDING", "TAKEN", "SUCCESS", "FAILURE"


def create_seed_table(client: Any, name: str) -> None:
    """The seed's QueueTable: taskId key, the status/created GSI with projection ALL, a KEYS_ONLY stream."""
    client.create_table(
        TableName=name,
        AttributeDefinitions=[
            {"AttributeName": "taskId", "AttributeType": "S"},
            {"AttributeName": "taskStatus", "AttributeType": "S"},
            {"AttributeName": "taskCreated", "AttributeType": "N"},
        ],
        KeySchema=[{"AttributeName": "taskId", "KeyType": "HASH"}],
        GlobalSecondaryIndexes=[
            {
                "IndexName": SEED_INDEX,
                "KeySchema": [
                    {"AttributeName": "taskStatus", "KeyType": "HASH"},
                    {"AttributeName": "taskCreated", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"},
        BillingMode="PAY_PER_REQUEST",
    )


class SeedRunner:
    """The seed's fake legacy system: ``capacity`` tasks at once, ``seconds`` each; when full it answers
    "PENDING" at once (the task bounces back to the queue)."""

    def __init__(self, clock: Any, capacity: int = 3, seconds: float = 15.0, on_start: Any = None) -> None:
        self._clock = clock
        self.capacity = capacity
        self.seconds = seconds
        self.on_start = on_start
        self._lock = threading.Lock()
        self.active = 0

    def __call__(self, task: dict[str, Any]) -> str:
        with self._lock:
            if self.active >= self.capacity:
                return PENDING
            self.active += 1
        try:
            if self.on_start:
                self.on_start(task)
            self._clock.sleep(self.seconds)
            return SUCCESS
        finally:
            with self._lock:
                self.active -= 1


@dataclass
class SeedReport:
    pages: int = 0
    claims: int = 0  # PENDING -> TAKEN writes that succeeded (including those that bounced)
    bounces: int = 0  # TAKEN -> PENDING because the runner was full
    succeeded: int = 0
    lost: int = 0  # transitions whose condition failed
    tail_call: bool = False
    stopped_by: str = "empty"
    runs: list[tuple[str, int, int]] = field(default_factory=list)  # (task id, created ms, claim ms) of tasks run


class SeedLifo:
    def __init__(
        self,
        client: Any,
        table: str,
        clock: Any,
        runner: Any,
        *,
        page: int = 10,
        stagger_seconds: float = 0.2,
        pause_seconds: float = 0.5,
        max_active_seconds: float = 59.0,
        ttl_seconds: int = 3600,
    ) -> None:
        self._db = client
        self.table = table
        self._clock = clock
        self._runner = runner
        self.page = page
        self.stagger = stagger_seconds
        self.pause = pause_seconds
        self.max_active = max_active_seconds
        self.ttl_seconds = ttl_seconds
        self._lock = threading.Lock()

    # ---- CreateTasks ---------------------------------------------------------------------------

    def create_task(self, task_id: str | None = None) -> str:
        task_id = task_id or str(uuid.uuid4())
        now = self._clock.now_ms()
        self._db.put_item(
            TableName=self.table,
            Item={
                "taskId": {"S": task_id},
                "taskStatus": {"S": PENDING},
                "taskCreated": {"N": str(now)},
                "taskUpdated": {"N": str(now)},
                # The seed's defect, kept: TTL in milliseconds, read by DynamoDB as seconds (year ~57,000).
                "ttl": {"N": str(now + self.ttl_seconds * 1000)},
            },
        )
        return task_id

    # ---- ProcessTasks ----------------------------------------------------------------------------

    def _transition(self, task: dict[str, Any], source: str, target: str) -> tuple[bool, int]:
        now = self._clock.now_ms()
        try:
            self._db.update_item(
                TableName=self.table,
                Key={"taskId": {"S": task["taskId"]}},
                UpdateExpression="set taskStatus = :toTaskStatus, taskUpdated = :taskUpdated",
                ConditionExpression="taskStatus = :fromTaskStatus",
                ExpressionAttributeValues={
                    ":fromTaskStatus": {"S": source},
                    ":toTaskStatus": {"S": target},
                    ":taskUpdated": {"N": str(now)},
                },
            )
            return True, now
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise
            return False, now

    def _pending_page(self) -> list[dict[str, Any]]:
        response = self._db.query(
            TableName=self.table,
            IndexName=SEED_INDEX,
            KeyConditionExpression="taskStatus = :taskStatus",
            ExpressionAttributeValues={":taskStatus": {"S": PENDING}},
            Limit=self.page,
            ScanIndexForward=False,
        )
        return [
            {"taskId": i["taskId"]["S"], "taskCreated": int(i["taskCreated"]["N"])} for i in response.get("Items", [])
        ]

    def _process(self, task: dict[str, Any], report: SeedReport) -> None:
        taken, claimed_at = self._transition(task, PENDING, TAKEN)
        if not taken:
            with self._lock:
                report.lost += 1
            return
        with self._lock:
            report.claims += 1
        target = FAILURE
        try:
            target = self._runner(task)
        except Exception:
            target = PENDING
        finally:
            done, _ = self._transition(task, TAKEN, target)
        with self._lock:
            if not done:
                report.lost += 1
            elif target == PENDING:
                report.bounces += 1
            elif target == SUCCESS:
                report.succeeded += 1
                report.runs.append((task["taskId"], task["taskCreated"], claimed_at))

    def process_tasks(self, threaded: bool = True) -> SeedReport:
        """One ProcessTasks invocation. ``threaded``: each task of a page runs in its own thread, started
        200 ms after the previous (as the seed's promises do); ``threaded=False`` runs them one after another
        at the same moments, exact when the runner takes no time (a virtual-clock replay)."""
        report = SeedReport()
        start = self._clock.monotonic()
        while True:
            reached = self._clock.monotonic() - start >= self.max_active
            tasks = self._pending_page()
            if not tasks:
                report.stopped_by = "empty"
                return report
            if reached:
                report.stopped_by = "budget"
                report.tail_call = True
                return report
            report.pages += 1
            if threaded:
                threads = []
                for offset, task in enumerate(tasks, start=1):
                    thread = threading.Thread(target=self._delayed, args=(task, offset * self.stagger, report), daemon=True)
                    thread.start()
                    threads.append(thread)
                for thread in threads:
                    thread.join()
            else:
                for task in tasks:
                    self._clock.sleep(self.stagger)
                    self._process(task, report)
            self._clock.sleep(self.pause)

    def _delayed(self, task: dict[str, Any], delay: float, report: SeedReport) -> None:
        self._clock.sleep(delay)
        self._process(task, report)
