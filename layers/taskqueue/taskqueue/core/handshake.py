"""The wake-up handshake's rules (pure): what a producer does after it writes, and when a worker may stop.

One record per queue (the queue's control item, ``queue#<name>``) decides it, with strongly consistent,
conditional writes (docs/wakeups.md has the argument):

- a producer, after writing its tasks, *touches* the record (``seq`` + 1, ``lastWrite`` = now) and reads back
  the whole record in the same write. If a worker watches the queue (``watcher`` with an unexpired
  ``watchUntil``), the producer is done: that worker cannot stop without seeing ``seq`` move. If a wake-up is
  already in flight (``wakeSent`` within WAKE_IN_FLIGHT_SECONDS), done too. Otherwise it claims the wake-up
  (a conditional write that only one producer wins) and publishes it;
- a woken worker becomes the watcher; it may stop only by a conditional write that holds while ``seq`` is
  the value it last saw and only after an empty look at the index that began at least the index's lag
  allowance after that value's ``lastWrite`` (a GSI shows writes late). If the condition fails, something
  arrived: it looks again.

So a producer that has just written and a worker deciding to stop can never both assume the other will act:
their writes to one item are ordered, and whichever comes second sees the first.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

# A global secondary index shows a write late, "typically within a fraction of a second": a worker's empty
# look counts for a stop only if it began at least this long after the last producer's write it knows of.
INDEX_LAG_ALLOWANCE_SECONDS = 1.0
# A watcher's claim on its queue lapses this long after its last renewal: a worker that dies (Lambda kills on
# Timeout and OOM without a word) is trusted at most this long, then the next producer wakes a new worker.
WATCH_LEASE_SECONDS = 5.0
# A live watcher renews its watch this often, whatever its runner does (idle, busy, full): about three renewals
# may fail (throttling, a slow request) before the lease lapses. One UpdateItem of a small item: 2,400 write
# units per worker-hour ($0.0015 on demand). Each renewal returns the record, so it also tells of new writes.
# Issue 29 tried half the lease (2.5 s, 40 % fewer writes): the stream's backstop can tell a dead watcher only once it
# has missed a renewal, so a longer period leaves a write made just after a death to the next backstop for longer
# (bench/pickup_realtime.py --busy, the killed case). Kept at 1.5 s; the running-limit slots renew at half their lease.
WATCH_RENEW_SECONDS = 1.5
# The longest a worker's loop goes without a look (its waits are at most a second), which bounds how late a due
# renewal is made.
ROUND_SECONDS = 1.0
# A producer's clock may be off: the client runs on any host. ``lastWrite`` and ``wakeSent`` are stamped with it,
# so a worker trusts ``lastWrite`` only within this much (``stop_look_due_ms``); see docs/wakeups.md, "Clocks".
PRODUCER_CLOCK_SKEW_SECONDS = 5.0
# A wake-up a producer sent is trusted this long (SNS delivery and a Lambda start, cold ones included);
# after that, the next producer (or the stream, or the safety net) wakes the queue again.
WAKE_IN_FLIGHT_SECONDS = 10.0
# A producer may reuse a read of the record that showed an index-looking watcher, not stopping, that allows it
# (``readReuse``), for this long after the read began, instead of reading again for each request: one process sending
# many one-task requests reads the queue's record twice a second, not per request (one item serves ~3,000 strongly
# consistent reads a second: issue 29's scale). The watcher pays for it: the last look of its stop begins this much
# later (a write a producer made under a reused read came before the read's start plus this), and so does the look
# after a run's end. So a watcher allows it only while its run claims READ_REUSE_MIN_CLAIMS_PER_SECOND or more.
READ_REUSE_SECONDS = 0.5
READ_REUSE_MIN_CLAIMS_PER_SECOND = 4.0
# A watcher waiting for new work (lingering on an empty queue, or with a free slot while its tasks run) peeks at the
# index every LINGER_POLL_SECONDS, or sooner on a fast queue: about POLL_ARRIVALS arrivals apart at the rate its run has
# claimed (at least a second counted), never sooner than FASTEST_POLL_SECONDS. At 100 tasks/s a 0.5 s wait let some 50
# tasks pile up between looks, served newest first, so the oldest waited over a second (the invocation model's p95
# at 100 tasks/s was 1.0-1.2 s); a peek is one query of half a read unit, so faster peeks cost well under a cent per
# million tasks there. At 10 tasks/s and below the pace is unchanged.
LINGER_POLL_SECONDS = 0.5
POLL_ARRIVALS = 5.0
FASTEST_POLL_SECONDS = 0.05


def poll_seconds(claimed: int, run_seconds: float) -> float:
    """How long a watcher waits between looks for new work, its run having claimed ``claimed`` tasks in
    ``run_seconds``."""
    rate = claimed / max(1.0, run_seconds)
    if rate <= 0:
        return LINGER_POLL_SECONDS
    return min(LINGER_POLL_SECONDS, max(FASTEST_POLL_SECONDS, POLL_ARRIVALS / rate))


@dataclass(frozen=True)
class WakeRecord:
    """A queue's handshake state, as one strongly consistent read or write returned it."""

    seq: int = 0
    last_write_ms: int = 0
    watcher: str | None = None
    watch_until_ms: int = 0
    wake_sent_ms: int | None = None
    paused: bool = False
    # The queue's delayed head (taskqueue.core.delayed_head), kept on the same item so every read of the record carries it.
    delayed_head_ms: int | None = None
    delayed_seq: int = 0
    delayed_at_ms: int = 0
    # When the queue's scheduled wake-up at its delayed head fires (taskqueue.core.wake_schedule); None: none set.
    wake_at_ms: int | None = None
    # Set once a producer put a group on the queue's ring (taskqueue.core.fairness): until then a look reads no ring.
    has_groups: bool = False
    # The watcher looks at the index itself for new work (ProcessTasks; not the Matcher, whose work is also agents):
    # producers that find it watching, and not stopping, need not touch the record (``touch_needed``).
    index_looks: bool = False
    # When the watcher began to stop (its clock; None: it is not stopping): from then on producers touch the record.
    stopping_ms: int | None = None
    # The watcher lets producers reuse this read for READ_REUSE_SECONDS (``reuse_allows``).
    read_reuse: bool = False

    def watched(self, now_ms: int) -> bool:
        """Does a live worker watch the queue (it will see any write before it stops)?"""
        return self.watcher is not None and self.watch_until_ms > now_ms

    def wake_in_flight(self, now_ms: int, window_ms: int = int(WAKE_IN_FLIGHT_SECONDS * 1000)) -> bool:
        return self.wake_sent_ms is not None and now_ms - self.wake_sent_ms < window_ms


class ProducerStep(StrEnum):
    """What a producer does after touching the record; the value is what it reports (logs, CreateTasks' answer)."""

    WATCHED = "watched"  # a worker watches the queue: nothing to do
    IN_FLIGHT = "in-flight"  # another wake-up is on its way
    PAUSED = "paused"  # the queue is paused: `taskq resume` wakes it
    WAKE = "wake"  # nobody will look: claim the wake-up and publish it


def touch_needed(record: WakeRecord, now_ms: int) -> bool:
    """Must a producer that has just written, and read ``record`` strongly consistently after its write, touch it?

    Not when a live watcher that looks at the index itself watches and has not begun to stop: that watcher stops only
    in two steps (``stopping`` set, then an empty look that begins the index's lag allowance later, then the
    conditional stop), so a write made before a read that found no ``stopping`` is in the index by its last look.
    Anything else (no watcher, a stopping one, a Matcher, a paused queue, a wake-up in flight): the touch decides,
    as before (docs/wakeups.md, "Why no wake-up is lost")."""
    return not (record.index_looks and record.stopping_ms is None and not record.paused and record.watched(now_ms))


def reuse_allows(record: WakeRecord, read_started_s: float, now_s: float, now_ms: int) -> bool:
    """May a producer that has just written skip its read, on the strength of ``record``, read (strongly consistently)
    in a request that began at ``read_started_s`` (its monotonic clock; ``now_s`` on the same clock)? Only while the
    read is younger than READ_REUSE_SECONDS and showed a watcher that allows it and needs no touch: that watcher's
    stop waits READ_REUSE_SECONDS more after ``stopping``, so a write made now is in the index by its last look."""
    return record.read_reuse and now_s - read_started_s < READ_REUSE_SECONDS and not touch_needed(record, now_ms)


def producer_step(record: WakeRecord, now_ms: int) -> ProducerStep:
    if record.paused:
        return ProducerStep.PAUSED
    if record.watched(now_ms):
        return ProducerStep.WATCHED
    if record.wake_in_flight(now_ms):
        return ProducerStep.IN_FLIGHT
    return ProducerStep.WAKE


# A live watcher's lease never has less than this left between renewals (WATCH_LEASE_SECONDS - WATCH_RENEW_SECONDS,
# less half a second for a slow renewal): a watch with less has missed a renewal (its worker died, or is stalled).
LAPSE_SUSPECTED_SECONDS = WATCH_LEASE_SECONDS - WATCH_RENEW_SECONDS - 0.5


def lapse_suspected(record: WakeRecord, now_ms: int, below_seconds: float = LAPSE_SUSPECTED_SECONDS) -> bool:
    """Does a watched queue's watcher look dead: its lease has less left than a live watcher ever lets it have? The
    stream's backstop then waits for the lease to end and looks again, instead of trusting it (docs/wakeups.md)."""
    return record.watched(now_ms) and record.watch_until_ms - now_ms < below_seconds * 1000


def stop_look_due_ms(
    seen: WakeRecord,
    lag_seconds: float = INDEX_LAG_ALLOWANCE_SECONDS,
    seen_at_ms: int | None = None,
    skew_seconds: float = PRODUCER_CLOCK_SKEW_SECONDS,
) -> int:
    """The earliest time (epoch ms) an empty look at the index may begin and still count for a stop: every
    task written before ``seen``'s last touch shows in the index by then.

    ``lastWrite`` is the producer's clock. With ``seen_at_ms`` (when this worker, on its own clock, first read
    ``seen``'s ``seq``: the write was made before that), the write is bounded by the earlier of two times that are
    both after it whatever the producer's clock says within ``skew_seconds``: ``seen_at_ms``, and ``lastWrite`` plus
    the skew. Without it, ``lastWrite`` is taken as it is."""
    if seen_at_ms is None:
        written_by = seen.last_write_ms
    else:
        written_by = min(seen_at_ms, seen.last_write_ms + int(skew_seconds * 1000))
    return written_by + int(lag_seconds * 1000)


def renewal_due(
    watch_until_ms: int, now_ms: int, lease_seconds: float = WATCH_LEASE_SECONDS, every_seconds: float = WATCH_RENEW_SECONDS
) -> bool:
    """Renew a watch once ``every_seconds`` of its lease have passed (at most half of it, for a short lease)."""
    return watch_until_ms - now_ms <= (lease_seconds - min(every_seconds, lease_seconds / 2)) * 1000
