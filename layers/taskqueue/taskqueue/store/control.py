"""Per-queue control in the queue table: pause/resume, the queue-wide running limit, and claim lanes.

A queue's control item (``taskId`` = ``queue#<name>``) holds ``paused``; workers read it before claiming, so a
paused queue's tasks keep their places and TTLs and nobody claims them. The running limit (RUNNING_LIMIT; by default RUNNER_CAPACITY
once several workers may run) is C slot items per queue (``queue#<name>#slot#<i>``): a worker takes a slot (a conditional write
that succeeds only if the slot is free or its lease passed) before it claims a task, holds it while the task runs,
and frees it once the task's runner returns. A slot's lease is short (SLOT_LEASE_SECONDS, 5 s), renewed by its live
worker every SLOT_RENEW_SECONDS (``taskqueue.work.held_slots``), so a crashed worker's slots come back within a few
seconds, long before its tasks do (their leases last at least the function's timeout). So at most C tasks of the
queue run at once across every worker and every invocation, whatever ProcessTasksConcurrency is.

Claim lanes (CLAIM_LANES, the workers' reserved concurrency) are leased the same way, one per claiming worker,
for its claim window: a worker knows its rank among the lanes held now and claims first the tasks that hash to
it (``taskqueue.core.lanes``), so concurrent workers spread over the head of the queue instead of racing for it.

Control and token items carry no ``taskStatus``, ``queue`` or index keys: no index, listing, count or stream
filter sees them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from taskqueue.core.errors import InvalidTaskInput, TaskQueueError
from taskqueue.core.lanes import LaneView
from taskqueue.store.dynamo import ConditionLost
from taskqueue.store.table import _BATCH_GET_LIMIT, QueueTable, _key

CONTROL_PREFIX = "queue#"
# A running-limit slot's lease, and how often a live worker renews a slot a task uses (at half the lease; its loop
# looks at least every second, so about three attempts may fail before one lapses): one UpdateItem per busy slot per
# 2.5 s, 1,440 write units per slot-hour ($0.0009 on demand). A spare slot is not renewed (work/held_slots.py).
SLOT_LEASE_SECONDS = 5.0
SLOT_RENEW_SECONDS = 2.5
# The queue's watcher holds its slots on a long lease (``tokenWatch`` set), renewed at half of it: a watcher's slots
# were a third of its run's writes at 10 tasks/s (12 renewals a 12 s run, issue 29). Such a slot is good only while its
# owner watches the queue: a watcher shortens its slots to SLOT_LEASE_SECONDS before its watch ends (``relet_slot``), so
# a long-leased slot whose owner is not the watcher belongs to a watcher whose watch lapsed (it died, or could not
# renew for WATCH_LEASE_SECONDS), and the next watcher takes it at once (``acquire_slots(..., watcher=True)``): a dead
# watcher's slots come back when its watch does, as soon as with short leases.
WATCHER_SLOT_LEASE_SECONDS = 60.0


def slot_lease_seconds(watched: bool) -> float:
    """A slot's lease: the watcher's (``watched``) or a helper's."""
    return WATCHER_SLOT_LEASE_SECONDS if watched else SLOT_LEASE_SECONDS


@dataclass(frozen=True)
class QueueControl:
    """What operators set on a queue, and how many of its running-limit slots are held now."""

    queue: str
    paused: bool
    running_limit: int | None  # None: no queue-wide limit
    slots_held: int


SLOT = "slot"  # one of a queue's RUNNING_LIMIT slots: held while one task runs
SLOT_WATCH_ATTRIBUTE = "tokenWatch"  # a slot held on the watcher's long lease
LANE = "lane"  # one of a queue's CLAIM_LANES: held by one worker while it claims


@dataclass(frozen=True)
class Token:
    """A leased token of a queue (a running-limit slot or a claim lane), held by ``owner`` until ``expires_ms``
    unless renewed or freed."""

    kind: str
    queue: str
    index: int
    owner: str
    expires_ms: int
    watched: bool = False  # a slot held on the watcher's long lease (WATCHER_SLOT_LEASE_SECONDS)

    @property
    def lease_ms(self) -> int:
        return int(slot_lease_seconds(self.watched) * 1000)


def control_id(queue: str) -> str:
    return f"{CONTROL_PREFIX}{queue}"


def token_id(kind: str, queue: str, index: int) -> str:
    return f"{CONTROL_PREFIX}{queue}#{kind}#{index}"


def _lanes_id(queue: str) -> str:
    return f"{CONTROL_PREFIX}{queue}#lanes"


def _place(token: Token) -> tuple[str, str, str]:
    """Where a token's lease is stored: the item, and its owner and expiry attributes. Every lane of a queue lives
    in one item (``o<i>``, ``e<i>``), read whole by each look at the lanes; each slot in an item of its own."""
    if token.kind == LANE:
        return _lanes_id(token.queue), f"o{token.index}", f"e{token.index}"
    return token_id(token.kind, token.queue, token.index), "tokenOwner", "tokenExpires"


def is_control_id(item_id: str) -> bool:
    """Control and slot items share the table with tasks; a task id never starts with this prefix."""
    return item_id.startswith(CONTROL_PREFIX)


class QueueControls(QueueTable):
    # ---- pause -----------------------------------------------------------------------------------

    def pause(self, queue: str) -> None:
        """Workers and the Matcher claim nothing from ``queue`` until ``resume``; its tasks keep their places."""
        self._set_paused(queue, True)

    def resume(self, queue: str) -> None:
        """Claims start again at the next worker run (publish a wake-up, or let the safety net find the work)."""
        self._set_paused(queue, False)

    def is_paused(self, queue: str) -> bool:
        response = self._call("get_item", TableName=self._table, Key=_key(control_id(queue)), ProjectionExpression="paused")
        return bool(response.get("Item", {}).get("paused", {}).get("BOOL", False))

    def control(self, queue: str) -> QueueControl:
        """Pause and the running limit's slots held now. A slot on a watcher's lease counts only while its owner
        watches the queue (the record read for ``paused`` says who does): a dead watcher's slots are free to the next
        watcher as soon as its watch lapses, though their expiry is far off."""
        limit = self.running_limit(queue)
        now_ms = self._clock.now_ms()
        record = self.read_wake_record(queue, consistent=False)  # type: ignore[attr-defined]  # WakeRecords
        watcher = record.watcher if record.watched(now_ms) else None
        held = 0 if limit is None else sum(
            1 for expires, owner in self._token_holders(SLOT, queue, limit).values()
            if expires > now_ms and owner in (None, watcher))
        return QueueControl(queue=queue, paused=record.paused, running_limit=limit, slots_held=held)

    def _set_paused(self, queue: str, paused: bool) -> None:
        self._settings.order_of(queue)  # an unknown queue is refused with the configured ones named
        self._call(
            "update_item",
            TableName=self._table,
            Key=_key(control_id(queue)),
            UpdateExpression="SET paused = :p, controlUpdated = :now",
            ExpressionAttributeValues={":p": {"BOOL": paused}, ":now": {"N": str(self._clock.now_ms())}},
        )

    # ---- the queue-wide running limit, and claim lanes: leased tokens of a queue ---------------------

    def running_limit(self, queue: str) -> int | None:
        return self._settings.running_limit_of(queue)

    def acquire_slots(
        self, queue: str, owner: str, wanted: int, rng: random.Random | None = None, *, watcher: bool = False,
        guess: bool = False,
    ) -> list[Token]:
        """Up to ``wanted`` free slots of ``queue``'s running limit, each leased to ``owner`` for SLOT_LEASE_SECONDS
        (renewed by its worker every SLOT_RENEW_SECONDS, ``relet_slot``). Fewer than ``wanted`` (or none) when the
        limit is reached. Raises if the queue has no limit.

        ``watcher``: ``owner`` watches the queue now. Its slots are leased for WATCHER_SLOT_LEASE_SECONDS, and it may
        take a slot another owner holds on a watcher's lease: that owner's watch has ended without the shortening that
        comes first, so it lapsed.

        ``guess`` (a stream start, which mostly finds every slot free): try ``wanted`` slots picked at random before
        reading any (a write each); the slots are read only for what the guesses did not get."""
        limit = self.running_limit(queue)
        if limit is None:
            raise InvalidTaskInput(f"queue {queue!r} has no running limit (RUNNING_LIMIT): there are no slots to take")
        expires = self._clock.now_ms() + int(slot_lease_seconds(watcher) * 1000)
        rng = rng or random.Random()
        guessed: list[Token] = []
        if guess:
            now_ms = self._clock.now_ms()
            for index in rng.sample(range(limit), min(wanted, limit)):
                token = Token(SLOT, queue, index, owner, expires, watched=watcher)
                if self._take_lease(token, now_ms, reclaim=watcher):
                    guessed.append(token)
            if len(guessed) == wanted:
                return guessed
        taken = self._take_tokens(SLOT, queue, limit, owner, wanted - len(guessed), expires, rng, watcher=watcher,
                                  held=frozenset(token.index for token in guessed))
        return guessed + taken

    def relet_slot(self, slot: Token, *, watched: bool, now_ms: int | None = None) -> Token | None:
        """A held slot leased anew from now: for WATCHER_SLOT_LEASE_SECONDS if ``watched`` (its owner watches the
        queue), else for SLOT_LEASE_SECONDS (shorter than it was, when its owner's watch ends). ``None`` if it is no
        longer ours or has lapsed."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        leased = Token(slot.kind, slot.queue, slot.index, slot.owner, now_ms + int(slot_lease_seconds(watched) * 1000), watched)
        written = self._token_write(
            slot,
            "SET #e = :expires, #watch = :watched",
            "#o = :owner AND #e = :held AND #e > :now",
            {":held": slot.expires_ms, ":expires": leased.expires_ms, ":now": now_ms},
            watched=watched,
        )
        return leased if written else None

    def take_lane(self, queue: str, owner: str, until_ms: int, rng: random.Random | None = None) -> Token | None:
        """A claim lane of ``queue`` leased to ``owner`` until ``until_ms`` (its claim deadline); ``None`` if all
        CLAIM_LANES lanes are held (more workers than lanes: this one claims in plain order).

        Every lane of a queue lives in one item (``o<i>`` owner, ``e<i>`` lease expiry), so the view a worker reads
        again and again costs one strongly consistent read of one small item."""
        now_ms = self._clock.now_ms()
        held = self._lanes_held(queue, now_ms)
        free = [index for index in range(self._settings.claim_lanes) if index not in held]
        (rng or random.Random()).shuffle(free)
        for index in free:
            lane = Token(LANE, queue, index, owner, until_ms)
            if self._take_lease(lane, now_ms):
                return lane
        return None

    def lane_view(self, lane: Token, *, consistent: bool = True) -> LaneView:
        """``lane`` among the lanes held now (the lanes of the workers claiming now); ``consistent`` False: half the
        read cost, maybe a moment old (a stale view costs a lost claim, never a wrong one)."""
        held = self._lanes_held(lane.queue, self._clock.now_ms(), consistent=consistent) | {lane.index}
        return LaneView(lane=lane.index, held=tuple(sorted(held)))

    def free_lane(self, lane: Token) -> bool:
        """Give a lane back at the end of a claim window; ``False`` if it was not ours any more."""
        return self.free_token(lane)

    def claim_lanes_held(self, queue: str) -> int:
        """How many of ``queue``'s CLAIM_LANES are leased now, i.e. how many workers are claiming from it now."""
        return len(self._lanes_held(queue, self._clock.now_ms()))

    def _lanes_held(self, queue: str, now_ms: int, *, consistent: bool = True) -> set[int]:
        response = self._call("get_item", TableName=self._table, Key=_key(_lanes_id(queue)), ConsistentRead=consistent)
        item = response.get("Item", {})
        return {
            index
            for index in range(self._settings.claim_lanes)
            if f"e{index}" in item and int(item[f"e{index}"]["N"]) > now_ms
        }

    def renew_token(self, token: Token, expires_ms: int) -> Token | None:
        """Move a token's lease to ``expires_ms`` (a slot moves with its task's lease); ``None`` if it is no
        longer ours or has lapsed (a lapsed token may be another worker's any moment, as a lapsed lease)."""
        if expires_ms <= token.expires_ms:
            return token
        renewed = self._token_write(
            token,
            "SET #e = :expires",
            "#o = :owner AND #e = :held AND #e > :now",
            {":held": token.expires_ms, ":expires": expires_ms, ":now": self._clock.now_ms()},
        )
        return Token(token.kind, token.queue, token.index, token.owner, expires_ms, token.watched) if renewed else None

    def free_token(self, token: Token) -> bool:
        """Give a token back; ``False`` if it was not ours any more (its lease passed and another worker took it)."""
        remove = "REMOVE #o, #e, #watch" if token.kind == SLOT else "REMOVE #o, #e"
        return self._token_write(token, remove, "#o = :owner AND #e = :held", {":held": token.expires_ms})

    def _take_lease(self, token: Token, now_ms: int, *, reclaim: bool = False) -> bool:
        """Lease ``token`` to its owner if it is free (never taken, freed, or lapsed); ``reclaim`` (a watcher taking a
        slot): also if another owner holds it on a watcher's lease, whose watch lapsed (WATCHER_SLOT_LEASE_SECONDS)."""
        if token.kind != SLOT:
            return self._token_write(
                token, "SET #o = :owner, #e = :expires", "attribute_not_exists(#e) OR #e <= :now",
                {":expires": token.expires_ms, ":now": now_ms},
            )
        condition = "attribute_not_exists(#e) OR #e <= :now"
        if reclaim:
            condition += " OR (#watch = :true AND #o <> :owner)"
        return self._token_write(
            token, "SET #o = :owner, #e = :expires, #watch = :watched", condition,
            {":expires": token.expires_ms, ":now": now_ms}, watched=token.watched,
        )

    def _token_write(
        self, token: Token, update: str, condition: str, numbers: dict[str, int], *, watched: bool | None = None
    ) -> bool:
        """One conditional UpdateItem of a token's owner (``#o``, ``:owner``) and expiry (``#e``) (a slot's:
        and its watcher's-lease flag ``#watch``, ``:watched``); ``False`` if the condition lost."""
        item_id, owner_name, expires_name = _place(token)
        values = {":owner": {"S": token.owner}} | {name: {"N": str(value)} for name, value in numbers.items()}
        if watched is not None:
            values[":watched"] = {"BOOL": watched}
        if ":true" in condition:
            values[":true"] = {"BOOL": True}
        if ":owner" not in update + condition:
            values.pop(":owner")
        names = {"#o": owner_name, "#e": expires_name}
        if "#watch" in update + condition:
            names["#watch"] = SLOT_WATCH_ATTRIBUTE
        try:
            self._call(
                "update_item",
                TableName=self._table,
                Key=_key(item_id),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except ConditionLost:
            return False
        return True

    def _take_tokens(
        self, kind: str, queue: str, count: int, owner: str, wanted: int, expires_ms: int, rng: random.Random,
        *, watcher: bool = False, held: frozenset[int] = frozenset(),
    ) -> list[Token]:
        """Reads every token of a kind (one BatchGetItem), then takes free ones (never taken, freed, or past
        their lease; for a ``watcher``, also a lapsed watcher's: ``acquire_slots``) in random order, which spreads
        concurrent workers over different tokens, with one conditional write each; a token another worker took
        meanwhile is skipped."""
        if wanted <= 0:
            return []
        now_ms = self._clock.now_ms()

        def free_of(holders: dict[int, tuple[int, str | None]]) -> list[int]:
            return [index for index in range(count) if index not in held and holders.get(index, (0, None))[0] <= now_ms
                    or (watcher and holders[index][1] not in (None, owner))]

        # Eventually consistent first (half the read units): a slot shown free that is not costs one failed write;
        # one shown held that is free would make a worker wait for nothing, so "none free" is read again, strongly.
        free = free_of(self._token_holders(kind, queue, count, consistent=False))
        if not free:
            free = free_of(self._token_holders(kind, queue, count))
        rng.shuffle(free)
        taken: list[Token] = []
        try:
            for index in free:
                if len(taken) == wanted:
                    break
                token = Token(kind, queue, index, owner, expires_ms, watched=watcher and kind == SLOT)
                if self._take_lease(token, now_ms, reclaim=watcher):
                    taken.append(token)
        except TaskQueueError:
            # Refused midway: give back what was taken, or it would stay held for a whole lease, unused.
            for token in taken:
                try:
                    self.free_token(token)
                except TaskQueueError:
                    pass  # it lapses with its lease
            raise
        return taken

    def _token_expiries(self, kind: str, queue: str, count: int, *, consistent: bool = True) -> dict[int, int]:
        """Lease expiry (epoch ms) of every held token of a kind; a token never taken or freed is absent."""
        return {index: expires for index, (expires, _) in self._token_holders(kind, queue, count, consistent=consistent).items()}

    def _token_holders(
        self, kind: str, queue: str, count: int, *, consistent: bool = True
    ) -> dict[int, tuple[int, str | None]]:
        """Every held token of a kind: its lease expiry (epoch ms), and its owner when it is held on a watcher's
        lease (else ``None``); a token never taken or freed is absent."""
        ids = {token_id(kind, queue, index): index for index in range(count)}
        keys_ = [_key(i) for i in ids]
        holders: dict[int, tuple[int, str | None]] = {}
        for start in range(0, len(keys_), _BATCH_GET_LIMIT):
            # ``consistent`` by default: a worker woken just after slots were freed must see them free, or it would
            # wait for nothing (an eventually consistent read may still show them held); _take_tokens asks that only
            # when the cheaper read showed none free.
            request = {self._table: {"Keys": keys_[start : start + _BATCH_GET_LIMIT], "ConsistentRead": consistent,
                                     "ProjectionExpression": f"taskId, tokenExpires, tokenOwner, {SLOT_WATCH_ATTRIBUTE}"}}
            for item in self._batch_get(request):
                if "tokenExpires" in item:
                    watched = item.get(SLOT_WATCH_ATTRIBUTE, {}).get("BOOL", False)
                    owner = item.get("tokenOwner", {}).get("S") if watched else None
                    holders[ids[item["taskId"]["S"]]] = (int(item["tokenExpires"]["N"]), owner)
        return holders
