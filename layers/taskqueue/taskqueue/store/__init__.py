"""The queue table's one adapter, ``TaskStore``: the only code that talks to DynamoDB about tasks.

One concern per module: ``table`` (request plumbing, batched reads and writes, creating tasks), ``finding``
(how workers find work: the claimable tasks in the queue's order, what a look reads, shedding), ``claims`` (what
workers do with it: claim, renew, finish, release, recover), ``operator`` (cancel, reprioritize, touch,
redrive), ``reading`` (listings and counts), ``counts`` (depth by state from COUNT queries alone), ``control``
(per-queue pause and the queue-wide running limit), ``matches`` (the Matcher's reads of waiting calls, the
write that matches one, and the plan it shares with other matchers), ``groups`` (fair share's ring of groups, their settings and limits), ``group_views`` (what an operator sees of
each group: waiting, running, oldest age, limits), ``record`` (reading the queue's record, the
same control item), ``delayed_head`` (the queue's delayed head, on it too), ``gauges`` (the queue metrics'
bounded reads) and ``workflows`` / ``workflow_fan_out`` (a workflow's creation, cancel and reads; what a task's end
does to the tasks waiting for it); ``dynamo`` sends every request
(conflict retry, error translation; the agent table's adapter uses it too). ``TaskStore`` joins them; import
everything from ``taskqueue.store``. May import core only.
"""

from __future__ import annotations

from taskqueue.core.fairness import FairTurn
from taskqueue.store.claims import WorkerTransitions
from taskqueue.store.control import QueueControl, QueueControls, Token
from taskqueue.store.counts import Counts, QueueDepth
from taskqueue.store.delayed_head import DelayedHeads
from taskqueue.store.dynamo import count_all, make_client
from taskqueue.store.gauges import QueueGaugeReads
from taskqueue.store.group_views import GroupsView, GroupView, GroupViews
from taskqueue.store.matches import CallFacts, MatchPlans, MatchTransitions, PlanHead
from taskqueue.store.operator import OperatorOperations
from taskqueue.store.reading import LISTABLE_BY_INDEX, QueueStats, Reading, TaskPage
from taskqueue.store.record import PlannerLeases, QueueRecords
from taskqueue.store.table import (
    READY_INDEX,
    STATUS_INDEX,
    Candidate,
    CreateResult,
    QueueTable,
    StoreError,
    candidate_of,
    is_claimable,
)
from taskqueue.store.workflows import WorkflowRecord, WorkflowStore, WorkflowTaskView, record_of

__all__ = [
    "LISTABLE_BY_INDEX",
    "PlanHead",
    "READY_INDEX",
    "STATUS_INDEX",
    "CallFacts",
    "FairTurn",
    "GroupView",
    "GroupsView",
    "Candidate",
    "CreateResult",
    "QueueControl",
    "QueueDepth",
    "QueueStats",
    "QueueTable",
    "StoreError",
    "TaskPage",
    "TaskStore",
    "Token",
    "WorkflowRecord",
    "WorkflowTaskView",
    "record_of",
    "candidate_of",
    "count_all",
    "is_claimable",
    "make_client",
]


class TaskStore(
    WorkerTransitions, MatchTransitions, MatchPlans, OperatorOperations, GroupViews, Counts, QueueGaugeReads, Reading, QueueControls, QueueRecords,
    PlannerLeases, DelayedHeads, WorkflowStore,
):
    """Every operation on the queue table (see the modules of this package for each concern)."""
