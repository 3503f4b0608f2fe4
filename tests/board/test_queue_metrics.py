"""The board shows the queue metrics the safety net publishes, and agrees with them: on the same queue, the figures
on the queues page are those the safety net's run emits (oldest waiting age, waiting / running / delayed, the noisy
groups' count and the quiet groups' figures, each noisy group's own), and below the cap they agree with the page's own
counts too (waiting = ready + delayed ones now due, running = taken)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from taskqueue.observe import queue_metrics
from tests.board.support import Browser, create, make_board

pytestmark = pytest.mark.dynamodb_engines


def shown(page: str) -> dict[str, float]:
    return {key: float(value) for key, value in re.findall(r'data-metric="([^"]+)" data-value="([^"]+)"', page)}


def count_of(page: str, key: str) -> int:
    found = re.search(rf'data-count="{re.escape(key)}"[^>]*>([^<]*)<', page)
    assert found, key
    return int(found.group(1).strip())


def published(store) -> dict[str, float]:
    """What the safety net's run emits for each queue, keyed as the page keys them."""
    found: dict[str, float] = {}

    def emit(record) -> None:
        dims = dict(record.dimensions)
        key = dims["queue"] + (f":{dims['group']}" if "group" in dims else "")
        found.update({f"{key}:{name}": value for name, _, value in record.values})

    for queue in store.settings.queue_orders:
        queue_metrics.publish(store, queue, emit=emit, published=queue_metrics.Published())
    return found


def test_the_queues_page_shows_what_the_safety_net_publishes(store, clock, tmp_path: Path):
    create(store, clock.now_ms(), 2, queue="work")
    create(store, clock.now_ms(), 9, queue="work", group="acme")
    clock.advance(25)
    create(store, clock.now_ms(), 1, queue="work", group="globex")
    create(store, clock.now_ms(), 1, queue="work", delaySeconds=300)
    running = create(store, clock.now_ms(), 1, queue="calls", payload={"preferences": {}})
    candidate = next(c for c in store.candidates("calls", 10) if c.task_id == running[0])
    assert store.claim(candidate, "w1") is not None
    clock.advance(5)
    page = Browser(make_board(store, clock, tmp_path / "log")).get("/")
    on_page, emitted = shown(page), published(store)
    assert on_page == emitted
    assert on_page["work:OldestTaskAge"] == 30.0 and on_page["work:TasksWaiting"] == 12
    assert on_page["work:NoisyGroups"] == 1 and on_page["work:acme:TasksWaiting"] == 9
    assert on_page["work:TasksWaitingInQuietGroups"] == 3 and on_page["work:TasksDelayed"] == 1
    assert on_page["calls:TasksRunning"] == 1 and "calls:NoisyGroups" not in on_page
    # The page's own counts agree (below the cap they are exact).
    assert on_page["work:TasksWaiting"] == count_of(page, "work:ready")
    assert on_page["work:TasksDelayed"] == count_of(page, "work:delayed")
    assert on_page["calls:TasksRunning"] == count_of(page, "calls:taken")
