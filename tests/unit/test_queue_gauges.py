"""The queue metrics' pure rules (taskqueue/core/queue_gauges.py): what an index entry counts as, which groups are
noisy, what one run publishes, when a queue publishes at all, and how many groups an hour may cost."""

from __future__ import annotations

from taskqueue.core.queue_gauges import (
    TRAILING_ZEROS_MS,
    Entry,
    Gauge,
    QueueGauges,
    groups_to_publish,
    partition_gauge,
    records,
    should_publish,
)

NOW = 1_000_000_000
LIVE = NOW // 1000 + 600


def test_a_ready_partition_counts_waiting_and_running_and_leaves_out_the_expired():
    entries = [
        Entry(LIVE, None, NOW - 30_000),  # waiting 30 s
        Entry(LIVE, None, NOW - 5_000),
        Entry(LIVE, NOW + 60_000, NOW - 90_000),  # running: its lease marked (never the oldest waiting)
        Entry(NOW // 1000 - 1, None, NOW - 900_000),  # expired: never served
    ]
    gauge = partition_gauge(entries, NOW, delayed=False, complete=True)
    assert (gauge.waiting, gauge.running, gauge.delayed, gauge.age_seconds(NOW)) == (2, 1, 0, 30.0)


def test_a_delayed_partition_counts_due_entries_as_waiting():
    entries = [Entry(LIVE, NOW - 1, NOW - 40_000), Entry(LIVE, NOW + 1, NOW - 50_000)]
    gauge = partition_gauge(entries, NOW, delayed=True, complete=False)
    assert (gauge.waiting, gauge.running, gauge.delayed, gauge.age_seconds(NOW), gauge.complete) == (1, 0, 1, 40.0, False)


def test_gauges_add_up_and_an_empty_one_is_age_zero():
    total = Gauge(1, 2, 3, NOW - 10_000) + Gauge(4, 0, 0, NOW - 20_000, complete=False) + Gauge()
    assert total == Gauge(5, 2, 3, NOW - 20_000, complete=False)
    assert Gauge().values(NOW) == {"OldestTaskAge": 0.0, "TasksWaiting": 0, "TasksRunning": 0, "TasksDelayed": 0}
    assert not Gauge().busy and Gauge(delayed=1).busy


def test_noisy_groups_hold_more_than_the_mean_and_the_rest_are_quiet():
    groups = {"default": Gauge(2, 0), "acme": Gauge(50, 10, oldest_ms=NOW - 5_000), "globex": Gauge(3, 1),
              "initech": Gauge(40, 0), "idle": Gauge(delayed=4, oldest_ms=None)}
    gauges = QueueGauges("work", NOW, Gauge(), groups)
    # mean of the groups with waiting or running tasks: (2 + 60 + 4 + 40) / 4 = 26.5
    assert gauges.noisy() == ["acme", "initech"] and gauges.noisy(top=1) == ["acme"]
    assert gauges.quiet() == Gauge(5, 1, 4)
    assert QueueGauges("work", NOW, Gauge(), {"a": Gauge(9), "b": Gauge(9)}).noisy() == []  # a fair share: none
    assert QueueGauges("work", NOW, Gauge(), {"a": Gauge(9)}).noisy() == []  # a lone group is not noisy


def test_a_run_publishes_the_queue_and_with_groups_the_quiet_ones_and_the_chosen_noisy_ones():
    plain = records(QueueGauges("work", NOW, Gauge(3, 1, 0, NOW - 2_500)), [])
    assert [(r.dimensions, [v[0] for v in r.values]) for r in plain] == [
        ((("queue", "work"),), ["OldestTaskAge", "TasksWaiting", "TasksRunning", "TasksDelayed"])]
    assert plain[0].values[0] == ("OldestTaskAge", "Seconds", 2.5)
    groups = {"default": Gauge(1), "acme": Gauge(30, 2, oldest_ms=NOW - 8_000), "globex": Gauge(2)}
    grouped = records(QueueGauges("work", NOW, Gauge(33, 2, 0, NOW - 8_000), groups), ["acme"])
    queue, acme = grouped
    names = {name: value for name, _, value in queue.values}
    assert names["NoisyGroups"] == 1 and names["TasksWaitingInQuietGroups"] == 3
    assert acme.dimensions == (("queue", "work"), ("group", "acme"))
    assert dict((n, v) for n, _, v in acme.values) == {"OldestTaskAge": 8.0, "TasksWaiting": 30, "TasksRunning": 2,
                                                        "TasksDelayed": 0}


def test_an_idle_queue_publishes_only_its_trailing_zeros():
    assert should_publish(True, None, NOW)
    assert not should_publish(False, None, NOW)  # never seen busy here: nothing, no metric-hour
    assert should_publish(False, NOW - TRAILING_ZEROS_MS, NOW)
    assert not should_publish(False, NOW - TRAILING_ZEROS_MS - 1, NOW)


def test_new_noisy_groups_stop_at_the_hours_budget():
    assert groups_to_publish(["a", "b", "c", "d"], set(), 3) == ["a", "b", "c"]
    # Six distinct groups an hour for top 3: a group published already this hour is free, a new one is not past six.
    assert groups_to_publish(["g", "a", "h"], {"a", "b", "c", "d", "e", "f"}, 3) == ["a"]
    assert groups_to_publish(["x"], set(), 0) == []
