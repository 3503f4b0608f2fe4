"""The workflow producer of a schedule: ``plan.workflows`` workflows sent as CreateTasks requests (docs/workflows.md),
each a diamond (a -> b, a -> c, (b, c) -> d) or a fan-in (K children -> one parent), with a policy drawn per edge and,
most of the time, an on-failure task. A task's payload may say ``doom``: the runner (``sim.actors.Runner``) fails
every attempt of it, so it ends FAILURE for good and the policies act.

A creation that fails (its invocation crashed at any request, or a request throttled) is sent again, as a client
would, after a few seconds; except, half the time, when the crash left the workflow committed (its record RUNNING):
its start is then left to the safety net's sweep. ``Sent`` is what the invariants (``sim.workflow_invariants``) know
of each workflow: its task ids, each one's dependencies with their policies, its on-failure task.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sim.actors import GROUPS, QUEUE, TTL_SECONDS
from sim.world import World, timeout_of

POLICIES = ("fail", "fail", "ignore-failure", "ignore-cancelled")  # half the edges keep the default
ON_FAILURE_KEY = "on-failure"
DOOM_RATE = 0.2  # a task's share of failing for good
RETRY_S = (1.0, 20.0)
MAX_SENDS = 8


@dataclass
class Sent:
    """A workflow as its producer asked for it: ``deps[task_id]`` its dependencies (task id, policy) in order."""

    workflow_id: str
    request: dict[str, Any]
    deps: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    on_failure: str | None = None
    sends: int = 0
    answered: bool = False  # a CreateTasks invocation for it returned
    left_to_sweep: bool = False  # a crash left it committed, and no retry was sent

    def task_ids(self) -> list[str]:
        return list(self.deps)


def _task_id(workflow_id: str, key: str) -> str:
    return f"{workflow_id}/{key}"


def draw_workflow(world: World, number: int) -> Sent:
    """One workflow's request: its shape, payloads (some doomed), per-edge policies, maybe an on-failure task."""
    rng, plan = world.rng, world.plan
    workflow_id = f"wf-{plan.seed}-{number}"
    if rng.random() < 0.5:
        shape = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}
    else:
        children = [f"k{i}" for i in range(rng.choice([2, 3, 5, 8]))]
        shape = {**{child: [] for child in children}, "p": children}
    tasks: list[dict[str, Any]] = []
    sent = Sent(workflow_id, {})
    for key, names in shape.items():
        task: dict[str, Any] = {"key": key, "payload": {"ms": int(rng.uniform(20, 2_000)),
                                                        "doom": rng.random() < DOOM_RATE}}
        if task["payload"]["doom"]:
            task["maxAttempts"] = 1
        edges: list[Any] = []
        sent.deps[_task_id(workflow_id, key)] = []
        for name in names:
            policy = rng.choice(POLICIES)
            edges.append(name if policy == "fail" and rng.random() < 0.5 else {"key": name, "policy": policy})
            sent.deps[_task_id(workflow_id, key)].append((_task_id(workflow_id, name), policy))
        if edges:
            task["dependsOn"] = edges
        tasks.append(task)
    workflow: dict[str, Any] = {"id": workflow_id, "tasks": tasks}
    if rng.random() < 0.7:
        workflow["onFailure"] = {"key": ON_FAILURE_KEY, "payload": {"ms": 50}}
        sent.on_failure = _task_id(workflow_id, ON_FAILURE_KEY)
        sent.deps[sent.on_failure] = [(other, "on-failure") for other in list(sent.deps)]
    request: dict[str, Any] = {"queue": QUEUE, "ttlSeconds": TTL_SECONDS, "maxAttempts": 3, "workflow": workflow}
    if plan.group_concurrency is not None or plan.pauses:
        request["group"] = rng.choice(GROUPS)
    sent.request = request
    return sent


class WorkflowProducer:
    """Sends each of ``plan.workflows`` workflows at a time spread over the plan's minutes; ``sent`` by id."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.sent: dict[str, Sent] = {}

    def start(self) -> None:
        world = self.world
        for number in range(world.plan.workflows):
            sent = draw_workflow(world, number)
            self.sent[sent.workflow_id] = sent
            world.kernel.call_at(world.rng.uniform(0, world.plan.minutes * 60), lambda s=sent: self._send(s))

    def of_task(self, task_id: str) -> Sent | None:
        return self.sent.get(task_id.split("/", 1)[0]) if "/" in task_id else None

    def _send(self, sent: Sent) -> None:
        world = self.world
        sent.sends += 1
        app = world.create_tasks
        world.log(f"workflow {sent.workflow_id} sent (attempt {sent.sends})")
        world.invoke("CreateTasks", lambda svc, _r, name: app.handle(sent.request, svc, name),
                     timeout_of("CreateTasksFunction"), done=lambda error: self._ended(sent, error))

    def _ended(self, sent: Sent, error: BaseException | None) -> None:
        world = self.world
        if error is None:
            sent.answered = True
            return
        if sent.sends >= MAX_SENDS:
            world.log(f"workflow {sent.workflow_id}: gave up after {sent.sends} sends")
            return
        if self.committed(sent.workflow_id) and world.rng.random() < 0.5:
            sent.left_to_sweep = True
            world.log(f"workflow {sent.workflow_id}: committed before its creator failed; its start is the sweep's")
            return
        world.kernel.call_later(world.rng.uniform(*RETRY_S), lambda: self._send(sent))

    def committed(self, workflow_id: str) -> bool:
        """Whether the workflow's record is RUNNING now (read from the fake's items, not through a request)."""
        item = record_item(self.world, workflow_id)
        return item is not None and item.get("wfState", {}).get("S") == "RUNNING"


def record_item(world: World, workflow_id: str) -> dict[str, Any] | None:
    for item in world.db.items(world.settings.queue_table_name):
        if item["taskId"]["S"] == f"wf#{workflow_id}":
            return item
    return None
