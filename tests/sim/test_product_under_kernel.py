"""The product's own store code run by the kernel on the fake DynamoDB: workers racing for tasks claim each once,
and a seed replays the run step for step, in this process and in another with another PYTHONHASHSEED."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from typing import Any

from sim.dynamodb import FakeDynamoDB
from sim.kernel import Kernel
from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.core.settings import Settings
from taskqueue.core.states import TaskStatus
from taskqueue.store import TaskStore
from tests.support import ROOT

TABLE = "sim-queue"


def claim_race(seed: int, workers: int = 4, tasks: int = 12) -> dict[str, Any]:
    """A producer and ``workers`` worker invocations (clocks skewed up to a second) claiming and completing
    ``tasks`` tasks on one fake table."""
    with Kernel(seed) as kernel:
        db = FakeDynamoDB.from_template({"QueueTable": TABLE}, kernel)
        settings = Settings(queue_table_name=TABLE, retry_base_seconds=0.0)
        claims: list[tuple[str, str]] = []

        def produce() -> None:
            store = TaskStore(db, settings, kernel.clock)
            for _ in range(tasks // 3):
                body = {"queue": "work", "count": 3, "ttlSeconds": 600, "payload": {}}
                store.put_tasks(new_tasks(parse_create_request(body, settings), kernel.clock.now_ms(), settings))
                kernel.sleep(0.05)

        def work(owner: str, skew_ms: int) -> Any:
            def run() -> None:
                store = TaskStore(db, settings, kernel.clock_for(skew_ms))
                idle = 0
                while idle < 3:
                    found = store.candidates("work", 3)
                    idle = 0 if found else idle + 1
                    for candidate in found:
                        task = store.claim(candidate, owner)
                        if task is not None:
                            claims.append((owner, task.task_id))
                            store.complete(task, owner, {"by": owner})
                    kernel.sleep(0.02)

            return run

        kernel.invoke(produce, "producer")
        for index in range(workers):
            kernel.invoke(work(f"w{index}", kernel.rng.randrange(-1000, 1000)), f"worker-{index}")
        kernel.run()
        statuses = sorted(item["taskStatus"]["S"] for item in db.items(TABLE))
        assert kernel.trace is not None
        return {"trace": kernel.trace, "claims": claims, "statuses": statuses, "steps": kernel.steps,
                "now": kernel.now}


def digest(seed: int) -> str:
    run = claim_race(seed)
    return hashlib.sha256(json.dumps([run["trace"], run["claims"]]).encode()).hexdigest()


def test_racing_workers_claim_each_task_once_and_finish_it() -> None:
    run = claim_race(1)
    claimed = [task for _, task in run["claims"]]
    assert len(claimed) == 12 and len(set(claimed)) == 12
    assert run["statuses"] == [TaskStatus.SUCCESS.value] * 12
    assert len({owner for owner, _ in run["claims"]}) > 1  # the work was shared: they did race


def test_a_seed_replays_the_product_step_for_step() -> None:
    first, second = claim_race(3), claim_race(3)
    assert first["trace"] == second["trace"] and first["claims"] == second["claims"]
    assert claim_race(4)["claims"] != first["claims"]


def test_a_seed_replays_in_another_process_with_another_hash_seed() -> None:
    script = "import sys; from tests.sim.test_product_under_kernel import digest; print(digest(5))"
    outputs = set()
    for hash_seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed,
               "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "layers" / "taskqueue")])}
        done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        outputs.add(done.stdout.strip())
    assert outputs == {digest(5)}
