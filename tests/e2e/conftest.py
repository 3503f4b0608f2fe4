"""Fixtures for end-to-end tests: real handlers on the local engine (serialized moto, scaled time)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from local.engine.engine import REPO, Engine
from local.scenarios.demo_defaults import RUNNER

# Fast defaults: short runner, short budgets, no schedules unless asked; the template's start path (no reserved
# concurrency, the tables' streams start the workers); the fake legacy system as the runner (the template names none).
FAST = {
    **RUNNER,
    "FakeRunnerDurationSeconds": 0.3,
    "RunnerCapacity": 3,
    "TimeBudgetSeconds": 3,
}
TIME_SCALE = 0.3  # template seconds -> real seconds for schedules, batching windows, async retry delays


@pytest.fixture
def start_engine() -> Iterator[Callable[..., Engine]]:
    engines: list[Engine] = []

    def start(overrides: dict[str, Any] | None = None, *, template: Path | None = None, schedules: bool = False,
              time_scale: float = TIME_SCALE, **kwargs: Any) -> Engine:
        engine = Engine(template or REPO / "template.yaml", {**FAST, **(overrides or {})}, time_scale=time_scale,
                        schedules=schedules, ttl_lateness=1.0, ttl_interval=0.5, **kwargs)
        engines.append(engine)
        return engine.start()

    yield start
    for engine in engines:
        engine.stop()


@pytest.fixture
def template_copy(tmp_path: Path) -> Callable[[Callable[[str], str]], Path]:
    """A copy of template.yaml, edited by ``edit``, beside links to the real code (CodeUri stays valid)."""

    def make(edit: Callable[[str], str]) -> Path:
        for name in ("functions", "layers", "runner"):
            (tmp_path / name).symlink_to(REPO / name, target_is_directory=True)
        original = (REPO / "template.yaml").read_text()
        edited = edit(original)
        assert edited != original, "the edit changed nothing: the test would prove nothing"
        path = tmp_path / "template.yaml"
        path.write_text(edited)
        return path

    yield make
    shutil.rmtree(tmp_path, ignore_errors=True)


def settled(engine: Engine) -> bool:
    """Every task created so far is finished or shed, and nothing is in flight."""
    counts = engine.observer.counts()
    return counts["created"] > 0 and counts["PENDING"] == 0 and counts["TAKEN"] == 0 and not engine.busy()


def table_items(engine: Engine) -> dict[str, dict[str, Any]]:
    name = engine.template.resolver.refs["QueueTable"]
    items: dict[str, dict[str, Any]] = {}
    kwargs: dict[str, Any] = {"TableName": name, "ConsistentRead": True}
    while True:
        page = engine.ddb.scan(**kwargs)
        for item in page["Items"]:
            if "taskStatus" in item:  # not the queue's control items (claim lanes, running-limit slots, pause)
                items[item["taskId"]["S"]] = item
        if "LastEvaluatedKey" not in page:
            return items
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def invocations(engine: Engine, function: str, source: str | None = None) -> list[dict[str, Any]]:
    return [i for i in engine.invocations if i["function"] == function and (source is None or i["source"] == source)]


def queue_stream_mapping(engine: Engine, function: str = "ProcessTasksFunction") -> Any:
    """A worker's event source mapping on the queue table's stream (ProcessTasks' TaskStream, the Matcher's CallStream)."""
    arn = engine.template.resolver.attrs["QueueTable.StreamArn"]
    return next(m for m in engine.mappings if m.function == function and m.stream_arn == arn)
