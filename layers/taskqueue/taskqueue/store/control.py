"""Per-queue control in the queue table: pause/resume and the queue-wide running limit.

A queue's control item (``taskId`` = ``queue#<name>``, its *record*: ``taskqueue.core.record``) holds ``paused``;
workers read it before claiming, so a paused queue's tasks keep their places and TTLs and nobody claims them. The
running limit (RUNNING_LIMIT; RUNNER_CAPACITY when empty) is C slot items per queue (``queue#<name>#slot#<i>``): a
worker takes a slot (a conditional write that succeeds only if the slot is free or its lease passed) before it claims
a task, and gives it back when its invocation ends. A slot's lease runs to the end of the invocation that took it
(its Lambda timeout, which no invocation outlives), so no slow request, stalled thread or missed renewal can let a
slot lapse while a task runs on it, and the limit holds at any concurrency: at most C tasks of the queue run at once.
A crashed invocation's slots come back when its timeout would have passed (``docs/scaling.md``).

Control and slot items carry no ``taskStatus``, ``queue`` or index keys: no index, listing, count or stream filter
sees them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from taskqueue.core.errors import InvalidTaskInput, TaskQueueError
from taskqueue.store.dynamo import ConditionLost
from taskqueue.store.table import _BATCH_GET_LIMIT, QueueTable, _key

CONTROL_PREFIX = "queue#"


@dataclass(frozen=True)
class QueueControl:
    """What operators set on a queue, and how many of its running-limit slots are held now."""

    queue: str
    paused: bool
    running_limit: int | None  # None: no queue-wide limit
    slots_held: int


SLOT = "slot"  # one of a queue's RUNNING_LIMIT slots (or a group's concurrency slots): held while tasks run on it


@dataclass(frozen=True)
class Token:
    """A leased slot of a queue (or of a group), held by ``owner`` until ``expires_ms`` unless freed first."""

    kind: str
    queue: str
    index: int
    owner: str
    expires_ms: int


def control_id(queue: str) -> str:
    return f"{CONTROL_PREFIX}{queue}"


def token_id(kind: str, queue: str, index: int) -> str:
    return f"{CONTROL_PREFIX}{queue}#{kind}#{index}"


# A resume's mark is kept this long (DynamoDB's TTL deletes it later still): long enough for the stream to carry it.
RESUME_MARK_SECONDS = 3600
# A slot whose free DynamoDB refuses (throttling past the SDK's retries) would stay held, unused, until its lease ends,
# minutes away: the free is tried this many times, after short pauses, before it is left to lapse.
FREE_ATTEMPTS = 3
FREE_PAUSE_SECONDS = 0.05
RESUME_MARK = "resume"


def resume_mark_id(queue: str, now_ms: int) -> str:
    return f"{CONTROL_PREFIX}{queue}#{RESUME_MARK}#{now_ms}"


def resumed_queue(item_id: str) -> str | None:
    """The queue a resume mark's id names (``None``: not a resume mark)."""
    if not item_id.startswith(CONTROL_PREFIX):
        return None
    queue, _, rest = item_id[len(CONTROL_PREFIX):].partition("#")
    return queue if rest.startswith(f"{RESUME_MARK}#") else None


def is_control_id(item_id: str) -> bool:
    """Control and slot items share the table with tasks; a task id never starts with this prefix."""
    return item_id.startswith(CONTROL_PREFIX)


class QueueControls(QueueTable):
    # ---- pause -----------------------------------------------------------------------------------

    def pause(self, queue: str) -> None:
        """Workers and the Matcher claim nothing from ``queue`` until ``resume``; its tasks keep their places."""
        self._set_paused(queue, True)

    def resume(self, queue: str) -> None:
        """Claims start again (the queue's worker starts: ``note_resumed``)."""
        self._set_paused(queue, False)
        self.note_resumed(queue)

    def note_resumed(self, queue: str) -> None:
        """Tell the queue's worker that work may be claimable again (a queue or a group resumed): a new item of its
        own (``queue#<name>#resume#<ms>``, deleted by TTL after RESUME_MARK_SECONDS), whose INSERT the table's stream
        hands to the worker as it does a new task's. One write per resume."""
        now_ms = self._clock.now_ms()
        self._call(
            "put_item",
            TableName=self._table,
            Item={"taskId": {"S": resume_mark_id(queue, now_ms)}, "resumedAt": {"N": str(now_ms)},
                  "deleteAt": {"N": str(now_ms // 1000 + RESUME_MARK_SECONDS)}},
        )

    def is_paused(self, queue: str) -> bool:
        response = self._call("get_item", TableName=self._table, Key=_key(control_id(queue)), ProjectionExpression="paused")
        return bool(response.get("Item", {}).get("paused", {}).get("BOOL", False))

    def control(self, queue: str) -> QueueControl:
        """Pause and the running limit's slots held now."""
        limit = self.running_limit(queue)
        now_ms = self._clock.now_ms()
        held = 0 if limit is None else sum(1 for expires in self._token_expiries(SLOT, queue, limit).values() if expires > now_ms)
        return QueueControl(queue=queue, paused=self.is_paused(queue), running_limit=limit, slots_held=held)

    def _set_paused(self, queue: str, paused: bool) -> None:
        self._settings.order_of(queue)  # an unknown queue is refused with the configured ones named
        self._call(
            "update_item",
            TableName=self._table,
            Key=_key(control_id(queue)),
            UpdateExpression="SET paused = :p, controlUpdated = :now",
            ExpressionAttributeValues={":p": {"BOOL": paused}, ":now": {"N": str(self._clock.now_ms())}},
        )

    # ---- the queue-wide running limit: leased slots of a queue ------------------------------------------

    def running_limit(self, queue: str) -> int | None:
        return self._settings.running_limit_of(queue)

    def acquire_slots(
        self, queue: str, owner: str, wanted: int, until_ms: int, rng: random.Random | None = None, *, guess: bool = False,
    ) -> list[Token]:
        """Up to ``wanted`` free slots of ``queue``'s running limit, each leased to ``owner`` until ``until_ms`` (the end
        of the invocation that takes them). Fewer than ``wanted`` (or none) when the limit is reached. Raises if the
        queue has no limit.

        ``guess`` (a worker that mostly finds every slot free, as one started for a stream batch): try ``wanted`` slots
        picked at random before reading any (a write each); the slots are read only for what the guesses did not get."""
        limit = self.running_limit(queue)
        if limit is None:
            raise InvalidTaskInput(f"queue {queue!r} has no running limit (RUNNING_LIMIT): there are no slots to take")
        rng = rng or random.Random()
        guessed: list[Token] = []
        if guess:
            now_ms = self._clock.now_ms()
            try:
                for index in rng.sample(range(limit), min(wanted, limit)):
                    token = Token(SLOT, queue, index, owner, until_ms)
                    if self._take_lease(token, now_ms):
                        guessed.append(token)
            except TaskQueueError:  # refused midway: the guesses taken would stay held, unused, until the end
                self._give_back(guessed)
                raise
            if len(guessed) == wanted:
                return guessed
        try:
            taken = self._take_tokens(SLOT, queue, limit, owner, min(wanted, limit) - len(guessed), until_ms, rng,
                                      held=frozenset(token.index for token in guessed))
        except TaskQueueError:
            self._give_back(guessed)  # or they would stay held, unused, until the invocation's end
            raise
        return guessed + taken

    def free_token(self, token: Token) -> bool:
        """Give a slot back; ``False`` if it was not ours any more. A refused write is tried again (FREE_ATTEMPTS); the
        last refusal is raised."""
        for attempt in range(1, FREE_ATTEMPTS + 1):
            try:
                return self._token_write(token, "REMOVE #o, #e", "#o = :owner AND #e = :held", {":held": token.expires_ms})
            except TaskQueueError:
                if attempt == FREE_ATTEMPTS:
                    raise
                self._clock.sleep(FREE_PAUSE_SECONDS * attempt)
        raise AssertionError("unreachable")

    def _take_lease(self, token: Token, now_ms: int) -> bool:
        """Lease ``token`` to its owner if it is free (never taken, freed, or lapsed)."""
        return self._token_write(
            token, "SET #o = :owner, #e = :expires", "attribute_not_exists(#e) OR #e <= :now",
            {":expires": token.expires_ms, ":now": now_ms},
        )

    def _token_write(self, token: Token, update: str, condition: str, numbers: dict[str, int]) -> bool:
        """One conditional UpdateItem of a slot's owner (``#o``, ``:owner``) and expiry (``#e``); ``False`` if the
        condition lost."""
        values = {":owner": {"S": token.owner}} | {name: {"N": str(value)} for name, value in numbers.items()}
        try:
            self._call(
                "update_item",
                TableName=self._table,
                Key=_key(token_id(token.kind, token.queue, token.index)),
                UpdateExpression=update,
                ConditionExpression=condition,
                ExpressionAttributeNames={"#o": "tokenOwner", "#e": "tokenExpires"},
                ExpressionAttributeValues=values,
            )
        except ConditionLost:
            return False
        return True

    def _take_tokens(
        self, kind: str, queue: str, count: int, owner: str, wanted: int, expires_ms: int, rng: random.Random,
        *, held: frozenset[int] = frozenset(),
    ) -> list[Token]:
        """Reads every slot of a kind (one BatchGetItem), then takes free ones (never taken, freed, or past their lease)
        in random order, which spreads concurrent workers over different slots, with one conditional write each; a slot
        another worker took meanwhile is skipped."""
        if wanted <= 0:
            return []
        now_ms = self._clock.now_ms()

        def free_of(expiries: dict[int, int]) -> list[int]:
            return [index for index in range(count) if index not in held and expiries.get(index, 0) <= now_ms]

        # Eventually consistent first (half the read units): a slot shown free that is not costs one failed write;
        # one shown held that is free would make a worker give up for nothing, so "none free" is read again, strongly.
        free = free_of(self._token_expiries(kind, queue, count, consistent=False))
        if not free:
            free = free_of(self._token_expiries(kind, queue, count))
        rng.shuffle(free)
        taken: list[Token] = []
        try:
            for index in free:
                if len(taken) == wanted:
                    break
                token = Token(kind, queue, index, owner, expires_ms)
                if self._take_lease(token, now_ms):
                    taken.append(token)
        except TaskQueueError:
            self._give_back(taken)  # refused midway: or what was taken would stay held, unused
            raise
        return taken

    def _give_back(self, tokens: list[Token]) -> None:
        for token in tokens:
            try:
                self.free_token(token)
            except TaskQueueError:  # refused every try: it lapses with its lease
                pass

    def _token_expiries(self, kind: str, queue: str, count: int, *, consistent: bool = True) -> dict[int, int]:
        """Lease expiry (epoch ms) of every held slot of a kind; a slot never taken or freed is absent."""
        ids = {token_id(kind, queue, index): index for index in range(count)}
        keys_ = [_key(i) for i in ids]
        expiries: dict[int, int] = {}
        for start in range(0, len(keys_), _BATCH_GET_LIMIT):
            request = {self._table: {"Keys": keys_[start : start + _BATCH_GET_LIMIT], "ConsistentRead": consistent,
                                     "ProjectionExpression": "taskId, tokenExpires"}}
            for item in self._batch_get(request):
                if "tokenExpires" in item:
                    expiries[ids[item["taskId"]["S"]]] = int(item["tokenExpires"]["N"])
        return expiries
