"""The client's part in fair share (``taskqueue.core.fairness``; docs/fairness.md): a group's limits, its pause, and
what it looks like now. Joined into ``TaskQueueClient``; ``taskq group`` and the board call the same store methods.

    queue.enqueue({"order": 42}, group="customer-17")             # the task waits in its group's line
    queue.set_group_limits("customer-17", concurrency=2, rate="10/1")  # at most 2 running, 10 claims a second
    queue.pause_group("customer-17", retry_after="120")           # their API said 429, Retry-After: 120
    queue.resume_group("customer-17")                             # and its workers are woken
    queue.group("customer-17").waiting                            # a GroupView (taskqueue.store.group_views)

Permissions: setting a group's limits or pause is ``dynamodb:UpdateItem`` on the control items ``queue#<q>#group#<g>``
and ``queue#<q>#ring#<shard>#<g>`` (the stack's ProducerPolicy allows it: ``queue#*``); reading a group's view is
``Query`` (the ReadyIndex) and ``BatchGetItem`` (the groups' settings).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from taskqueue.core import fairness
from taskqueue.core.errors import InvalidTaskInput
from taskqueue.core.fairness import GroupLimits
from taskqueue.services import Services
from taskqueue.store import GroupsView, GroupView

# The longest pause one call sets (a Retry-After of days is a mistake more often than a wish).
MAX_PAUSE_SECONDS = 30 * 86400


def pause_until_ms(now_ms: int, *, seconds: float | None = None, until_ms: int | None = None,
                   retry_after: str | None = None) -> int:
    """When a pause ends, in epoch ms, from exactly one of: ``seconds`` from now, ``until_ms``, or an HTTP
    ``Retry-After`` value (whole seconds, or an HTTP date)."""
    given = [v for v in (seconds, until_ms, retry_after) if v is not None]
    if len(given) != 1:
        raise InvalidTaskInput("a pause needs exactly one of: seconds, until (a time), retry_after (a Retry-After value)")
    if retry_after is not None:
        text = retry_after.strip()
        if text.isdigit():
            seconds = float(text)
        else:
            try:
                when = parsedate_to_datetime(text)
            except (TypeError, ValueError):
                when = None
            if when is None:
                raise InvalidTaskInput(f"Retry-After is whole seconds or an HTTP date, got {retry_after!r:.80}")
            until_ms = int((when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp() * 1000)
    if seconds is not None:
        if not 0 < seconds <= MAX_PAUSE_SECONDS:
            raise InvalidTaskInput(f"a pause lasts more than 0 and at most {MAX_PAUSE_SECONDS} seconds, got {seconds:g}")
        until_ms = now_ms + int(seconds * 1000)
    assert until_ms is not None
    if until_ms - now_ms > MAX_PAUSE_SECONDS * 1000:
        raise InvalidTaskInput(f"a pause ends at most {MAX_PAUSE_SECONDS // 86400} days from now, got "
                               f"{datetime.fromtimestamp(until_ms / 1000, UTC).isoformat()}")
    return until_ms


def rate_of(rate: str | tuple[int, float] | None) -> tuple[int, float] | None:
    """A rate limit as ``(claims, period seconds)``, from a tuple or ``"N/P"`` (``"10/1"``, ``"600/60"``)."""
    if rate is None or isinstance(rate, tuple):
        return rate
    parsed = fairness.parse_rate(rate)
    if parsed is None:
        raise InvalidTaskInput(f"rate {rate!r} sets no limit: to drop the group's own rate, clear it (clear=['rate'])")
    return parsed


class GroupControls:
    """What ``TaskQueueClient`` offers for groups (it sets ``services``)."""

    services: Services

    def set_group_limits(self, group: str, *, queue: str = "work", concurrency: int | None = None,
                         rate: str | tuple[int, float] | None = None, clear: Iterable[str] = ()) -> GroupLimits:
        """Give ``group`` its own limits (at most ``concurrency`` running at once; ``rate`` claims per period, as
        ``"N/P"`` or ``(N, P)``); ``clear`` names those to drop back to the queue's defaults (``concurrency``,
        ``rate``). Running workers apply them within a few seconds. Returns the group's limits now."""
        if "pause" in set(clear):
            raise InvalidTaskInput("a pause is ended by resume_group, not by clearing a limit")
        return self.services.store.set_group_settings(queue, group, concurrency=concurrency, rate=rate_of(rate),
                                                      clear=clear)

    def pause_group(self, group: str, *, queue: str = "work", seconds: float | None = None,
                    until_ms: int | None = None, retry_after: str | None = None) -> GroupLimits:
        """No task of ``group`` is claimed until then (``seconds`` from now, ``until_ms``, or an HTTP Retry-After
        value); its tasks keep waiting (shed only by their TTL), and the other groups go on."""
        until = pause_until_ms(self.services.clock.now_ms(), seconds=seconds, until_ms=until_ms, retry_after=retry_after)
        return self.services.store.set_group_settings(queue, group, paused_until_ms=until)

    def resume_group(self, group: str, *, queue: str = "work") -> GroupLimits:
        """End ``group``'s pause now; the queue's worker starts (its tasks may be claimed)."""
        limits = self.services.store.set_group_settings(queue, group, clear=["pause"])
        self.services.store.note_resumed(queue)
        return limits

    def group(self, group: str, *, queue: str = "work") -> GroupView:
        """One group as it is now: waiting (bounded count), running, oldest waiting age, limits and pause."""
        return self.services.store.group_view(queue, group)

    def groups(self, queue: str = "work") -> GroupsView:
        """The queue's groups, noisiest first (``taskq groups``'s table)."""
        return self.services.store.group_views(queue)
