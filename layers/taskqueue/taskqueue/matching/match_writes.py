"""The match transaction on the agent table's side: several pairs in one TransactWriteItems, and what a refusal says
about each agent that refused (its item as it was, returned with the cancellation: no read, no GetItem grant), which
the Matcher acts on (``settle_lost_agent``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from taskqueue.matching import rules as matching
from taskqueue.matching.agent_items import agent_from_item
from taskqueue.matching.match_items import (
    LostAgent,
    PairsResult,
    busy_update,
    entries_still_there,
    entry_delete,
    lost_agent,
    match_result,
    orphans_delete,
)
from taskqueue.matching.pairing import Pair, lost_in
from taskqueue.matching.presence import AgentPresence


class AgentMatches(AgentPresence):
    def match_pairs(self, pairs: Sequence[Pair], now_ms: int | None = None) -> PairsResult:
        """ONE TransactWriteItems for ``pairs`` (at most 100 items: cut them with ``pairing.transactions``): per
        pair, the call PENDING -> SUCCESS, the agent queued -> busy on it, every entry of the agent deleted.
        Conditions are on those items only, so matchers taking different calls and agents never abort each
        other, and an agent is never given to two callers. All pairs commit, or none (``lost`` names what failed,
        ``agents_read`` how each lost agent's item was then); ``throttled``: DynamoDB throttled it past the retries."""
        now_ms = self._clock.now_ms() if now_ms is None else now_ms
        items: list[dict[str, Any]] = []
        results = []
        for pair in pairs:
            result = match_result(pair, now_ms)
            results.append((pair, result))
            items.append({"Update": self._tasks.match_update(pair.call, result, now_ms)})
            items.append({"Update": busy_update(self._table, pair, self._settings.seen_since_ms(now_ms), now_ms)})
            items += [{"Delete": entry_delete(self._table, key, pair.head.sort)} for key in pair.head.entries]
        if len(items) > matching.MAX_TRANSACT_ITEMS:
            raise matching.ProfileTooLarge(
                f"{len(pairs)} matches would write {len(items)} items in one TransactWriteItems, over DynamoDB's "
                f"limit of {matching.MAX_TRANSACT_ITEMS}: cut them with pairing.transactions"
            )
        cancelled = self._transact(items)
        if cancelled is None:
            return PairsResult(matched=tuple(results))
        if cancelled.throttled:
            return PairsResult(reasons=cancelled.reasons, throttled=True)
        lost = lost_in(pairs, cancelled.reasons)
        agents_read, entries_there, in_flight = {}, {}, set()
        at = 0
        for pair in pairs:
            agent_id = pair.head.agent_id
            if agent_id in lost.agents:
                item = cancelled.item(at + 1)
                if item is not None:
                    agents_read[agent_id] = agent_from_item(item)
                entries_there[agent_id] = entries_still_there(cancelled.reasons, at + 2, len(pair.head.entries))
            if pair.call.task_id in lost.calls and cancelled.reasons[at] == "TransactionConflict":
                in_flight.add(pair.call.task_id)
            at += pair.items
        return PairsResult(lost=lost, reasons=cancelled.reasons, agents_read=agents_read, entries_there=entries_there,
                           calls_in_flight=frozenset(in_flight))

    def settle_lost_agent(self, pair: Pair, result: PairsResult) -> LostAgent:
        """After ``result`` lost on the agent of ``pair``: take it offline if it was not seen for AGENT_TIMEOUT_SECONDS
        (``unseen``), delete its entries if they belong to no availability of it (``orphaned``: left by a profile
        change that raced a match before the match's condition held the entries). What became of it
        (``match_items.LostAgent``): ``changed`` and ``unknown`` may match on a fresh read."""
        agent_id = pair.head.agent_id
        agent = result.agents_read.get(agent_id)
        verdict = lost_agent(pair.head, agent, result.entries_there.get(agent_id, False),
                             self._settings.seen_since_ms(self._clock.now_ms()))
        if verdict is LostAgent.UNSEEN:
            assert agent is not None
            return LostAgent.UNSEEN if self.retire_if_unseen(pair.head, agent) else LostAgent.GONE
        if verdict is LostAgent.ORPHANED:
            return LostAgent.ORPHANED if self._transact(orphans_delete(self._table, pair.head)) is None else LostAgent.GONE
        return verdict
