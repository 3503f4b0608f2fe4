"""Fair share's items in the queue table (the rules are in ``taskqueue.core.fairness``): the ring of groups with waiting
tasks, each group's run-time settings and rate window, and its concurrency slots.

- **Ring entries** (``queue#<q>#ring#<shard>#<group>``): in the ReadyIndex partition ``<q>#<shard>#groups`` while
  ``readyKey`` is set, at the group's fixed place (``readySort``). Set by whoever makes a group's task PENDING
  (creation, a retry, a lease recovered, an operator's redrive); removed by a worker whose look found the group's
  partitions empty, under a condition that keeps it while a producer may have written unseen (``deactivate``).
  ``notBefore`` on an entry (projected, like a task's) is the group's pause: a look passes it over until then.
- **Group settings** (``queue#<q>#group#<group>``): concurrency, rate and period overrides, ``pausedUntil``, and the
  rate window (``rateWindow``, ``rateCount``) that ``take_rate`` counts claims in.
- **Group slots**: the running-limit tokens of ``taskqueue.store.control`` under ``<q>#group#<group>``.

None of these items has ``taskStatus`` or ``queue``: no listing, count or stream filter sees them.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any

from taskqueue.core import fairness
from taskqueue.core.errors import InvalidTaskInput
from taskqueue.core.fairness import GroupLimits, RingEntry
from taskqueue.core.model import Task
from taskqueue.core.record import INDEX_LAG_ALLOWANCE_SECONDS, PRODUCER_CLOCK_SKEW_SECONDS
from taskqueue.store.control import SLOT, QueueControls, Token, control_id
from taskqueue.store.dynamo import ConditionLost
from taskqueue.store.table import _BATCH_GET_LIMIT, READY_INDEX, _key

# A producer that put (group, shard) on the ring this recently does not write it again for its next tasks: a group
# sent 1,000 tasks/s costs one ring write per producer per second, not one per task. ``deactivate`` waits this long
# (with the index's lag and the producers' clock skew) past the last activation, so no task goes unseen.
ACTIVATION_REUSE_SECONDS = 1.0
DEACTIVATION_GRACE_MS = int((ACTIVATION_REUSE_SECONDS + INDEX_LAG_ALLOWANCE_SECONDS + PRODUCER_CLOCK_SKEW_SECONDS) * 1000)
# ... and a worker that saw an activation's stamp may do so this long after it saw it, on its own clock: no skew to
# allow for (``fairness.may_leave_ring``). An empty group is read by the looks of about 2 s, not 7.
SETTLE_MS = int((ACTIVATION_REUSE_SECONDS + INDEX_LAG_ALLOWANCE_SECONDS) * 1000)


class GroupRing(QueueControls):
    # ---- the ring -------------------------------------------------------------------------------------------

    def note_groups(self, tasks: Iterable[Task], now_ms: int | None = None, *, reuse: bool = False) -> int:
        """Put the (group, shard) of each grouped PENDING task on the ring; how many entries were written. ``reuse``
        (a producer's new tasks): skip entries this store wrote within ACTIVATION_REUSE_SECONDS."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        wanted = dict.fromkeys((t.queue, t.shard, t.group) for t in tasks if t.group is not None)
        written = 0
        for queue, shard, group in wanted:
            assert group is not None
            place = (queue, shard, group)
            if reuse:
                with self._activated_lock:
                    if now_ms - self._activated.get(place, -10**15) < ACTIVATION_REUSE_SECONDS * 1000:
                        continue
            self._call(
                "update_item",
                TableName=self._table,
                Key=_key(fairness.ring_entry_id(queue, shard, group)),
                # ``ttl`` (projected into the ReadyIndex, as a task's) is the entry's own time to live on the ring:
                # a look reads it with the entry and leaves an empty group alone until then (``deactivate``'s rule).
                UpdateExpression="SET readyKey = :ring, readySort = :sort, groupName = :group, activeAt = :now, #ttl = :keep",
                ExpressionAttributeNames={"#ttl": "ttl"},
                ExpressionAttributeValues={
                    ":keep": {"N": fairness.ring_stamp(now_ms + DEACTIVATION_GRACE_MS, random.randrange(1_000_000))},
                    ":ring": {"S": fairness.ring_key(queue, shard)},
                    ":sort": {"S": fairness.ring_sort(group)},
                    ":group": {"S": group},
                    ":now": {"N": str(now_ms)},
                },
            )
            written += 1
            with self._activated_lock:
                self._activated[place] = now_ms
                flagged = queue in self._flagged
            if not flagged:  # once per store and queue: tells workers (on the queue's record) to read the ring
                self._call(
                    "update_item", TableName=self._table, Key=_key(control_id(queue)),
                    UpdateExpression="SET hasGroups = :yes", ExpressionAttributeValues={":yes": {"BOOL": True}},
                )
                with self._activated_lock:
                    self._flagged.add(queue)
        return written

    def ring(self, queue: str, shard: int, limit: int, after: str | None = None) -> list[RingEntry]:
        """Up to ``limit`` entries of a shard's ring in ring order from just after ``after`` (a worker's cursor),
        round to it again: at most two queries."""
        entries = self._ring_page(queue, shard, limit, after=after)
        if after is not None and len(entries) < limit:
            entries += self._ring_page(queue, shard, limit - len(entries), up_to=after)
        return entries

    def whole_ring(self, queue: str, shard: int) -> list[RingEntry]:
        """Every entry of a shard's ring (the groups that may have waiting tasks there), in ring order."""
        entries: list[RingEntry] = []
        while True:
            page = self._ring_page(queue, shard, 100, after=entries[-1].sort if entries else None)
            entries += page
            if len(page) < 100:
                return entries

    def _ring_page(self, queue: str, shard: int, limit: int, *, after: str | None = None, up_to: str | None = None) -> list[RingEntry]:
        condition = "readyKey = :k"
        values: dict[str, Any] = {":k": {"S": fairness.ring_key(queue, shard)}}
        if after is not None:
            condition += " AND readySort > :after"
            values[":after"] = {"S": after}
        if up_to is not None:
            condition += " AND readySort <= :upTo"
            values[":upTo"] = {"S": up_to}
        response = self._call(
            "query",
            TableName=self._table,
            IndexName=READY_INDEX,
            KeyConditionExpression=condition,
            ExpressionAttributeValues=values,
            Limit=max(1, limit),
        )
        entries = [
            RingEntry(
                group=fairness.group_of_ring_sort(item["readySort"]["S"]),
                shard=shard,
                sort=item["readySort"]["S"],
                paused_until_ms=int(item["notBefore"]["N"]) if "notBefore" in item else None,
                kept_until_s=float(item["ttl"]["N"]) if "ttl" in item else 0,
                stamp=item["ttl"]["N"] if "ttl" in item else "",
            )
            for item in response.get("Items", [])
        ]
        # When this store first saw each entry's stamp (after the read: the activation was written before it).
        seen_ms = self._clock.now_ms()
        with self._activated_lock:
            for entry in entries:
                place = (queue, *entry.place)
                if self._stamps_seen.get(place, ("", 0))[0] != entry.stamp:
                    self._stamps_seen[place] = (entry.stamp, seen_ms)
        return entries

    def may_deactivate(self, queue: str, entry: RingEntry, look_started_ms: int) -> bool:
        """May a look that began at ``look_started_ms`` and found the group with no task take it off the ring
        (``fairness.may_leave_ring``: SETTLE_MS after this store first saw its stamp, or its grace)?"""
        with self._activated_lock:
            stamp, first_seen_ms = self._stamps_seen.get((queue, *entry.place), ("", 0))
        return fairness.may_leave_ring(entry, look_started_ms, first_seen_ms if stamp == entry.stamp else None, SETTLE_MS)

    def deactivate(self, queue: str, entry: RingEntry, look_started_ms: int) -> bool:
        """Take (group, shard) off the ring after a look that began at ``look_started_ms`` found its partitions empty
        (and ``may_deactivate`` allowed it).

        Holds only if no producer activated the group since the look saw ``entry``: its stamp is unchanged (every
        activation writes another). An entry whose stamp carries no nonce (written before stamps had one) is also
        held by its last activation being older than the look by DEACTIVATION_GRACE_MS: a producer that skipped its
        write (ACTIVATION_REUSE_SECONDS) wrote its tasks before that activation's reuse ran out, and an index shows a
        write within the lag allowance, so the empty look saw every task the entry stands for."""
        condition, values = ("#ttl = :stamp", {":stamp": {"N": entry.stamp}}) if entry.stamp else ("attribute_not_exists(#ttl)", {})
        if "." not in entry.stamp:
            condition += " AND activeAt <= :cut"
            values[":cut"] = {"N": str(look_started_ms - DEACTIVATION_GRACE_MS)}
        try:
            self._call(
                "update_item",
                TableName=self._table,
                Key=_key(fairness.ring_entry_id(queue, entry.shard, entry.group)),
                UpdateExpression="REMOVE readyKey",
                ConditionExpression=condition,
                ExpressionAttributeNames={"#ttl": "ttl"},
                ExpressionAttributeValues=values,
            )
        except ConditionLost:
            return False
        with self._activated_lock:
            self._activated.pop((queue, entry.shard, entry.group), None)
            self._stamps_seen.pop((queue, entry.shard, entry.group), None)
        return True

    # ---- a group's settings ------------------------------------------------------------------------------------

    def group_settings(self, queue: str, groups: Iterable[str]) -> dict[str, GroupLimits]:
        """The limits of each group: its own settings over the queue's defaults (GROUP_CONCURRENCY,
        GROUP_RATE_LIMIT). One eventually consistent BatchGetItem per 100 groups."""
        names = list(dict.fromkeys(groups))
        found: dict[str, Mapping[str, Any]] = {}
        ids = {fairness.group_control_id(queue, g): g for g in names}
        keys_ = [_key(i) for i in ids]
        for start in range(0, len(keys_), _BATCH_GET_LIMIT):
            request = {self._table: {"Keys": keys_[start : start + _BATCH_GET_LIMIT], "ConsistentRead": False}}
            for item in self._batch_get(request):
                found[ids[item["taskId"]["S"]]] = item
        return {g: self._limits_of(found.get(g, {})) for g in names}

    def _limits_of(self, item: Mapping[str, Any]) -> GroupLimits:
        rate = self._settings.group_rate
        own_rate = int(item["rateLimit"]["N"]) if "rateLimit" in item else None
        period = float(item["ratePeriod"]["N"]) if "ratePeriod" in item else (rate[1] if rate else 1.0)
        return GroupLimits(
            concurrency=int(item["concurrency"]["N"]) if "concurrency" in item else self._settings.group_concurrency,
            rate=own_rate if own_rate is not None else (rate[0] if rate else None),
            period_seconds=period,
            paused_until_ms=int(item["pausedUntil"]["N"]) if "pausedUntil" in item else None,
        )

    def set_group_settings(
        self,
        queue: str,
        group: str,
        *,
        concurrency: int | None = None,
        rate: tuple[int, float] | None = None,
        paused_until_ms: int | None = None,
        clear: Iterable[str] = (),
    ) -> GroupLimits:
        """Set a group's own limits (each given value; ``clear`` names those to drop back to the queue's defaults:
        ``concurrency``, ``rate``, ``pause``). A pause is written on the group's ring entries too (every shard), so
        looks pass the group over until then without reading its settings."""
        fairness.validate_group(group)
        self._settings.order_of(queue)
        GroupLimits(concurrency=concurrency, rate=None if rate is None else rate[0],
                    period_seconds=1.0 if rate is None else rate[1])  # checks the ranges
        clear = set(clear)
        unknown = clear - {"concurrency", "rate", "pause"}
        if unknown:
            raise InvalidTaskInput(f"cannot clear {sorted(unknown)}: a group's settings are concurrency, rate and pause")
        sets: dict[str, Any] = {"groupUpdated": {"N": str(self._clock.now_ms())}, "groupName": {"S": group}}
        removes: list[str] = []
        if concurrency is not None:
            sets["concurrency"] = {"N": str(concurrency)}
        if rate is not None:
            sets["rateLimit"], sets["ratePeriod"] = {"N": str(rate[0])}, {"N": repr(float(rate[1]))}
        if paused_until_ms is not None:
            sets["pausedUntil"] = {"N": str(paused_until_ms)}
        removes += ["concurrency"] if "concurrency" in clear else []
        removes += ["rateLimit", "ratePeriod"] if "rate" in clear else []
        removes += ["pausedUntil"] if "pause" in clear else []
        names = {f"#a{i}": name for i, name in enumerate([*sets, *removes])}
        by_name = {name: key for key, name in names.items()}
        update = "SET " + ", ".join(f"{by_name[n]} = :a{i}" for i, n in enumerate(sets))
        if removes:
            update += " REMOVE " + ", ".join(by_name[n] for n in removes)
        response = self._call(
            "update_item",
            TableName=self._table,
            Key=_key(fairness.group_control_id(queue, group)),
            UpdateExpression=update,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues={f":a{i}": value for i, value in enumerate(sets.values())},
            ReturnValues="ALL_NEW",
        )
        if paused_until_ms is not None or "pause" in clear:
            self._pause_ring_entries(queue, group, paused_until_ms)
            # A paused group's delayed entries count on the queue's delayed head from the pause's end (next_due_ms):
            # the head may stand at the old end. Lower it to the new end (now, for a resume), so that a pause ended
            # or shortened brings a look to the delayed partitions on time.
            now_ms = self._clock.now_ms()
            self.note_delayed(queue, max(now_ms, paused_until_ms or now_ms))  # type: ignore[attr-defined]
        return self._limits_of(response["Attributes"])

    def _pause_ring_entries(self, queue: str, group: str, until_ms: int | None) -> None:
        for shard in range(self._settings.queue_shards):
            update = "SET notBefore = :until, groupName = :group" if until_ms is not None else "REMOVE notBefore"
            values = {":until": {"N": str(until_ms)}, ":group": {"S": group}} if until_ms is not None else None
            request: dict[str, Any] = {
                "TableName": self._table,
                "Key": _key(fairness.ring_entry_id(queue, shard, group)),
                "UpdateExpression": update,
            }
            if values:
                request["ExpressionAttributeValues"] = values
            self._call("update_item", **request)

    # ---- per-group limits at claim time --------------------------------------------------------------------------

    def take_rate(self, queue: str, group: str, limits: GroupLimits, now_ms: int | None = None) -> bool:
        """Count one claim of ``group`` in its current rate window; ``False`` if the window already holds ``rate``
        claims (the caller waits for the next window: ``fairness.next_window_ms``). A counted claim that is then
        lost leaves the window one short, never over."""
        if limits.rate is None:
            return True
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        window = fairness.rate_window(now_ms, limits.period_seconds)
        item_key = _key(fairness.group_control_id(queue, group))
        values = {":w": {"N": str(window)}, ":n": {"N": str(limits.rate)}, ":one": {"N": "1"}}
        for _ in range(2):
            try:
                self._call(
                    "update_item", TableName=self._table, Key=item_key,
                    UpdateExpression="ADD rateCount :one", ConditionExpression="rateWindow = :w AND rateCount < :n",
                    ExpressionAttributeValues=values,
                )
                return True
            except ConditionLost:
                pass
            try:  # a new window (or the first): start it at one claim, unless another worker just did
                self._call(
                    "update_item", TableName=self._table, Key=item_key,
                    UpdateExpression="SET rateWindow = :w, rateCount = :one",
                    ConditionExpression="attribute_not_exists(rateWindow) OR rateWindow < :w",
                    ExpressionAttributeValues={":w": values[":w"], ":one": values[":one"]},
                )
                return True
            except ConditionLost:
                continue  # the window is current: count in it, if there is room
        return False

    def take_group_slot(
        self, queue: str, group: str, owner: str, limit: int, until_ms: int, rng: random.Random | None = None
    ) -> Token | None:
        """One of the group's ``limit`` concurrency slots, leased to ``owner`` until ``until_ms`` (the end of its
        invocation, as the queue's running-limit slots); ``None`` when all are held."""
        taken = self._take_tokens(SLOT, fairness.group_token_queue(queue, group), limit, owner, 1, until_ms,
                                  rng or random.Random())
        return taken[0] if taken else None

    def group_slots_held(self, queue: str, group: str, limit: int) -> int:
        now_ms = self._clock.now_ms()
        expiries = self._token_expiries(SLOT, fairness.group_token_queue(queue, group), limit)
        return sum(1 for expiry in expiries.values() if expiry > now_ms)
