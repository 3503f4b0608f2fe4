"""The matching queue under AWS's rules, on moto and DynamoDB Local, through the functions' handlers (so every
request is checked against the function's role as template.yaml grants it: tests/iam_support.py):

1. an agent not seen for the timeout is taken offline with what the Matcher's role allows (no GetItem of the agent);
2. a callEnded sent again after the agent took the next call never queues the agent while it is on that call;
3. a profile change that adds combinations while a match is planned leaves no entry of a busy agent behind;
4. a lost race that leaves a fitting pair unmatched makes the run report work remaining (a tail call); a match
   transaction DynamoDB throttles is retried, then ends the run reporting work remaining instead of failing it; a pass
   longer than the planner's lease keeps it (a matcher started meanwhile does not plan too), and a planner whose
   lease another matcher took after all stops planning;
5. an agent who stays busy: its heartbeat names its call, past AGENT_BUSY_TIMEOUT_SECONDS says so and counts it, an
   agentAvailable then ends the call;
6. a warm Matcher reads a call's preferences once; a match whose answer was lost is sent again as the same
   transaction (ClientRequestToken) and counts as matched, not as a lost race; a helper never takes a chunk of a plan
   that expires before it could write it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from botocore.exceptions import ClientError, ReadTimeoutError

from taskqueue.core.errors import InvalidAgentInput
from taskqueue.core.states import TaskStatus
from taskqueue.matching import pairing
from taskqueue.matching.agents import AgentStatus
from taskqueue.matching.rules import MatchSettings
from taskqueue.matching.shared_plan import PLAN_SECONDS, SharedPlan
from taskqueue.services import MatcherServices
from taskqueue.store import PlanHead
from taskqueue.store.record import PLANNER_LEASE_SECONDS
from tests.agent_support import AGENT_TABLE, agent_table, create_calls, entries_by_agent, pair_of  # noqa: F401
from tests.support import LambdaContextStub, load_event, load_function, metric_totals

agent_events = load_function("agent_events")
matcher_app = load_function("matcher")
TIMEOUT = 120  # AgentTimeoutSeconds' default
FR_ANY = "Q#gender=*#language=fr"


def matcher_services(services: Any, agent_client: Any, **settings: Any) -> MatcherServices:
    return MatcherServices.of(services, MatchSettings(agent_table_name=AGENT_TABLE, **settings), agent_client)


@pytest.fixture
def msvc(services, agent_table) -> MatcherServices:
    return matcher_services(services, agent_table)


def invoke(module: Any, event: dict[str, Any], svc: MatcherServices) -> dict[str, Any]:
    original = module.services
    module.services = lambda: svc
    try:
        return module.lambda_handler(event, LambdaContextStub())
    finally:
        module.services = original


def available(svc: MatcherServices, agent_id: str, languages: tuple[str, ...] = ("fr",)) -> dict[str, Any]:
    agent = {"agentId": agent_id, "attributes": {"language": list(languages), "gender": ["f"]}}
    return invoke(agent_events, {"action": "agentAvailable", "agent": agent}, svc)


def event(svc: MatcherServices, **body: Any) -> dict[str, Any]:
    return invoke(agent_events, body, svc)


def wake(svc: MatcherServices) -> dict[str, Any]:
    return invoke(matcher_app, load_event("matcher-sns-wake.json"), svc)


class Intercepted:
    """An agent-table client whose match transactions (those that set an agent busy) go through ``before`` first:
    it may raise what DynamoDB answers, or act as another party (``unchecked``: not the Matcher's requests)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.before: Any = None
        self.sent: list[dict[str, Any]] = []

    def transact_write_items(self, **request: Any) -> Any:
        self.sent.append(request)
        if self.before is not None and any(":busy" in (i.get("Update", {}).get("ExpressionAttributeValues") or {})
                                           for i in request["TransactItems"]):
            before, self.before = self.before, None
            outcome = before(request)
            if outcome is not None:
                return outcome
        return self._client.transact_write_items(**request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def cancelled(request: dict[str, Any], code_of: Any) -> ClientError:
    """TransactionCanceledException with ``code_of(index, item)`` as each item's reason."""
    reasons = [{"Code": code_of(i, item)} for i, item in enumerate(request["TransactItems"])]
    return ClientError({"Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
                        "CancellationReasons": reasons}, "TransactWriteItems")


def is_agent_item(item: dict[str, Any]) -> bool:
    return item.get("Update", {}).get("Key", {}).get("sk", {}).get("S") == "PROFILE"


# ---- 1. a permission only AWS enforces ------------------------------------------------------------------------

def test_an_agent_not_seen_for_the_timeout_is_taken_offline_with_what_the_matchers_role_allows(msvc, store, clock):
    """The match refuses ana (not seen for 150 s); the Matcher learns it from the refusal itself (the agent item
    returned with the cancellation: no GetItem, which its role does not grant) and takes her offline."""
    available(msvc, "ana")
    clock.advance(60)
    available(msvc, "bea")
    clock.advance(TIMEOUT - 30)
    (call,) = create_calls(store, clock.now_ms(), {"language": "fr"})
    report = wake(msvc)
    assert (report["matched"], report["timed_out"]) == (1, 1), report
    assert store.get(call).result["agentId"] == "bea"
    ana = msvc.agents.get("ana")
    assert (ana.status, ana.offline_reason, ana.entries) == (AgentStatus.OFFLINE, "timeout", ())


# ---- 2. an agent given twice -------------------------------------------------------------------------------------

def test_a_call_ended_sent_again_after_the_agent_took_the_next_call_leaves_the_agent_on_it(msvc, store, clock):
    available(msvc, "ana")
    (first,) = create_calls(store, clock.now_ms(), {"language": "fr"})
    assert wake(msvc)["matched"] == 1
    assert event(msvc, action="callEnded", agentId="ana", callId=first)["outcome"] == "queued"
    clock.advance(1)
    (second,) = create_calls(store, clock.now_ms(), {"language": "fr"})
    assert wake(msvc)["matched"] == 1 and msvc.agents.get("ana").busy_with == second
    # The first callEnded's answer was lost and the contact center sends it again, now that ana is on the second call.
    with pytest.raises(InvalidAgentInput, match="callEnded needs the callId"):
        event(msvc, action="callEnded", agentId="ana")
    assert event(msvc, action="callEnded", agentId="ana", callId=first)["outcome"] == "stale"
    clock.advance(1)
    (third,) = create_calls(store, clock.now_ms(), {"language": "fr"})
    assert wake(msvc)["matched"] == 0
    assert msvc.agents.get("ana").busy_with == second and store.get(third).status is TaskStatus.PENDING


# ---- 3. entries nobody deletes --------------------------------------------------------------------------------------

def test_a_profile_change_that_adds_combinations_while_a_match_is_planned_leaves_no_entry_behind(services, agent_table,
                                                                                                   store, clock):
    """The Matcher has planned ana for the call; before its transaction, ana's profile gains English (her place kept,
    her fr entries rewritten, en entries added). The match must not make her busy with the en entries left: they
    would show a busy agent waiting for good (depth, head, taskq agents)."""
    intercepted = Intercepted(agent_table)
    svc = matcher_services(services, intercepted)
    available(svc, "ana")
    (call,) = create_calls(store, clock.now_ms(), {"language": "fr"})

    def profile_changes(_request: dict[str, Any]) -> None:  # AgentEvents' handler: checked as AgentEvents' requests
        assert available(svc, "ana", ("fr", "en"))["outcome"] == "requeued"

    intercepted.before = profile_changes
    first = wake(svc)
    if first["matched"] == 0:  # refused on the changed agent: a fresh read matches her, and the run says so
        assert first["work_remains"] is True, first
        assert wake(svc)["matched"] == 1
    ana = svc.agents.get("ana")
    assert (ana.status, ana.busy_with) == (AgentStatus.BUSY, call)
    assert "ana" not in entries_by_agent(agent_table), "entries of a busy agent were left behind"
    assert svc.agents.depth("Q#gender=*#language=en") == 0


def test_entries_a_racing_profile_change_left_behind_before_are_deleted_when_a_match_meets_them(msvc, agent_table,
                                                                                                 store, clock):
    """Entries of an agent who is busy (left by the race above before its fix) are planned by every pass and refused:
    the Matcher deletes them, under a check that the agent is not queued in that availability, and the run ends."""
    available(msvc, "ana")
    (call,) = create_calls(store, clock.now_ms(), {"language": "fr"})
    sort = msvc.agents.get("ana").queue_sort
    assert wake(msvc)["matched"] == 1
    for key in ("Q#gender=*#language=*", FR_ANY):  # the orphans: entries of ana's old availability
        agent_table.put_item(TableName=AGENT_TABLE, Item={
            "pk": {"S": key}, "sk": {"S": sort}, "entity": {"S": "entry"}, "queue": {"S": "calls"},
            "agentId": {"S": "ana"}, "agentName": {"S": "Ana"}, "availableSince": {"N": "1"},
            "entries": {"L": [{"S": "Q#gender=*#language=*"}, {"S": FR_ANY}]}})
    clock.advance(1)
    (waiting,) = create_calls(store, clock.now_ms(), {"language": "fr"})
    report = wake(msvc)
    assert (report["matched"], report["orphans_removed"], report["work_remains"]) == (0, 1, False), report
    assert "ana" not in entries_by_agent(agent_table)
    assert msvc.agents.get("ana").busy_with == call and store.get(waiting).status is TaskStatus.PENDING


# ---- 4. stalls of up to a minute -------------------------------------------------------------------------------------

def test_a_lost_race_that_leaves_a_fitting_pair_unmatched_makes_the_run_report_work_remaining(services, agent_table,
                                                                                                store, clock):
    """ana's item is inside another transaction (a heartbeat, another event) whenever this run's match reaches it:
    the match is cancelled with TransactionConflict on her item, she is still queued, and the call still waits. The
    run must not end as if nothing could match: it reports work remaining (the handler tail-calls), and the next run
    matches them."""
    intercepted = Intercepted(agent_table)
    svc = matcher_services(services, intercepted)
    available(svc, "ana")
    (call,) = create_calls(store, clock.now_ms(), {"language": "fr"})
    in_flight = {"during this run": True}

    def conflict_on_the_agent(request: dict[str, Any]) -> None:
        if in_flight["during this run"]:
            intercepted.before = conflict_on_the_agent
            raise cancelled(request, lambda i, item: "TransactionConflict" if is_agent_item(item) else "None")

    intercepted.before = conflict_on_the_agent
    report = wake(svc)
    assert (report["matched"], report["work_remains"]) == (0, True), report
    assert report["left_by_races"] >= 1 and store.get(call).status is TaskStatus.PENDING
    in_flight["during this run"] = False
    assert wake(svc)["matched"] == 1 and store.get(call).result["agentId"] == "ana"


def test_a_match_transaction_throttled_inside_is_retried_then_ends_the_run_reporting_work_remaining(
        services, agent_table, store, clock, capsys):
    intercepted = Intercepted(agent_table)
    svc = matcher_services(services, intercepted)
    available(svc, "ana")
    (call,) = create_calls(store, clock.now_ms(), {"language": "fr"})
    throttles = {"left": 2}

    def throttled(request: dict[str, Any]) -> None:
        if throttles["left"] > 0:
            throttles["left"] -= 1
            intercepted.before = throttled
            raise cancelled(request, lambda i, item: "ThrottlingError" if i == 0 else "None")

    intercepted.before = throttled  # twice, then it goes through: retried within the run
    assert wake(svc)["matched"] == 1 and store.get(call).result["agentId"] == "ana"
    event(svc, action="callEnded", agentId="ana", callId=call)
    clock.advance(1)
    (later,) = create_calls(store, clock.now_ms(), {"language": "fr"})
    throttles["left"] = 100  # throttled at every retry: the run ends, reporting work remaining; nothing was written
    intercepted.before = throttled
    capsys.readouterr()
    report = wake(svc)
    assert (report["matched"], report["stopped_by"], report["work_remains"], report["throttled"]) == \
        (0, "throttled", True, 1), report
    assert metric_totals(capsys.readouterr().out).get("MatchesThrottled") == 1
    assert store.get(later).status is TaskStatus.PENDING and svc.agents.get("ana").status is AgentStatus.QUEUED
    throttles["left"] = 0
    assert wake(svc)["matched"] == 1


class Ticking(Intercepted):
    """Intercepted, and each read of the agents takes 0.1 s of the clock: a run that loops without end meets its
    budget (and the test fails) instead of hanging."""

    def __init__(self, client: Any, clock: Any) -> None:
        super().__init__(client)
        self._clock = clock

    def query(self, **request: Any) -> Any:
        self._clock.advance(0.1)
        return self._client.query(**request)


def many_pairs(svc: MatcherServices, store: Any, clock: Any, n: int = 20) -> list[str]:
    """``n`` agents and calls that fit them: more than one match transaction (16 pairs of 6 items each fill one),
    fewer agents than MATCH_HELPER_MIN_AGENTS (the planner writes them itself)."""
    for i in range(n):
        available(svc, f"agent-{i:02}")
    return create_calls(store, clock.now_ms(), {"language": "fr"}, n=n)


def test_a_pass_longer_than_the_planners_lease_keeps_it(services, agent_table, store, clock):
    """Each match transaction takes most of the lease (a slow DynamoDB, retries): a matcher started by the streams
    meanwhile must find a live planner (and knock), not plan the same calls too."""
    intercepted = Ticking(agent_table, clock)
    svc = matcher_services(services, intercepted)
    calls = many_pairs(svc, store, clock)
    taken_by_another: list[int | None] = []

    def slow(_request: dict[str, Any]) -> None:
        intercepted.before = slow
        clock.advance(PLANNER_LEASE_SECONDS - 1)
        taken_by_another.append(store.take_planner("calls", "started-meanwhile", clock.now_ms()))

    intercepted.before = slow
    report = wake(svc)
    assert report["matched"] == len(calls) and len(taken_by_another) >= 2, report
    assert taken_by_another == [None] * len(taken_by_another), "the lease lapsed while its planner still planned"


def test_a_planner_whose_lease_another_matcher_took_stops_planning(services, agent_table, store, clock):
    """A match transaction outlasts the lease (a pause of the run's process) and a matcher started meanwhile takes
    it: the first must not go on planning beside the new planner; what it left is the new planner's."""
    intercepted = Ticking(agent_table, clock)
    svc = matcher_services(services, intercepted)
    calls = many_pairs(svc, store, clock)

    def stalled(_request: dict[str, Any]) -> None:
        clock.advance(PLANNER_LEASE_SECONDS + 1)
        assert store.take_planner("calls", "started-meanwhile", clock.now_ms()) is not None

    intercepted.before = stalled
    report = wake(svc)
    assert (report["stopped_by"], report["work_remains"]) == ("replaced", False), report
    assert 0 < report["matched"] < len(calls), report
    clock.advance(PLANNER_LEASE_SECONDS + 1)
    assert wake(svc)["matched"] == len(calls) - report["matched"]


# ---- 5. an agent busy forever ---------------------------------------------------------------------------------------

def test_an_agent_who_stays_busy_is_told_its_call_and_past_the_busy_timeout_counted_and_released(msvc, store, clock,
                                                                                                  capsys):
    available(msvc, "ana")
    (call,) = create_calls(store, clock.now_ms(), {"language": "fr"})
    assert wake(msvc)["matched"] == 1
    busy_since = msvc.agents.get("ana").busy_since_ms
    beat = event(msvc, action="agentHeartbeat", agentId="ana")
    assert (beat["outcome"], beat["callId"], beat["busySince"]) == ("busy", call, busy_since)
    again = available(msvc, "ana")
    assert (again["outcome"], again["callId"]) == ("still-busy", call)
    # Its callEnded was lost: an hour on, the heartbeat says so and the metric counts it, for an alarm.
    clock.advance(3600 + 1)
    capsys.readouterr()
    beat = event(msvc, action="agentHeartbeat", agentId="ana")
    assert (beat["outcome"], beat["callId"]) == ("busy-too-long", call)
    assert metric_totals(capsys.readouterr().out).get("AgentsBusyTooLong") == 1
    assert msvc.agents.get("ana").status is AgentStatus.BUSY  # a heartbeat never ends a call
    # The agent's softphone comes back: its agentAvailable ends the call the agent was stranded on.
    back = available(msvc, "ana")
    assert (back["outcome"], back["endedCall"]) == ("queued", call)
    assert msvc.agents.get("ana").status is AgentStatus.QUEUED


# ---- 6. smaller ----------------------------------------------------------------------------------------------------

class Counting:
    def __init__(self, client: Any) -> None:
        self._client = client
        self.requests: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._client, name)
        if not callable(real):
            return real

        def call(*args: Any, **kwargs: Any) -> Any:
            self.requests[name] += 1
            return real(*args, **kwargs)

        return call


def test_a_warm_matcher_reads_a_waiting_calls_preferences_once(services, agent_table, store, clock):
    """Each wake-up of one execution environment (the handler's services live as long as it) walks the waiting calls;
    their preferences never change, so only the first reads them."""
    counting = Counting(services.store._db)
    services.store._db = counting
    svc = matcher_services(services, agent_table)
    available(svc, "ana", ("en",))
    create_calls(store, clock.now_ms(), {"language": "fr"}, n=30)
    assert wake(svc)["no_agent"] >= 30 and counting.requests["batch_get_item"] == 1
    assert wake(svc)["no_agent"] >= 30 and counting.requests["batch_get_item"] == 1  # the second: none


class AnswerLost:
    """The first match transaction commits, then its answer is lost (a read timeout after botocore's own retries). A
    transaction sent again with the same ClientRequestToken is answered as the first was: DynamoDB Local itself,
    and on moto (which keeps no tokens) this double, as DynamoDB documents it."""

    def __init__(self, client: Any, engine_keeps_tokens: bool) -> None:
        self._client = client
        self._keeps = engine_keeps_tokens
        self.committed: dict[str, Any] = {}
        self.lose_next = True

    def transact_write_items(self, **request: Any) -> Any:
        token = request.get("ClientRequestToken")
        if not self._keeps and token in self.committed:
            return self.committed[token]
        answer = self._client.transact_write_items(**request)
        if token is not None:
            self.committed[token] = answer
        if self.lose_next:
            self.lose_next = False
            raise ReadTimeoutError(endpoint_url="https://dynamodb.us-east-1.amazonaws.com")
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_match_whose_answer_was_lost_is_sent_again_as_the_same_transaction_and_counts_as_matched(
        services, agent_table, store, clock, dynamodb_engine):
    lossy = AnswerLost(agent_table, engine_keeps_tokens=dynamodb_engine == "local")
    svc = matcher_services(services, lossy)
    lossy.lose_next = False
    available(svc, "ana")
    (call,) = create_calls(store, clock.now_ms(), {"language": "fr"})
    lossy.lose_next = True
    report = wake(svc)
    assert (report["matched"], report["conflicts"], report["lost"]) == (1, 0, 0), report
    assert store.get(call).result["agentId"] == "ana" and svc.agents.get("ana").busy_with == call
    # An agent event's transaction too: its outcome is what happened (queued, so the Matcher is woken), not a re-read.
    lossy.lose_next = True
    assert event(svc, action="callEnded", agentId="ana", callId=call)["outcome"] == "queued"


def test_a_helper_never_takes_a_chunk_of_a_plan_that_expires_before_it_could_write_it(msvc, store, clock):
    available(msvc, "ana")
    (call,) = create_calls(store, clock.now_ms(), {"language": "fr"})
    chunk = [pair_of(store, msvc.agents, call, FR_ANY)]
    head = PlanHead("planner#1", 1, clock.now_ms() + int(PLAN_SECONDS * 1000))
    store.publish_plan("calls", head, [pairing.encode_chunk(chunk)])
    written: list[Any] = []
    helper = SharedPlan(store, "calls", "helper-1", clock, written.append)
    clock.advance(PLAN_SECONDS - 0.5)  # the planner plans these pairs again in half a second
    assert helper.work(head, deadline=clock.monotonic() + 60) == set() and written == []
    clock.advance(1)
    assert store.take_chunk("calls", head, 0, "helper-2") is None  # expired: the store refuses it too
    assert store.get(call).status is TaskStatus.PENDING
