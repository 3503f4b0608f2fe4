"""What every schedule with workflows must keep (docs/simulation.md, "Workflows"), judged from the queue table's stream
in commit order (every write of a task or of a workflow's record, as it applied), against what the producer asked for
(``sim.workflow_actors.Sent``: each task's dependencies and their policies), never against the product's own rules:

- ``dependency-order``: no task is made PENDING, claimed (TAKEN) or skipped (SUCCESS out of WAITING) before each of
  its dependencies ended.
- ``waits-forever``: at quiescence no task is WAITING whose dependencies all ended.
- ``leaves-waiting-once``: a task that was WAITING leaves WAITING once, and never comes back to it.
- ``failure-policy``: a task made ready has no dependency whose end its policy says fails it; a task that ends out of
  WAITING without running (FAILURE or CANCELLED) has one, ends as the table says (docs/workflows.md, "Failure
  policies": FAILURE for a failed dependency, CANCELLED for a cancelled or shed one), names it in its last error and
  its ``blockedBy``; at quiescence none still waits for a dependency that ended so (transitively: each level is a
  task of its own).
- ``on-failure``: a workflow's on-failure task is made ready (runs) exactly when one of its other tasks did not end
  SUCCESS; else it ends SUCCESS unrun.
- ``all-or-nothing``: no task of a workflow is PENDING or claimed while its record is not RUNNING (a creation that
  crashed before its final write shows nothing that can run); at quiescence every workflow whose record is RUNNING has
  all its tasks.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from sim.invariants import CHECK_S, TERMINAL, Invariants
from sim.workflow_actors import Sent, WorkflowProducer

WAITING = "WAITING"
LIVE = frozenset({"PENDING", "TAKEN"})
# What a dependency's end does under each policy (docs/workflows.md's table): None counts, else the dependent's end.
_BLOCKS: dict[tuple[str, str], str] = {
    ("FAILURE", "fail"): "FAILURE", ("CANCELLED", "fail"): "CANCELLED", ("SHED", "fail"): "CANCELLED",
    ("FAILURE", "ignore-cancelled"): "FAILURE",
}


def blocks(end: str, policy: str) -> str | None:
    """The end a dependency's ``end`` gives its dependent under ``policy``; None: it counts (the dependent may run)."""
    return _BLOCKS.get((end, policy))


@dataclass
class WorkflowInvariants:
    invariants: Invariants
    producer: WorkflowProducer
    status: dict[str, str] = field(default_factory=dict)
    records: dict[str, str] = field(default_factory=dict)  # workflow id -> its record's wfState
    exits: Counter[str] = field(default_factory=Counter)  # task id -> times it left WAITING
    readied: set[str] = field(default_factory=set)  # made PENDING (or TAKEN) at least once
    position: int = 0
    blocked: int = 0  # tasks that ended out of WAITING unrun

    def start(self) -> None:
        self.invariants.world.kernel.call_later(CHECK_S, self._tick)

    def _tick(self) -> None:
        self.read_stream()
        self.invariants.world.kernel.call_later(CHECK_S, self._tick)

    def fail(self, invariant: str, detail: str) -> None:
        self.invariants.fail(invariant, detail)

    # ---- each write, in commit order --------------------------------------------------------------------------

    def read_stream(self) -> None:
        world = self.invariants.world
        log = world.db.streams[world.settings.queue_table_name]
        records = log.records[self.position:]
        self.position += len(records)
        for record in records:
            body = record["dynamodb"]
            item_id = body["Keys"]["taskId"]["S"]
            image = body.get("NewImage")
            if item_id.startswith("wf#") and item_id.count("#") == 1:
                if image is not None and "wfState" in image:
                    self.records[item_id[3:]] = image["wfState"]["S"]
                continue
            sent = self.producer.of_task(item_id)
            if sent is None or item_id not in sent.deps or image is None or "taskStatus" not in image:
                continue
            self._changed(sent, item_id, image)

    def _changed(self, sent: Sent, task_id: str, image: dict[str, Any]) -> None:
        new, old = image["taskStatus"]["S"], self.status.get(task_id)
        self.status[task_id] = new
        if new == old:
            return
        if new in LIVE and self.records.get(sent.workflow_id) != "RUNNING":
            self.fail("all-or-nothing", f"task {task_id} is {new} while its workflow's record is "
                      f"{self.records.get(sent.workflow_id, 'absent')}")
        if old == WAITING:
            self.exits[task_id] += 1
            if self.exits[task_id] > 1:
                self.fail("leaves-waiting-once", f"task {task_id} left WAITING {self.exits[task_id]} times "
                          f"(now {new})")
        if new == WAITING and old is not None:
            self.fail("leaves-waiting-once", f"task {task_id} went back to WAITING from {old}")
        deps = sent.deps[task_id]
        if new in LIVE or (new == "SUCCESS" and old == WAITING):
            if new in LIVE:
                self.readied.add(task_id)
            pending = [d for d, _ in deps if self.status.get(d) not in TERMINAL]
            if pending:
                self.fail("dependency-order", f"task {task_id} became {new} (from {old}) while its dependency "
                          f"{pending[0]} is {self.status.get(pending[0], 'absent')}")
            blocking = [(d, p) for d, p in deps if blocks(self.status.get(d, ""), p)]
            if blocking and old == WAITING:
                dep, policy = blocking[0]
                self.fail("failure-policy", f"task {task_id} became {new} though its dependency {dep} ended "
                          f"{self.status.get(dep)} under policy {policy}")
        elif old == WAITING and new in ("FAILURE", "CANCELLED"):
            self._check_blocked(task_id, new, deps, image)

    def _check_blocked(self, task_id: str, new: str, deps: list[tuple[str, str]], image: dict[str, Any]) -> None:
        """A task that ended out of WAITING, unrun: a dependency's end must block it, and it must say which."""
        self.blocked += 1
        by = image.get("blockedBy", {}).get("S")
        error = image.get("lastError", {}).get("S", "")
        named = dict(deps)
        if by not in named or blocks(self.status.get(by, ""), named[by]) is None:
            self.fail("failure-policy", f"task {task_id} ended {new} unrun, blocked by {by!r}, which ended "
                      f"{self.status.get(by or '', 'absent')} under policy {named.get(by or '')}: no policy fails it")
            return
        if blocks(self.status[by], named[by]) != new:
            self.fail("failure-policy", f"task {task_id} ended {new}, but its dependency {by} ended "
                      f"{self.status[by]} under policy {named[by]}: it must end {blocks(self.status[by], named[by])}")
        if repr(by) not in error:
            self.fail("failure-policy", f"task {task_id} ended {new} blocked by {by}, but its last error does not name "
                      f"it: {error[:120]!r}")

    # ---- at quiescence ----------------------------------------------------------------------------------------

    def finish(self) -> None:
        self.read_stream()
        for sent in self.producer.sent.values():
            if self.records.get(sent.workflow_id) == "RUNNING":
                missing = [t for t in sent.task_ids() if t not in self.status]
                if missing:
                    self.fail("all-or-nothing", f"workflow {sent.workflow_id} is RUNNING without its task(s) "
                              f"{', '.join(missing[:3])}")
            for task_id, deps in sent.deps.items():
                if self.status.get(task_id) != WAITING:
                    continue
                blocking = [(d, p) for d, p in deps if blocks(self.status.get(d, ""), p)]
                if blocking:
                    dep, policy = blocking[0]
                    self.fail("failure-policy", f"task {task_id} still WAITING though its dependency {dep} ended "
                              f"{self.status.get(dep)} under policy {policy}")
                elif all(self.status.get(d) in TERMINAL for d, _ in deps):
                    self.fail("waits-forever", f"task {task_id} still WAITING though its dependencies all ended")
            self._check_on_failure(sent)

    def summary(self) -> dict[str, int]:
        """What the schedule exercised: workflows sent and committed, creations sent again or left to the sweep, tasks
        that waited, ended unrun (blocked), failed, on-failure tasks run and skipped."""
        sent = self.producer.sent.values()
        on_failure = [s.on_failure for s in sent if s.on_failure is not None]
        return {
            "workflows": len(self.producer.sent), "committed": sum(1 for v in self.records.values() if v == "RUNNING"),
            "resent": sum(1 for s in sent if s.sends > 1), "left_to_sweep": sum(1 for s in sent if s.left_to_sweep),
            "waited": len(self.exits), "blocked": self.blocked, "failed": sum(1 for v in self.status.values() if v == "FAILURE"),
            "on_failure_ran": sum(1 for t in on_failure if t in self.readied),
            "on_failure_skipped": sum(1 for t in on_failure if t not in self.readied and self.status.get(t) == "SUCCESS"),
        }

    def _check_on_failure(self, sent: Sent) -> None:
        task_id = sent.on_failure
        if task_id is None or self.status.get(task_id) not in TERMINAL:
            return
        others = [t for t in sent.task_ids() if t != task_id]
        if any(self.status.get(t) not in TERMINAL for t in others):
            return  # not every task ended: waits-forever or the existing end checks say why
        failed = [t for t in others if self.status.get(t) != "SUCCESS"]
        ran = task_id in self.readied
        if failed and not ran:
            self.fail("on-failure", f"on-failure task {task_id} ended {self.status[task_id]} unrun though "
                      f"{failed[0]} ended {self.status[failed[0]]}")
        elif not failed and ran:
            self.fail("on-failure", f"on-failure task {task_id} ran though every task of {sent.workflow_id} succeeded")
        elif not failed and self.status[task_id] != "SUCCESS":
            self.fail("on-failure", f"on-failure task {task_id} ended {self.status[task_id]}, not skipped as SUCCESS")
