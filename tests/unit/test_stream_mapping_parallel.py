"""The local engine's DynamoDB event source mapping delivers up to ParallelizationFactor batches of its shard at once
(ProcessTasks' TaskStream: a batch runs its tasks before it returns, so one long task must not hold back the next)."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from local.delivery.sandbox import Invocation
from local.delivery.stream_mapping import StreamMapping


class BlockingPool:
    """A function whose invocations wait until released; counts how many run at once."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.spec = SimpleNamespace(name="fn")

    def try_invoke(self, event: dict) -> Invocation:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        self.release.wait(5)
        with self.lock:
            self.running -= 1
        return Invocation("fn", "req", ok=True, result=None)


def record(n: int) -> dict:
    return {"eventName": "INSERT", "dynamodb": {"SequenceNumber": str(n), "NewImage": {"taskId": {"S": f"t{n}"}}}}


@pytest.mark.parametrize(("factor", "expected"), [(1, 1), (3, 3)])
def test_batches_in_flight_at_once_are_at_most_the_parallelization_factor(factor, expected):
    pool = BlockingPool()
    props = {"Stream": "arn", "BatchSize": 1, "ParallelizationFactor": factor}
    mapping = StreamMapping("fn", pool, props, 1.0, lambda destination, body: None)  # type: ignore[arg-type]
    try:
        mapping.consume([record(n) for n in range(5)])
        deadline = time.monotonic() + 2
        while pool.most < expected and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)  # time for a batch more than allowed to start, if the mapping would
        assert pool.most == expected
        pool.release.set()
        while mapping.pending() and time.monotonic() < deadline + 3:
            time.sleep(0.01)
        assert mapping.pending() == 0 and mapping.stats["records_delivered"] == 5
    finally:
        pool.release.set()
        mapping.stop()
