"""The contact center's own events and the Matcher's reach, on moto and DynamoDB Local: a caller who hung up is never
matched (waiting, read by a matcher that is about to match it, or still shown by a lagging index); an agent not seen for
AGENT_TIMEOUT_SECONDS is never matched; a call deep in the queue (the last of 1,500) that alone fits an idle agent
is matched in one Matcher run, in a bounded number of reads; FIFO holds among the calls an agent fits.

The AWS facts these paths depend on are produced here: GSI lag (a stale index entry of a hung-up call),
TransactionConflict (a hang-up meeting the match transaction in flight), late TTL (an expired call still in the
table), and the 100-item transaction limit (timing out an agent with 98 entries)."""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from typing import Any

import pytest
from botocore.exceptions import ClientError

from taskqueue.core.errors import InvalidAgentInput, InvalidTaskInput, TaskNotFound
from taskqueue.core.model import new_tasks, parse_create_request
from taskqueue.core.states import TaskStatus
from taskqueue.matching.agents import AgentNotFound, AgentOutcome, AgentStatus, AgentStore
from taskqueue.matching.hangup import HangUpOutcome, hang_up
from taskqueue.matching.matcher import Matcher
from taskqueue.matching.rules import MAX_TRANSACT_ITEMS, MatchSettings, parse_profile
from taskqueue.services import MatcherServices
from taskqueue.store import TaskStore
from tests.agent_support import (  # noqa: F401 (fixture)
    AGENT_TABLE,
    agent_table,
    create_agent_table,
    create_calls,
    pair_of,
    profile,
)
from tests.support import LambdaContextStub, load_event, load_function

agent_events = load_function("agent_events")
matcher_app = load_function("matcher")
TIMEOUT = 120  # AgentTimeoutSeconds' default


@pytest.fixture
def msvc(services, agent_table) -> MatcherServices:
    return MatcherServices.of(services, MatchSettings(agent_table_name=AGENT_TABLE), agent_table)


def invoke(module: Any, event: dict[str, Any], svc: MatcherServices) -> dict[str, Any]:
    original = module.services
    module.services = lambda: svc
    try:
        return module.lambda_handler(event, LambdaContextStub())
    finally:
        module.services = original


def available(svc: MatcherServices, agent_id: str, languages=("fr",)) -> dict[str, Any]:
    agent = {"agentId": agent_id, "attributes": {"language": list(languages), "gender": ["f"]}}
    return invoke(agent_events, {"action": "agentAvailable", "agent": agent}, svc)


def event(svc: MatcherServices, **body: Any) -> dict[str, Any]:
    return invoke(agent_events, body, svc)


def wake(svc: MatcherServices) -> dict[str, Any]:
    return invoke(matcher_app, load_event("matcher-sns-wake.json"), svc)


# ---- a caller hangs up ---------------------------------------------------------------------------------------

def test_a_hung_up_caller_is_never_matched_and_the_hang_up_is_idempotent(msvc, store, clock):
    gone, stays = create_calls(store, clock.now_ms(), {"language": "fr"}, n=2)
    assert event(msvc, action="callerHungUp", callId=gone) == {"action": "callerHungUp", "callId": gone, "outcome": "hung-up"}
    assert event(msvc, action="callerHungUp", callId=gone)["outcome"] == "already-hung-up"
    available(msvc, "ana")
    report = wake(msvc)
    assert report["matched"] == 1 and store.get(stays).result["agentId"] == "ana"
    cancelled = store.get(gone)
    assert (cancelled.status, cancelled.last_error, cancelled.attempts) == (TaskStatus.CANCELLED, "caller hung up", 0)
    # A call matched before the caller hung up is reported as such, with its agent; nothing changes.
    assert event(msvc, action="callerHungUp", callId=stays) == {
        "action": "callerHungUp", "callId": stays, "outcome": "already-matched", "agentId": "ana"}
    assert store.get(stays).status is TaskStatus.SUCCESS


def test_a_hang_up_refuses_what_is_not_a_waiting_call_and_writes_nothing(msvc, store, clock):
    (task,) = new_tasks(parse_create_request({"queue": "work"}, store.settings), clock.now_ms(), store.settings)
    store.put_tasks([task])  # a task of queue "work" is no call
    with pytest.raises(InvalidTaskInput, match="is in queue 'work', not a call of queue 'calls'"):
        event(msvc, action="callerHungUp", callId=task.task_id)
    assert store.get(task.task_id).status is TaskStatus.PENDING
    with pytest.raises(TaskNotFound):
        event(msvc, action="callerHungUp", callId="no-such-call")
    for bad in (None, 7, "", "a#b"):
        with pytest.raises(InvalidAgentInput, match="callId must be"):
            event(msvc, action="callerHungUp", callId=bad)
    with pytest.raises(InvalidAgentInput, match="unknown field"):
        event(msvc, action="callerHungUp", callId=task.task_id, agentId="ana")


def test_a_caller_who_hangs_up_between_the_matchers_read_and_its_transaction_is_not_matched(msvc, store, clock):
    """The matcher has read the call and planned its agent; the caller hangs up before the match transaction: it
    loses on the call's condition (CANCELLED, no longer PENDING), and nothing of it is written: the agent stays
    queued for the next caller."""
    (call_id,) = create_calls(store, clock.now_ms(), {"language": "fr"})
    available(msvc, "ana")
    pair = pair_of(store, msvc.agents, call_id, "Q#gender=*#language=fr")
    assert hang_up(store, call_id, "calls").outcome is HangUpOutcome.HUNG_UP
    result = msvc.agents.match_pairs([pair])
    assert not result.committed and result.lost.calls == {call_id} and not result.lost.agents
    assert store.get(call_id).status is TaskStatus.CANCELLED
    assert msvc.agents.get("ana").status is AgentStatus.QUEUED


class StaleIndex(TaskStore):
    """A GSI shows writes late: its reads answer with the entries as they were at ``freeze`` (a hung-up call
    still looks PENDING there)."""

    frozen: list[Any] = []

    def iter_candidates(self, queue, limit, now_ms=None, *, shed=True, fair=None):
        return iter(list(StaleIndex.frozen))


def test_a_hung_up_call_the_index_still_shows_is_not_matched(msvc, services, agent_table, store, clock):
    gone, stays = create_calls(store, clock.now_ms(), {"language": "fr"}, n=2)
    StaleIndex.frozen = store.candidates("calls", 10)
    assert hang_up(store, gone, "calls").outcome is HangUpOutcome.HUNG_UP
    available(msvc, "ana")
    available(msvc, "bea")
    stale = StaleIndex(store._db, store.settings, clock)
    agents = AgentStore(agent_table, msvc.match_settings, stale, clock)
    report = Matcher(stale, agents, owner="matcher-1", clock=clock).run(5)
    # The plan gave the gone caller Ana: the transaction lost on that call's condition, wrote nothing, and the pass
    # planned again without it: the caller who stays gets Ana, the longest waiting. (The frozen index shows both
    # calls to every later pass too: each loses the same way, and the run ends after a pass without a match.)
    assert report.matched == 1 and report.lost >= 1 and report.conflicts >= 1
    assert store.get(gone).status is TaskStatus.CANCELLED
    assert store.get(stays).result["agentId"] == "ana"
    assert [a.agent_id for a in msvc.agents.queued_agents()] == ["bea"]  # nobody was given to the gone caller


class ConflictOnce:
    """DynamoDB answers the hang-up's write with TransactionConflictException while the match transaction is in
    flight; the transaction (run by ``in_flight``) commits first. botocore does not retry the conflict."""

    def __init__(self, client: Any, in_flight: Any) -> None:
        self._client = client
        self._in_flight = in_flight
        self.conflicts = 0

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._client, name)
        if name != "update_item":
            return real

        def update_item(**request: Any) -> Any:
            if self._in_flight is not None:
                commit, self._in_flight = self._in_flight, None
                commit()
            if self.conflicts < 2:
                self.conflicts += 1
                raise ClientError({"Error": {"Code": "TransactionConflictException", "Message": "in flight"}}, name)
            return real(**request)

        return update_item


def test_a_hang_up_that_meets_the_match_in_flight_reports_the_call_matched(msvc, store, clock):
    (call_id,) = create_calls(store, clock.now_ms(), {"language": "fr"})
    available(msvc, "ana")
    pair = pair_of(store, msvc.agents, call_id, "Q#gender=*#language=fr")

    def match() -> None:
        assert msvc.agents.match_pairs([pair]).committed

    conflicting = ConflictOnce(store._db, match)
    done = hang_up(TaskStore(conflicting, store.settings, clock), call_id, "calls")
    assert conflicting.conflicts == 2
    assert (done.outcome, done.agent_id) == (HangUpOutcome.ALREADY_MATCHED, "ana")
    assert store.get(call_id).status is TaskStatus.SUCCESS


def test_a_hang_up_that_meets_a_conflict_and_wins_cancels_the_call(msvc, store, clock):
    (call_id,) = create_calls(store, clock.now_ms(), {"language": "fr"})
    conflicting = ConflictOnce(store._db, None)
    assert hang_up(TaskStore(conflicting, store.settings, clock), call_id, "calls").outcome is HangUpOutcome.HUNG_UP
    assert conflicting.conflicts == 2 and store.get(call_id).status is TaskStatus.CANCELLED


def test_a_call_past_its_patience_but_not_yet_deleted_is_never_matched(msvc, store, clock):
    """DynamoDB's TTL deletes late: the expired call is still in the table and the index. The Matcher sheds it
    instead of matching it; a hang-up afterwards says its patience had run out."""
    (late,) = create_calls(store, clock.now_ms(), {"language": "fr"}, ttl=5)
    clock.advance(10)
    available(msvc, "ana")
    report = wake(msvc)
    assert (report["matched"], report["shed"]) == (0, 1)
    assert store.get(late).status is TaskStatus.SHED and msvc.agents.get("ana").status is AgentStatus.QUEUED
    assert event(msvc, action="callerHungUp", callId=late)["outcome"] == "expired"


# ---- agents who are not seen any more --------------------------------------------------------------------------

def test_an_agent_not_seen_for_the_timeout_is_never_matched(msvc, store, clock):
    available(msvc, "ana")  # longest waiting, then silent
    clock.advance(60)
    available(msvc, "bea")
    clock.advance(TIMEOUT - 30)  # ana not seen for 150 s, bea for 90 s
    (first,) = create_calls(store, clock.now_ms(), {"language": "fr"})
    clock.advance(0.001)  # created a millisecond apart: first is first in FIFO order
    (second,) = create_calls(store, clock.now_ms(), {"language": "fr"})
    report = wake(msvc)
    assert report["matched"] == 1 and report["timed_out"] == 1
    assert store.get(first).result["agentId"] == "bea"
    assert store.get(second).status is TaskStatus.PENDING and store.get(second).attempts == 0
    ana = msvc.agents.get("ana")
    assert (ana.status, ana.offline_reason, ana.entries) == (AgentStatus.OFFLINE, "timeout", ())
    # Its heartbeat says it was dropped; available again, it is matched.
    assert event(msvc, action="agentHeartbeat", agentId="ana")["outcome"] == "timed-out"
    available(msvc, "ana")
    assert wake(msvc)["matched"] == 1 and store.get(second).result["agentId"] == "ana"


def test_a_heartbeat_keeps_an_agent_matchable_in_its_place(msvc, store, clock):
    available(msvc, "ana")
    clock.advance(1)
    available(msvc, "bea")
    for _ in range(4):  # 4 x 50 s: longer than the timeout, seen all along
        clock.advance(50)
        assert event(msvc, action="agentHeartbeat", agentId="ana")["outcome"] == "seen"
        assert event(msvc, action="agentHeartbeat", agentId="bea")["outcome"] == "seen"
    (call,) = create_calls(store, clock.now_ms(), {"language": "fr"})
    assert wake(msvc)["matched"] == 1
    assert store.get(call).result["agentId"] == "ana"  # still the longest waiting
    with pytest.raises(AgentNotFound):
        event(msvc, action="agentHeartbeat", agentId="nobody")


def test_a_heartbeat_does_not_bring_back_an_agent_who_went_offline(msvc):
    available(msvc, "ana")
    event(msvc, action="agentOffline", agentId="ana")
    assert event(msvc, action="agentHeartbeat", agentId="ana")["outcome"] == "already-offline"
    assert msvc.agents.get("ana").status is AgentStatus.OFFLINE


def test_agents_never_time_out_when_the_timeout_is_zero(services, agent_table, store, clock):
    svc = MatcherServices.of(services, MatchSettings(agent_table_name=AGENT_TABLE, agent_timeout_seconds=0), agent_table)
    available(svc, "ana")
    clock.advance(10 * 86400)
    (call,) = create_calls(store, clock.now_ms(), {"language": "fr"})
    assert wake(svc)["matched"] == 1 and store.get(call).result["agentId"] == "ana"


# DynamoDB Local enforces the 100-item limit (moto does not, and copies the table per item written: ~25 s here).
@pytest.mark.dynamodb_local_only
def test_timing_out_an_agent_of_98_combinations_fits_one_transaction(services, dynamodb, store, clock):
    """The largest profile the 100-item limit allows (98 entries: the match writes 100 items) is taken offline in
    one transaction of 99 items (DynamoDB Local enforces the limit)."""
    attributes = ("a", "b", "c")
    create_agent_table(dynamodb, "big-agents", stream=False)
    settings = MatchSettings(agent_table_name="big-agents", attributes=attributes)
    svc = MatcherServices.of(services, settings, dynamodb)
    big = parse_profile({"agentId": "big", "attributes": {"a": ["x"], "b": list("pqrstu"), "c": list("ghijkl")}}, attributes)
    assert len(big.attributes) == 3 and 2 * 7 * 7 == MAX_TRANSACT_ITEMS - 2
    assert svc.agents.put_available(big) is AgentOutcome.QUEUED
    clock.advance(TIMEOUT + 1)
    (call,) = create_calls(store, clock.now_ms(), {"b": "p"})
    report = Matcher(store, svc.agents, owner="m", clock=clock).run(5)
    assert (report.matched, report.timed_out) == (0, 1)
    assert svc.agents.get("big").status is AgentStatus.OFFLINE and svc.agents.depth("Q#a=*#b=*#c=*") == 0
    assert store.get(call).status is TaskStatus.PENDING


class ItemCounting:
    """Records how many items each TransactWriteItems request carried."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.transactions: list[int] = []

    def transact_write_items(self, **request: Any) -> Any:
        self.transactions.append(len(request["TransactItems"]))
        return self._client.transact_write_items(**request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


@pytest.mark.dynamodb_local_only
def test_match_transactions_are_cut_at_100_items_which_dynamodb_local_enforces(services, dynamodb, store, clock):
    """Three agents of 48 entries (a match writes 50 items each) and three calls: two matches fill one transaction of
    exactly 100 items, the third goes in a second one. DynamoDB Local refuses 101 items, as DynamoDB does."""
    attributes = ("a", "b", "c")
    create_agent_table(dynamodb, "wide-agents", stream=False)
    counting = ItemCounting(dynamodb)
    agents = AgentStore(counting, MatchSettings(agent_table_name="wide-agents", attributes=attributes), store, clock)
    for agent_id in ("ana", "bea", "cem"):
        wide = parse_profile({"agentId": agent_id, "attributes": {"a": ["x"], "b": list("pqr"), "c": list("ghijk")}}, attributes)
        assert agents.put_available(wide) is AgentOutcome.QUEUED
        clock.advance(0.001)
    calls = []
    for _ in range(3):  # a millisecond apart: their FIFO order is the order made
        calls += create_calls(store, clock.now_ms(), {"b": "p"})
        clock.advance(0.001)
    counting.transactions.clear()
    report = Matcher(store, agents, owner="m", clock=clock).run(5)
    assert report.matched == 3 and counting.transactions == [100, 50]
    assert [store.get(c).result["agentId"] for c in calls] == ["ana", "bea", "cem"]
    with pytest.raises(ClientError) as refused:  # the limit the cut keeps under
        dynamodb.transact_write_items(TransactItems=[
            {"Put": {"TableName": "wide-agents", "Item": {"pk": {"S": f"x{i}"}, "sk": {"S": "s"}}}} for i in range(101)])
    assert refused.value.response["Error"]["Code"] == "ValidationException"


# ---- the Matcher's reach: anywhere in the waiting calls -------------------------------------------------------

class CountingClient:
    """Counts the DynamoDB requests made through it, by operation."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.requests: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._client, name)
        if not callable(real) or name.startswith("_") or name in ("meta", "exceptions", "get_paginator"):
            return real

        def counted(*args: Any, **kwargs: Any) -> Any:
            key = kwargs.get("Key", {}).get("taskId", {}).get("S", "")
            # The queue's record (the planner's lease) is counted apart from the tasks.
            self.requests[f"{name} (queue control)" if key.startswith("queue#") else name] += 1
            return real(*args, **kwargs)

        return counted


def test_the_last_of_1500_waiting_calls_is_matched_in_one_run_in_a_bounded_number_of_reads(
    services, agent_table, store, clock
):
    """1,499 callers want German (nobody speaks it); the last wants French, and Ana does. Before, a pass looked at
    the first 1,000 calls and the run ended after a pass without a match: the French caller waited for the German
    ones to be matched or to hang up."""
    blocked = create_calls(store, clock.now_ms(), {"language": "de"}, n=1000)
    blocked += create_calls(store, clock.now_ms(), {"language": "de"}, n=499)
    clock.advance(0.001)
    (last,) = create_calls(store, clock.now_ms(), {"language": "fr"})
    counting_tasks = CountingClient(store._db)
    counting_agents = CountingClient(agent_table)
    tasks = TaskStore(counting_tasks, dataclasses.replace(store.settings, page_size=100), clock)  # the Matcher's PAGE_SIZE
    agents = AgentStore(counting_agents, MatchSettings(agent_table_name=AGENT_TABLE), tasks, clock)
    agents.put_available(profile("ana", ["fr"]))
    counting_agents.requests.clear()

    report = Matcher(tasks, agents, owner="m", clock=clock).run(60)

    assert report.matched == 1 and report.stopped_by == "no-progress"
    assert store.get(last).result["agentId"] == "ana"
    assert {store.get(c).status for c in itertools.islice(blocked, 0, 1500, 97)} == {TaskStatus.PENDING}
    # The bound (docs/matcher.md): per pass, one read of the idle agents, 1 + ceil(W / PAGE_SIZE) index pages,
    # ceil(W_new / 100) BatchGetItem of preferences (W_new: calls not seen before), and one match transaction per
    # 100 items of pairs; no head read, no claim. W = 1,500: pass 1 reads 16 pages and 15 batches; pass 2 finds no
    # agent idle and reads no call.
    reads = counting_tasks.requests
    assert reads["query"] == 1 + (1 + 1500 // 100), reads  # the lease recovery, pass 1's walk
    assert reads["batch_get_item"] == 1500 // 100, reads
    assert reads.get("update_item", 0) == 0 and reads.get("scan", 0) == 0, reads  # no task written but the match
    assert reads["update_item (queue control)"] == 2, reads  # the planner's lease: taken, then released
    assert counting_agents.requests["query"] == 2, counting_agents.requests  # idle agents x 2 passes
    assert counting_agents.requests["transact_write_items"] == 1


def test_fifo_holds_among_the_calls_an_agent_fits_across_pages(msvc, store, clock):
    """Calls an agent fits, scattered behind 250 calls no agent fits, are matched oldest first, each with the
    longest-waiting agent that fits it; a later fitting call waits for the next agent."""
    create_calls(store, clock.now_ms(), {"language": "de"}, n=250)
    fitting = []
    for _ in range(3):
        clock.advance(0.001)
        fitting += create_calls(store, clock.now_ms(), {"language": "fr"})
        clock.advance(0.001)
        create_calls(store, clock.now_ms(), {"language": "de"}, n=40)
    available(msvc, "ana")
    clock.advance(1)
    available(msvc, "bea", ["fr", "en"])
    assert wake(msvc)["matched"] == 2
    assert [store.get(c).result["agentId"] if store.get(c).result else None for c in fitting] == ["ana", "bea", None]
    invoke(agent_events, {"action": "callEnded", "agentId": "ana"}, msvc)
    assert wake(msvc)["matched"] == 1 and store.get(fitting[2]).result["agentId"] == "ana"
