"""The benchmarks' virtual clock (bench/common.VirtualClock): a replay's waits end."""

from __future__ import annotations

import os

_environment = dict(os.environ)
from bench.common import VirtualClock  # noqa: E402 - imported between the environment's save and its restore

# bench.common sets the benchmarks' environment on import (metrics off, a bench service name): the other tests of this
# process must not run under it.
os.environ.clear()
os.environ.update(_environment)


def test_a_loop_that_waits_out_its_deadline_ends_even_when_what_is_left_is_below_the_floats_resolution():
    """A worker waits ``min(left, ...)`` until its deadline. With a few ulps of a second left, adding them through the
    clock's milliseconds changed nothing: the 2026-11-28 `make bench` replay (seed 2, 1 task/s) spun there forever."""
    clock = VirtualClock()
    clock.sleep(119.14651147460938)
    deadline = clock.monotonic() + 2e-14
    assert deadline > clock.monotonic()
    for _ in range(1000):
        left = deadline - clock.monotonic()
        if left <= 0:
            break
        clock.sleep(left)
    else:
        raise AssertionError(f"the clock never reached its deadline: {left!r} s left")


def test_a_sleep_of_nothing_does_not_move_the_clock():
    clock = VirtualClock()
    before = clock.monotonic()
    clock.sleep(0.0)
    clock.sleep(-1.0)
    assert clock.monotonic() == before
