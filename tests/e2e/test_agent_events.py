"""Synchronous invokes and reserved concurrency on the local engine, as Lambda has them: an invoke of a function
whose every reserved slot is taken is refused at once with HTTP 429 TooManyRequestsException (it does not wait),
so agent events go to AgentEventsFunction (no reserved concurrency), never to the Matcher, whose only slot a
matching run holds for up to its time budget."""

from __future__ import annotations

import json
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from local.__main__ import main as local_main
from tests.support import ROOT, load_event

pytestmark = pytest.mark.e2e

# The copy's ProcessTasks gets no wake-ups (its subscription filters on a queue no one uses): only the test
# invokes it, so the test knows which invocation holds its slot.
NO_WORK_WAKEUPS = ("queue: [work]", "queue: [nothing-here]")  # nothing but direct invokes start ProcessTasks:
NO_WORK_STREAM = ('"queue": {"S": ["work"]}', '"queue": {"S": ["nothing-here"]}')  # no wake-up, no stream start


def test_a_synchronous_invoke_over_reserved_concurrency_is_refused_at_once(start_engine, template_copy):
    path = template_copy(lambda text: text.replace(*NO_WORK_WAKEUPS).replace(*NO_WORK_STREAM))
    engine = start_engine({"FakeRunnerDurationSeconds": 4, "ProcessTasksConcurrency": 1}, template=path)
    pool = engine.pools["ProcessTasksFunction"]
    assert pool.limit == 1  # ReservedConcurrentExecutions: ProcessTasksConcurrency (1)
    assert engine.invoke("CreateTasksFunction", {"queue": "work", "count": 1}).ok
    with ThreadPoolExecutor(1) as executor:
        holder = executor.submit(engine.invoke, "ProcessTasksFunction", load_event("process_tasks-direct.json"))
        # The holder's run has claimed the task and runs it for 4 s: the only slot is taken.
        assert engine.wait_for(lambda: engine.observer.counts()["TAKEN"] == 1, timeout=20, interval=0.05)
        assert pool.busy == 1

        started = time.monotonic()
        refused = engine.invoke("ProcessTasksFunction", load_event("process_tasks-direct.json"))
        waited = time.monotonic() - started

        assert refused.throttled and not refused.ok and refused.result is None
        assert refused.error["errorType"] == "TooManyRequestsException"
        assert refused.error["statusCode"] == 429
        assert refused.error["reason"] == "ReservedFunctionConcurrentInvocationLimitExceeded"
        assert waited < 1.0, f"the invoke waited {waited:.1f} s for the slot instead of being refused"
        assert not holder.done() and pool.busy == 1  # refused while the other run still held the slot
        run = holder.result(timeout=30)
    assert run.ok, run.error
    assert engine.wait_for(lambda: engine.observer.counts()["SUCCESS"] == 1, timeout=10)  # the holder's task
    assert pool.stats["throttles"] == 1 and pool.stats["invocations"] == 1
    assert [i["source"] for i in engine.invocations if i["function"] == "ProcessTasksFunction"] == ["direct"]
    assert engine.invoke("ProcessTasksFunction", load_event("process_tasks-direct.json")).ok  # the slot is free again


def test_an_agent_event_is_served_while_a_matcher_run_holds_the_matchers_only_slot(start_engine):
    engine = start_engine({"MatcherConcurrency": 1})
    matcher = engine.pools["MatcherFunction"]
    assert matcher.limit == 1  # ReservedConcurrentExecutions: MatcherConcurrency (1)
    assert engine.functions["AgentEventsFunction"].reserved_concurrency is None
    caller = {"queue": "calls", "count": 1, "ttlSeconds": 120, "payload": {"caller": "c1", "preferences": {"language": "fr"}}}
    created = engine.invoke("CreateTasksFunction", caller)
    assert created.ok, created.error
    call_id = created.result["taskIds"][0]
    # The call's stream start runs the Matcher once (no agent yet: the call waits); its environment stays warm.
    assert engine.wait_for(lambda: matcher.stats["invocations"] >= 1 and not engine.busy(), timeout=30)

    # A matching run that takes long: the Matcher's one environment is paused, then given a wake-up.
    (environment,) = matcher._idle
    os.kill(environment.proc.pid, signal.SIGSTOP)
    try:
        with ThreadPoolExecutor(1) as executor:
            run = executor.submit(engine.invoke, "MatcherFunction", load_event("matcher-sns-wake.json"))
            assert engine.wait_for(lambda: matcher.busy == 1, timeout=5, interval=0.02)

            # An agent logs in meanwhile: served by AgentEvents, not held up by the matching run.
            agent = {"action": "agentAvailable", "agent": {"agentId": "ana", "attributes": {"language": ["fr"], "gender": ["f"]}}}
            served = engine.invoke("AgentEventsFunction", agent)
            assert served.ok, served.error
            assert served.result == {"action": "agentAvailable", "agentId": "ana", "outcome": "queued"}
            depth = engine.invoke("AgentEventsFunction", load_event("agent_events-queue-depth.json"))
            assert depth.ok and depth.result["depth"] == 1
            assert not run.done() and matcher.busy == 1  # the run still held the slot throughout

            # What agents got when these events went to the Matcher: HTTP 429 at once (on AWS as here).
            refused = engine.invoke("MatcherFunction", agent)
            assert refused.throttled and refused.error["errorType"] == "TooManyRequestsException"

            os.kill(environment.proc.pid, signal.SIGCONT)
            result = run.result(timeout=30)
    finally:
        os.kill(environment.proc.pid, signal.SIGCONT)
    # The resumed run matches the waiting caller with the agent who logged in while it was paused.
    assert result.ok, result.error
    assert result.result["matched"] == 1
    assert engine.wait_for(lambda: engine.observer.outcome_of(call_id) == "SUCCESS", timeout=10)


def test_local_invoke_reports_a_429_clearly(template_copy, capsys):
    # Reserved concurrency 0 throttles every invocation, as on Lambda.
    path = template_copy(lambda text: text.replace("ReservedConcurrentExecutions: !If [HasMatcherConcurrency, !Ref MatcherConcurrency, !Ref AWS::NoValue]",
                                                   "ReservedConcurrentExecutions: 0"))
    code = local_main(["invoke", "--template", str(path), "MatcherFunction", str(ROOT / "events" / "matcher-sns-wake.json")])
    out = capsys.readouterr()
    assert code == 1
    assert "HTTP 429 TooManyRequestsException" in out.err
    assert "MatcherFunction is at its reserved concurrency (0)" in out.err
    assert json.loads(out.out)["errorType"] == "TooManyRequestsException"
