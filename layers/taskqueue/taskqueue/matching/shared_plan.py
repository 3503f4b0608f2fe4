"""Several matchers at once write one plan: the planner publishes it in chunks, every matcher of the pass takes
chunks and writes them (docs/matcher.md, "Why matchers never abort each other").

Why: matchers that each read the snapshot and planned on their own planned apart whenever a read fell between
another's commits (an agent read as idle whose call was already matched went to another call), and their
transactions met; on the serialized engine eight snapshots also cost more than the matches. So one matcher (the
planner) reads and plans, and the plan travels as chunk items of the queue table (``store.matches.MatchPlans``):
one match transaction each, taken with a conditional write, marked done once written.

``SharedPlan`` holds what one Matcher run knows of the plans: how to publish one and take chunks of it, a helper's
wait for plans, and the chunks others took (left out of the planner's next plans until marked done or expired).
Writing a chunk is the Matcher's (``write``: ``Matcher._write_chunk``).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from taskqueue.core.clock import Clock
from taskqueue.matching import pairing
from taskqueue.matching.pairing import Pair, Snapshot
from taskqueue.store import PlanHead, TaskStore

# A shared plan may be taken for this long; then the planner plans its pairs again (a helper that took a chunk and
# died leaves its calls and agents waiting no longer than this).
PLAN_SECONDS = 10.0
# A helper looks for a new plan this often, and stops after this long without one.
PLAN_POLL_SECONDS = 0.2
HELPER_PATIENCE_SECONDS = 3.0


@dataclass(frozen=True)
class _InFlight:
    """A chunk that another matcher took: its calls and agents stay out of the planner's plans until it is marked
    written or the plan expires."""

    head: PlanHead
    index: int
    calls: frozenset[str]
    agents: frozenset[str]


class SharedPlan:
    def __init__(self, tasks: TaskStore, queue: str, owner: str, clock: Clock, write: Callable[[list[Pair]], None]) -> None:
        self._tasks = tasks
        self._queue = queue
        self._owner = owner
        self._clock = clock
        self._write = write
        self._in_flight: list[_InFlight] = []

    def publish(self, chunks: Sequence[list[Pair]], deadline: float) -> bool:
        """The planner: publish ``chunks`` (one match transaction each) and write chunks of them like any matcher,
        the oldest calls' first. ``True`` if other matchers took some (their pairs are then left out of the next
        plans until written)."""
        head = PlanHead(f"{self._owner}#{uuid.uuid4().hex[:12]}", len(chunks),
                        self._clock.now_ms() + int(PLAN_SECONDS * 1000))
        self._tasks.publish_plan(self._queue, head, [pairing.encode_chunk(c) for c in chunks])
        taken = self.work(head, deadline, start=0)
        others = [_InFlight(head, index, frozenset(p.call.task_id for p in chunk), frozenset(p.head.agent_id for p in chunk))
                  for index, chunk in enumerate(chunks) if index not in taken]
        self._in_flight += others
        return bool(others)

    def help(self, deadline: float, paused: Callable[[], bool]) -> tuple[str, int]:
        """A helper: take chunks of each new plan and write them, until no new plan comes for
        HELPER_PATIENCE_SECONDS. Why it stopped (``no-progress``, ``budget``, ``paused``) and how many plans it
        worked on."""
        seen: set[str] = set()
        waiting_since = self._clock.monotonic()
        while True:
            if self._clock.monotonic() >= deadline:
                return "budget", len(seen)
            head = self._tasks.read_plan(self._queue)
            if head is not None and head.plan_id not in seen and head.expires_ms > self._clock.now_ms():
                if paused():
                    return "paused", len(seen)
                seen.add(head.plan_id)
                self.work(head, deadline)
                waiting_since = self._clock.monotonic()
                continue
            if self._clock.monotonic() - waiting_since >= HELPER_PATIENCE_SECONDS:
                return "no-progress", len(seen)
            self._clock.sleep(PLAN_POLL_SECONDS)

    def work(self, head: PlanHead, deadline: float, start: int | None = None) -> set[int]:
        """Take chunks of plan ``head`` from ``start`` on (a helper: a place given by its id, so that matchers
        spread over the chunks), write each and mark it done; the indices taken."""
        if start is None:
            start = int.from_bytes(hashlib.blake2b(self._owner.encode(), digest_size=4).digest(), "big") % head.chunks
        taken: set[int] = set()
        for step in range(head.chunks):
            if self._clock.monotonic() >= deadline:
                break
            index = (start + step) % head.chunks
            text = self._tasks.take_chunk(self._queue, head, index, self._owner)
            if text is None:
                continue  # another matcher's, or a newer plan replaced it
            taken.add(index)
            self._write(pairing.decode_chunk(text, self._queue))
            self._tasks.finish_chunk(self._queue, head, index)
        return taken

    def without_in_flight(self, snapshot: Snapshot) -> tuple[Snapshot, bool]:
        """The snapshot less the calls and agents of chunks others took and have not marked written (until their
        plan expires), and whether any of them was still there. Reads the chunks' marks (one BatchGetItem per plan)
        only when the snapshot still shows some of their pairs."""
        now = self._clock.now_ms()
        self._in_flight = [f for f in self._in_flight if f.head.expires_ms > now]
        calls = {w.call.task_id for w in snapshot.waiting}
        agents = {a.agent_id for a in snapshot.agents}
        if not any(f.calls & calls or f.agents & agents for f in self._in_flight):
            self._in_flight = []
            return snapshot, False
        done = {head.plan_id: self._tasks.chunks_done(self._queue, head) for head in {f.head for f in self._in_flight}}
        self._in_flight = [f for f in self._in_flight if f.index not in done[f.head.plan_id]]
        held_calls = calls & {c for f in self._in_flight for c in f.calls}
        held_agents = agents & {a for f in self._in_flight for a in f.agents}
        return snapshot.without(held_calls, held_agents), bool(held_calls or held_agents)
