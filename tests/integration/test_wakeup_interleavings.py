"""Every interleaving of two producers and a stopping worker through the wake-up handshake, enumerated on the real
store (moto): none leaves a task that a producer has written and reported on with nobody to take it.

The scope, small enough to try every order (90 of them): a worker watches the queue (woken a while ago, so the
index's lag allowance does not hold it back) and does its last two steps, an empty look at the index and its
conditional stop; each of two producers writes a task and then touches the record (and acts on what it reads:
nothing, or claim + publish a wake-up). Each step is one request, atomic on DynamoDB, so these interleavings are
all the orders the real system can take. After all steps: every task is claimed, or the worker still watches
(and will look again), or a wake-up was published.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator

import boto3
import pytest
from moto import mock_aws

from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.core.settings import Settings
from taskqueue.store import TaskStore
from taskqueue.wakeups.producer import ProducerHandshake
from taskqueue.wakeups.watch import STOPPED, Watch
from tests.support import FakeClock, create_queue_table


class Published:
    """The Notifier's face: counts the wake-ups published."""

    def __init__(self) -> None:
        self.count = 0

    def send_wakeup(self, queue: str, reason: str, correlation: object = None) -> str:
        self.count += 1
        return "published"


class World:
    def __init__(self, client) -> None:
        table = f"interleave-{uuid.uuid4().hex[:8]}"
        create_queue_table(client, table)
        self.clock = FakeClock()
        self.store = TaskStore(client, Settings(queue_table_name=table), self.clock)
        self.sns = Published()
        self.handshake = ProducerHandshake(self.store, self.sns, self.clock)  # type: ignore[arg-type]
        # A worker that a wake-up started a while ago: it watches, and its last look may count for a stop.
        self.watch = Watch(self.store, "work", "worker", self.clock)
        assert self.watch.begin()
        self.clock.advance(5)
        self.written: dict[str, str] = {}  # producer -> its task id
        self.touched: set[str] = set()
        self.claimed: set[str] = set()
        self.empty_look: int | None = None
        self.stopped = False

    def write(self, producer: str) -> None:
        (task,) = new_tasks(parse_create_request({"queue": "work"}, self.store.settings), self.clock.now_ms(), self.store.settings)
        self.store.put_tasks([task])
        self.written[producer] = task.task_id

    def touch(self, producer: str) -> None:
        self.handshake.after_write("work")
        self.touched.add(self.written[producer])

    def look(self) -> None:
        started = self.clock.now_ms()
        found = self.store.candidates("work", 100)
        for candidate in found:
            if self.store.claim(candidate, "worker") is not None:
                self.claimed.add(candidate.task_id)
        self.empty_look = None if found else started

    def stop(self) -> None:
        if self.empty_look is not None:  # a worker tries to stop only after an empty look
            self.stopped = self.watch.try_stop(self.empty_look) == STOPPED


STEPS: dict[str, list[Callable[[World], None]]] = {
    "producer-1": [lambda w: w.write("p1"), lambda w: w.touch("p1")],
    "producer-2": [lambda w: w.write("p2"), lambda w: w.touch("p2")],
    "worker": [World.look, World.stop],
}


def interleavings() -> Iterator[tuple[str, ...]]:
    """Every order of the actors' steps that keeps each actor's own steps in order."""
    slots = [actor for actor, steps in STEPS.items() for _ in steps]
    yield from sorted(set(itertools.permutations(slots)))


@pytest.fixture
def client():
    with mock_aws():
        yield boto3.client("dynamodb")


def test_every_interleaving_leaves_each_task_claimed_watched_or_woken(client):
    orders = list(interleavings())
    assert len(orders) == 90
    outcomes: dict[str, int] = {"claimed": 0, "still watching": 0, "woken": 0}
    for order in orders:
        world = World(client)
        progress = dict.fromkeys(STEPS, 0)
        for actor in order:
            STEPS[actor][progress[actor]](world)
            progress[actor] += 1
        left = world.touched - world.claimed
        assert not left or world.watch.watching or world.sns.count > 0, (
            f"order {order}: {len(left)} task(s) written and reported, the worker stopped, no wake-up published")
        assert not world.stopped or not world.watch.watching
        outcomes["claimed" if not left else "still watching" if world.watch.watching else "woken"] += 1
    # Every way out is taken by some order: the test reaches the cases it is about.
    assert all(outcomes.values()), outcomes
