"""What the board's pages show, read through the store and the agent store: per-queue rows, filtered task
listings, a task's timeline, the matching queue, FailedEventsQueue. The HTTP side (views.py) only renders these.

Counts are COUNT queries on the indexes, bounded in a request and shared between tabs (counting.py), and the
functions' metrics; no request scans a table (the agent table is scanned in the background, at most every
``services.AGENTS_EVERY_S``; SUCCESS and SHED, which no index holds, are not listed). Filtering by priority or
error text reads the listing's pages (the index order) and keeps what matches, a bounded number of tasks per
request, and says so. A read-only board reads FailedEventsQueue's counts, never its messages (receiving one changes
its visibility and receive count).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from taskq.board.counting import BoardDepth
from taskq.board.metrics import QueueSeries
from taskq.board.services import Board
from taskq.failed_events import FailedEvent, parse, receive_all
from taskqueue.core.errors import InvalidAgentInput, TaskNotFound
from taskqueue.core.fairness import DEFAULT_GROUP
from taskqueue.core.model import Task
from taskqueue.core.queue_gauges import QueueGauges, records
from taskqueue.core.states import TaskStatus
from taskqueue.matching import rules as matching
from taskqueue.matching.agents import Agent, AgentStatus
from taskqueue.store import QueueControl

# Tasks a filtered listing (or a retry of a filtered set) reads per request, at most.
FILTER_BUDGET = 1000
# Waiting calls the matching page shows at each refresh: each is read with a consistent GetItem (1 read unit), so
# 100 of them cost 100 units a refresh, ~$0.015 an hour with the page open; 25 cost a quarter (the task list has
# the rest).
CALLS_SHOWN = 25
# Messages of FailedEventsQueue the page reads (and makes visible again at once).
FAILED_EVENTS_SHOWN = 100


@dataclass(frozen=True)
class QueueRow:
    queue: str
    order: str
    depth: BoardDepth
    control: QueueControl
    series: QueueSeries


def queue_rows(board: Board, now_ms: int) -> list[QueueRow]:
    store = board.store
    series = board.metrics.series(board.queues, now_ms)
    rows = []
    for queue in board.queues:
        rows.append(QueueRow(
            queue=queue,
            order=board.target.settings.order_of(queue).value,
            depth=board.counts.depth(queue, now_ms),
            control=store.control(queue),
            series=series[queue],
        ))
    return rows


@dataclass(frozen=True)
class QueueMetrics:
    """A queue's metric figures as the safety net publishes them (``taskqueue.core.queue_gauges.records``): ``values``
    metric name -> value of the queue, ``groups`` (group, its values) for its noisiest groups; ``age_s`` of the read
    (None before the first background read has ended), ``complete`` False when a count stopped at its cap."""

    queue: str
    values: dict[str, float]
    groups: list[tuple[str, dict[str, float]]]
    age_s: float | None
    error: str | None
    complete: bool = True


def queue_metrics(board: Board) -> list[QueueMetrics]:
    """Every queue's metric figures, read in the background (``Board.gauges_of``), the same the dashboard plots."""
    found = []
    top = board.target.settings.noisy_group_metrics
    for queue in board.queues:
        gauges, age, error = board.gauges_of(queue).get()
        if not isinstance(gauges, QueueGauges):
            found.append(QueueMetrics(queue, {}, [], age, error))
            continue
        queue_record, *group_records = records(gauges, gauges.noisy(top))
        values = {name: value for name, _, value in queue_record.values}
        groups = [(dict(r.dimensions)["group"], {name: value for name, _, value in r.values}) for r in group_records]
        complete = gauges.total.complete and gauges.groups_complete
        found.append(QueueMetrics(queue, values, groups, age, error, complete))
    return found


# ---- groups (fair share) ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueGroups:
    """A queue's groups as the groups page shows them: ``view`` (a ``taskqueue.store.GroupsView``, None before the
    first background read has ended), its age and the last read's error."""

    queue: str
    view: object | None
    age_s: float | None
    error: str | None


def queue_groups(board: Board) -> list[QueueGroups]:
    """Every queue's groups view, as read in the background (``Board.groups_of``): no group is read in a request."""
    found = []
    for queue in board.queues:
        view, age, error = board.groups_of(queue).get()
        found.append(QueueGroups(queue, view, age, error))
    return found


# ---- tasks ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskFilter:
    """What the operator asked the task list for. ``priority`` None: any; ``error``: a case-insensitive substring
    of the last error."""

    queue: str | None = None
    state: str | None = None
    priority: int | None = None
    error: str = ""
    group: str | None = None  # fair share's group: PENDING reads the group's own partitions, other states filter

    @property
    def by_group_index(self) -> bool:
        """A group's waiting tasks are listed from its own partitions (no filtering needed)."""
        return self.group is not None and self.state in (None, TaskStatus.PENDING.value)

    @property
    def filtering(self) -> bool:
        return self.priority is not None or bool(self.error) or (self.group is not None and not self.by_group_index)

    def keeps(self, task: Task) -> bool:
        if self.priority is not None and task.priority != self.priority:
            return False
        if self.group is not None and (task.group or DEFAULT_GROUP) != self.group:
            return False
        return not self.error or self.error.casefold() in (task.last_error or "").casefold()


@dataclass(frozen=True)
class Listing:
    tasks: list[Task]
    next_token: str | None
    examined: int  # tasks read to find these (more than shown when filtering)


# States no index holds: listing them is a table Scan, which the board never makes inside a request.
NOT_INDEXED = (TaskStatus.SUCCESS.value, TaskStatus.SHED.value)


def list_tasks(board: Board, wanted: TaskFilter, limit: int, token: str | None) -> Listing:
    """A page of the listing in the queue's order (``TaskStore.list_tasks``), filtered. Unfiltered: one store page.
    Filtered: store pages of ``limit`` until ``limit`` tasks match or FILTER_BUDGET were read; every match of the
    last page read is kept (a page may show up to 2 x limit - 1), so the next token never skips a match."""
    found: list[Task] = []
    examined = 0
    if wanted.state in NOT_INDEXED:
        return Listing([], None, 0)  # the page says why, and what lists them
    while True:
        page = board.store.list_tasks(wanted.queue, wanted.state, limit, token,
                                      group=wanted.group if wanted.by_group_index else None)
        examined += len(page.tasks)
        found += [t for t in page.tasks if wanted.keeps(t)]
        token = page.next_token
        if not wanted.filtering or token is None or len(found) >= limit or examined >= FILTER_BUDGET:
            return Listing(found, token, examined)


def filtered_ids(board: Board, wanted: TaskFilter) -> Iterator[str]:
    """Ids of every task the filter keeps, in listing order, reading at most FILTER_BUDGET tasks."""
    token: str | None = None
    examined = 0
    if wanted.state in NOT_INDEXED:
        return
    while examined < FILTER_BUDGET:
        page = board.store.list_tasks(wanted.queue, wanted.state, 100, token,
                                      group=wanted.group if wanted.by_group_index else None)
        examined += len(page.tasks)
        yield from (t.task_id for t in page.tasks if wanted.keeps(t))
        token = page.next_token
        if token is None:
            return


def search(board: Board, text: str) -> list[Task]:
    """Tasks whose id is ``text``, or that the CreateTasks request ``text`` created (ids derived from it)."""
    text = text.strip()
    if not text:
        return []
    try:
        return [board.store.get(text)]
    except TaskNotFound:
        pass
    return board.store.tasks_of_request(text)


@dataclass(frozen=True)
class Moment:
    at_ms: int
    what: str
    past: bool


def timeline(task: Task, now_ms: int) -> list[Moment]:
    """What the task's item says happened and will happen, in time order. The table keeps no history: each
    moment is a time the item holds (created, re-enqueued, last change, lease expiry, not-before, shed deadline,
    deletion by TTL)."""
    moments = [Moment(task.created_ms, "created (PENDING)", True)]
    if task.enqueued_ms != task.created_ms:
        moments.append(Moment(task.enqueued_ms, "put back in line (touch or redrive): order time now", True))
    if task.updated_ms != task.created_ms:
        moments.append(Moment(task.updated_ms, f"last change: now {task.status}, attempt {task.attempts} of "
                                               f"{task.max_attempts}", True))
    if task.not_before_ms is not None:
        moments.append(Moment(task.not_before_ms, "not claimable before (backoff or delay)", task.not_before_ms <= now_ms))
    if task.status is TaskStatus.TAKEN and task.lease_expires_ms is not None:
        moments.append(Moment(task.lease_expires_ms, f"lease of {task.lease_owner or '?'} expires",
                              task.lease_expires_ms <= now_ms))
    if task.status is TaskStatus.PENDING:
        moments.append(Moment(task.ttl * 1000, "ttl: shed if not claimed by then", task.ttl * 1000 <= now_ms))
    if task.delete_at is not None:
        moments.append(Moment(task.delete_at * 1000, "DynamoDB TTL may delete the item from then on",
                              task.delete_at * 1000 <= now_ms))
    return sorted(moments, key=lambda m: m.at_ms)


# ---- the matching queue -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WaitingCall:
    task: Task
    preferences: str  # the agent queue it waits on, or why it waits on none
    waited_ms: int


@dataclass(frozen=True)
class Matching:
    agents: dict[str, list[Agent]]  # by status: queued (available), busy, offline
    calls: list[WaitingCall]
    more_calls: bool
    queue: str
    agents_age_s: float | None = None  # how old the agents' read is (None: the first read has not ended yet)
    agents_error: str | None = None


def matching_view(board: Board, now_ms: int, calls_shown: int = CALLS_SHOWN) -> Matching | None:
    if board.agents is None:
        return None
    settings = board.agents.settings
    by_status: dict[str, list[Agent]] = {s.value: [] for s in AgentStatus}
    assert board.agents_seen is not None
    seen, age, error = board.agents_seen.get()  # the agent table's Scan, made in the background
    for agent in seen or ():
        by_status[agent.status.value].append(agent)
    by_status[AgentStatus.QUEUED.value].sort(key=lambda a: a.available_ms or 0)
    calls: list[WaitingCall] = []
    more = False
    if settings.queue in board.target.settings.queue_orders:
        page = board.store.list_tasks(settings.queue, TaskStatus.PENDING, calls_shown)
        more = page.next_token is not None
        for task in page.tasks:
            try:
                key = matching.call_queue_key(task.payload, settings.attributes)
            except InvalidAgentInput as exc:
                key = f"none: {exc}"
            calls.append(WaitingCall(task, key, max(0, now_ms - task.created_ms)))
    return Matching(by_status, calls, more, settings.queue, age, error)


# ---- FailedEventsQueue ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueCounts:
    """FailedEventsQueue's approximate counts (GetQueueAttributes): what a read-only board shows."""

    visible: int
    in_flight: int
    delayed: int


def failed_events_counts(board: Board) -> QueueCounts | None:
    """The queue's approximate counts, read without receiving a message (nothing about a message changes)."""
    target = board.failed_events
    if target is None:
        return None
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"]
    found = target.client("sqs").get_queue_attributes(QueueUrl=target.queue_url, AttributeNames=names)["Attributes"]
    return QueueCounts(*(int(found.get(name, 0)) for name in names))


def failed_events(board: Board) -> list[FailedEvent]:
    """The messages, read as ``taskq failed-events`` reads them: received with a short visibility timeout and made
    visible again at once (reading deletes nothing). A read-only board receives nothing: receiving a message
    changes its visibility and its receive count (``failed_events_counts`` instead)."""
    from taskq.failed_events_command import release

    target = board.failed_events
    if target is None or board.read_only:
        return []
    sqs = target.client("sqs")
    messages = [parse(m) for m in receive_all(sqs, target.queue_url, FAILED_EVENTS_SHOWN, 30, 0)]
    release(sqs, target.queue_url, messages)
    return messages


def age_text(ms: int | None) -> str:
    from taskq import output

    return output.age(ms)


def iso_text(ms: int | None) -> str:
    from taskq import output

    return output.iso(ms) or "-"


def shown(values: Sequence[object]) -> str:
    return ", ".join(str(v) for v in values)
