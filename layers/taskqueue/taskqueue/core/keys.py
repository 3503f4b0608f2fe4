"""Index key encoding (pure): which index partition a task lives in and where it sorts.

ReadyIndex holds PENDING and TAKEN tasks, in two partitions per queue shard:

- the *ready* partition "<queue>#<shard>" holds tasks that may run now. Its sort key is
  "<priority>#<order time>#<taskId>", all fixed width, so that a *descending* query returns the task the
  queue must serve next: the highest priority first, then the newest (LIFO) or the oldest (FIFO);
- the *delayed* partition "<queue>#<shard>#delayed" holds tasks with a not-before time (a retry's backoff,
  a delayed task). Its sort key is "<not-before ms>#<ready sort key>": an *ascending* query returns the
  task that falls due first, and the ready sort key it carries puts it in its place once due.

A TAKEN task keeps its entry in the ready partition, with its lease's expiry as ``notBefore`` (projected): a look
passes over it while the lease holds and finds it again once it passes (its worker died), and a claim changes one
projected attribute (one index write) instead of taking the entry out and putting one in a second index (four).
A task claimed from the delayed partition moves to its ready partition, so in a ready partition ``notBefore``
always means a lease, and in a delayed one a due time.

Delayed tasks never sit in front of due ones, whatever their priority: a reader takes the head of the
ready partition and the due head of the delayed partition, and merges them by the ready sort key.
"""

from __future__ import annotations

import re
import zlib
from enum import StrEnum

from taskqueue.core.errors import InvalidTaskInput

MIN_PRIORITY = 0
MAX_PRIORITY = 999
_PRIORITY_WIDTH = 3
# Epoch milliseconds stay below 10**15 until the year 33658.
_TIME_SPAN = 10**15
_TIME_WIDTH = 15
_QUEUE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class Order(StrEnum):
    LIFO = "LIFO"
    FIFO = "FIFO"


def validate_queue_name(queue: str) -> str:
    if not isinstance(queue, str) or not _QUEUE_NAME.match(queue):
        raise InvalidTaskInput(
            f"queue name {queue!r} is not valid: use 1-64 letters, digits, '-' or '_'"
        )
    return queue


def validate_priority(priority: object) -> int:
    if isinstance(priority, bool) or not isinstance(priority, int) or not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        raise InvalidTaskInput(
            f"priority must be a whole number from {MIN_PRIORITY} to {MAX_PRIORITY} "
            f"(higher is served first), got {priority!r}"
        )
    return priority


def shard_for(task_id: str, shards: int) -> int:
    """A stable shard number for a task id (the same in every process, unlike hash())."""
    return zlib.crc32(task_id.encode("utf-8")) % shards


def ready_key(queue: str, shard: int) -> str:
    return f"{queue}#{shard}"


def delayed_key(queue: str, shard: int) -> str:
    return f"{queue}#{shard}#delayed"


def encode_time(epoch_ms: int, what: str = "time") -> str:
    """Epoch milliseconds as 15 fixed-width digits, so that string order is time order (every sort key that
    carries a time uses this); ``what`` names the time in the error."""
    if not 0 <= epoch_ms < _TIME_SPAN:
        raise InvalidTaskInput(f"{what} {epoch_ms} ms is outside the encodable range")
    return f"{epoch_ms:0{_TIME_WIDTH}d}"


def decode_time(text: str) -> int:
    """Inverse of encode_time."""
    return int(text)


def delayed_sort(not_before_ms: int, ready_sort_key: str) -> str:
    return f"{encode_time(not_before_ms, 'not-before time')}#{ready_sort_key}"


def delayed_until(not_before_ms: int) -> str:
    """The greatest delayed sort key of a task due at ``not_before_ms`` (for "due by then" range queries)."""
    return f"{encode_time(not_before_ms, 'not-before time')}#~"


def parse_delayed_sort(sort_key: str) -> tuple[int, str]:
    """Inverse of delayed_sort: (not-before ms, ready sort key)."""
    due, ready = sort_key.split("#", 1)
    return decode_time(due), ready


def status_key(queue: str, status: str, shard: int) -> str:
    return f"{queue}#{status}#{shard}"


def ready_sort(priority: int, order_time_ms: int, task_id: str, order: Order) -> str:
    validate_priority(priority)
    encode_time(order_time_ms, "order time")  # refuses a time outside the range, whichever the order
    # A descending query serves the largest key first: LIFO wants the newest, FIFO the oldest.
    age_component = order_time_ms if order is Order.LIFO else _TIME_SPAN - 1 - order_time_ms
    return f"{priority:0{_PRIORITY_WIDTH}d}#{encode_time(age_component)}#{task_id}"


def parse_ready_sort(sort_key: str, order: Order) -> tuple[int, int, str]:
    """Inverse of ready_sort: (priority, order time ms, task id)."""
    priority, age_component, task_id = sort_key.split("#", 2)
    age = decode_time(age_component)
    order_time = age if order is Order.LIFO else _TIME_SPAN - 1 - age
    return int(priority), order_time, task_id
