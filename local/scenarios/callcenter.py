"""The call-center scenario on the local engine: agents, callers with preferences and patience, hang-ups.

What it drives (all through the real handlers, as a contact-center system would on AWS):
- **agents** log in at the start: one synchronous AgentEvents invocation each, ``{"action": "agentAvailable",
  "agent": {"agentId", "name", "attributes"}}`` (events/agent_events-agent-available.json); agent events go to
  AgentEventsFunction, never to the Matcher, whose reserved concurrency would refuse them (HTTP 429) while it
  matches;
- **callers** arrive at random (Poisson, seeded): one CreateTasks invocation each, ``{"queue": "calls",
  "ttlSeconds": <patience>, "payload": {"caller", "preferences"}}``; a caller whose patience runs out before
  an agent is found is shed (by the Matcher that meets it past its ttl, or by DynamoDB's TTL): a hang-up;
- the **Matcher** is woken the template's way (queue stream -> Trigger -> WorkerWakeUpTopic ``queue=calls``;
  agent entries -> AgentTable stream -> Trigger) and pairs callers with agents;
- a **match** is seen on the queue table's stream (a call TAKEN -> SUCCESS with the agent in its result); the
  agent talks for the caller's talk time and then the driver sends ``{"action": "callEnded", "agentId",
  "callId"}`` to AgentEvents: the agent is queued again at the back.

Every invocation is synchronous and made as a client using the AWS SDK makes it: a refused one (HTTP 429
TooManyRequestsException) is retried with backoff a few times (``invoke_like_sdk``), then counted as an error.

The scenario file (``local/scenarios/callcenter.json``) gives the agents, the callers' mix of preferences,
arrival rate, patience and talk time ranges, duration and time scale. Times the handlers and this driver read
(patience, talk time) are real seconds; the platform's (schedules, batching windows) are scaled.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from local.reports.callcenter_report import chart, summary_table, write
from local.reports.run_report import percentile
from local.scenarios.demo_defaults import RUNNER

NO_PREFERENCE = (None, "", "*", "any")
# botocore's standard retry mode: 3 attempts, throttling errors (429 TooManyRequestsException) included, with
# exponential backoff and full jitter from 1 s.
SDK_ATTEMPTS = 3
SDK_BACKOFF_BASE_SECONDS = 1.0


def scenario_parameters(s: dict[str, Any]) -> dict[str, Any]:
    """Template parameters of a call-center run: the demo's runner (``local.scenarios.demo_defaults``), no scheduled
    work tasks (calls come from the driver)."""
    params: dict[str, Any] = {
        **RUNNER,
        "CreateTasksScheduleState": "DISABLED",
        "SafetyNetScheduleRate": "rate(5 minutes)",
        "TimeBudgetSeconds": 3,
    }
    params.update(s.get("parameters", {}))
    return params


def agent_list(s: dict[str, Any]) -> list[dict[str, Any]]:
    """The scenario's agents as Matcher profiles: each group ``{"count", "language": [...], "gender": [...]}``."""
    agents = []
    for group in s["agents"]:
        attributes = {k: list(v) for k, v in group.items() if k not in ("count", "name")}
        for _ in range(group.get("count", 1)):
            number = len(agents) + 1
            agents.append({"agentId": f"agent-{number:02d}", "name": group.get("name", f"Agent {number}"),
                           "attributes": attributes})
    return agents


def fits(preferences: dict[str, Any], attributes: dict[str, list[str]]) -> bool:
    """Does an agent with ``attributes`` serve a caller with ``preferences``? (no preference fits anyone)"""
    for name, wanted in (preferences or {}).items():
        if wanted in NO_PREFERENCE:
            continue
        if str(wanted).strip().casefold() not in {str(v).casefold() for v in attributes.get(name, [])}:
            return False
    return True


def invoke_like_sdk(engine: Any, function: str, event: Any, attempts: int = SDK_ATTEMPTS,
                    rng: random.Random | None = None) -> tuple[Any, int]:
    """A synchronous invocation as the AWS SDK makes one: Lambda refuses an invoke over the function's
    concurrency at once (429) and the SDK retries it, backing off with full jitter; after ``attempts`` the
    429 is the result. Returns the Invocation and how many times it was refused."""
    rng = rng or random.Random()
    throttles = 0
    while True:
        inv = engine.invoke(function, event)
        if not inv.throttled:
            return inv, throttles
        throttles += 1
        if throttles >= attempts:
            return inv, throttles
        time.sleep(rng.uniform(0, SDK_BACKOFF_BASE_SECONDS * 2 ** (throttles - 1)))


@dataclass
class Call:
    call_id: str
    caller: str
    preferences: dict[str, Any]
    patience: int
    talk: float
    created_t: float
    matched_t: float | None = None
    agent_id: str | None = None
    waited_ms: int | None = None
    ended_t: float | None = None
    end_outcome: str | None = None


@dataclass
class CallCenter:
    engine: Any
    scenario: dict[str, Any]
    agents: list[dict[str, Any]] = field(default_factory=list)
    calls: dict[str, Call] = field(default_factory=dict)
    matches: list[dict[str, Any]] = field(default_factory=list)
    busy: dict[str, tuple[str, float]] = field(default_factory=dict)  # agent -> (call, talk ends at t)
    ending: set[str] = field(default_factory=set)  # agents whose call-ended event is on its way to AgentEvents
    agent_events: list[dict[str, Any]] = field(default_factory=list)
    timeline: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    peak_busy: int = 0
    started: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.agents = agent_list(self.scenario)
        self.rng = random.Random(self.scenario.get("seed", 7))
        self.profiles = {a["agentId"]: a for a in self.agents}
        self._events = ThreadPoolExecutor(max_workers=4, thread_name_prefix="agent-events")
        self._pending: list[Future[Any]] = []

    # ------------------------------------------------------------------ plan

    def arrivals(self) -> list[tuple[float, dict[str, Any], int, float]]:
        """(time, preferences, patience s, talk s) of every caller: Poisson arrivals, seeded."""
        s = self.scenario
        mix = s["callers"]
        weights = [c.get("weight", 1) for c in mix]
        plan = []
        t = 0.0
        while True:
            t += self.rng.expovariate(s["arrival_per_second"])
            if t >= s["duration_seconds"]:
                return plan
            preferences = dict(self.rng.choices(mix, weights)[0]["preferences"])
            patience = self.rng.randint(*s["patience_seconds"])
            talk = self.rng.uniform(*s["talk_seconds"])
            plan.append((t, preferences, patience, talk))

    # ------------------------------------------------------------------ what the stream says

    def consume(self, records: list[dict[str, Any]]) -> None:
        """Queue table stream: a call TAKEN -> SUCCESS carries its agent in ``result``: a match."""
        for record in records:
            if record.get("eventName") != "MODIFY":
                continue
            new = record["dynamodb"].get("NewImage") or {}
            old = record["dynamodb"].get("OldImage") or {}
            if new.get("queue", {}).get("S") != "calls" or new.get("taskStatus", {}).get("S") != "SUCCESS":
                continue
            if old.get("taskStatus", {}).get("S") == "SUCCESS":
                continue
            result = json.loads(new.get("result", {}).get("S") or "{}")
            call_id, agent_id = new["taskId"]["S"], result.get("agentId")
            now = time.monotonic() - self.started
            with self._lock:
                call = self.calls.get(call_id)
                talk = call.talk if call else self.scenario["talk_seconds"][0]
                if agent_id in self.busy:
                    self.errors.append(f"{agent_id} matched with {call_id} while on {self.busy[agent_id][0]}")
                self.busy[agent_id] = (call_id, now + talk)
                self.peak_busy = max(self.peak_busy, len(self.busy))
                if call:
                    call.matched_t, call.agent_id, call.waited_ms = now, agent_id, result.get("waitedMs")
                self.matches.append({"t": round(now, 2), "callId": call_id, "agentId": agent_id,
                                     "waitedMs": result.get("waitedMs"), "queueKey": result.get("queueKey"),
                                     "preferences": call.preferences if call else None})

    # ------------------------------------------------------------------ driving

    def _agent_event(self, event: dict[str, Any]) -> None:
        sent_ms = int(time.time() * 1000)
        inv, throttles = invoke_like_sdk(self.engine, "AgentEventsFunction", event)
        entry = {"t": round(time.monotonic() - self.started, 2), "sent_ms": sent_ms, "action": event["action"],
                 "agentId": event.get("agentId") or event["agent"]["agentId"], "callId": event.get("callId"),
                 "outcome": (inv.result or {}).get("outcome") if inv.ok else None,
                 "error": None if inv.ok else (inv.error or {}).get("errorType", "error"), "throttles": throttles}
        with self._lock:
            self.agent_events.append(entry)
            if event["action"] == "callEnded":
                self.ending.discard(entry["agentId"])
            if entry["error"]:
                self.errors.append(f"{event['action']} for {entry['agentId']}: {entry['error']}")

    def _create_call(self, preferences: dict[str, Any], patience: int, talk: float) -> None:
        caller = f"caller-{len(self.calls) + 1:04d}"
        request = {"queue": "calls", "count": 1, "ttlSeconds": patience,
                   "payload": {"caller": caller, "preferences": preferences}}
        inv, _ = invoke_like_sdk(self.engine, "CreateTasksFunction", request)
        if not inv.ok:
            self.errors.append(f"CreateTasks failed: {inv.error}")
            return
        call_id = inv.result["taskIds"][0]
        with self._lock:
            self.calls[call_id] = Call(call_id, caller, preferences, patience, talk,
                                       round(time.monotonic() - self.started, 2))

    def _end_due_calls(self, now: float) -> None:
        with self._lock:
            due = [(agent, call) for agent, (call, ends) in self.busy.items() if ends <= now]
            for agent, call_id in due:
                del self.busy[agent]
                self.ending.add(agent)
                call = self.calls.get(call_id)
                if call:
                    call.ended_t = round(now, 2)
        for agent, call_id in due:
            self._pending.append(self._events.submit(
                self._agent_event, {"action": "callEnded", "agentId": agent, "callId": call_id}))

    def calls_outcome(self) -> dict[str, int]:
        """Calls by outcome now: matched, waiting (patience left), hung up (shed), expired but not yet shed,
        taken (a matcher holds it this instant)."""
        obs = self.engine.observer
        now_s = int(time.time())
        out = {"created": len(self.calls), "matched": 0, "waiting": 0, "hung_up": 0, "expired_waiting": 0, "taken": 0}
        with obs.lock:
            for call_id in self.calls:
                track = obs.tasks.get(call_id)
                if track is None:
                    out["waiting"] += 1  # created, not yet seen on the stream
                elif track.removed == "shed" or track.status == "SHED":
                    out["hung_up"] += 1
                elif track.status == "SUCCESS":
                    out["matched"] += 1
                elif track.status == "TAKEN":
                    out["taken"] += 1
                elif track.ttl <= now_s:
                    out["expired_waiting"] += 1
                else:
                    out["waiting"] += 1
        return out

    def sample(self, t: float) -> dict[str, Any]:
        c = self.calls_outcome()
        with self._lock:
            busy, ending = len(self.busy), len(self.ending)
        return {"t": round(t, 2), "created": c["created"], "waiting": c["waiting"] + c["expired_waiting"] + c["taken"],
                "matched": c["matched"], "hung_up": c["hung_up"], "agents_busy": busy, "agents_ending": ending,
                "agents_available": len(self.agents) - busy - ending}

    def progress(self, t: float) -> str:
        p = self.sample(t)
        matcher = self.engine.pools.get("MatcherFunction")
        runs = matcher.stats["invocations"] if matcher else 0
        return (f"t={t:5.0f}s callers {p['created']:4d}  waiting {p['waiting']:3d}  matched {p['matched']:4d}  "
                f"hung up {p['hung_up']:3d} | agents busy {p['agents_busy']:2d} available {p['agents_available']:2d}"
                f" | Matcher invocations {runs}")

    def run(self, on_progress: Callable[[str, bool], None] | None = None, print_every: float = 1.0) -> dict[str, Any]:
        """Agents log in, callers arrive for ``duration_seconds``, then the run drains: it ends when no caller
        waits any more (each matched or hung up) or after ``drain_timeout_seconds``. Returns the report."""
        wall = time.monotonic()
        s = self.scenario
        plan = self.arrivals()
        arn = self.engine.template.resolver.attrs["QueueTable.StreamArn"]
        self.engine.readers[arn].consumers.append(self.consume)
        self.started = time.monotonic()
        for agent in self.agents:  # log in before the first caller, one event each
            self._agent_event({"action": "agentAvailable", "agent": agent})
        self.started = time.monotonic()
        last_print = -print_every
        draining, drain_started = False, 0.0
        while True:
            t = time.monotonic() - self.started
            while plan and plan[0][0] <= t:
                _, preferences, patience, talk = plan.pop(0)
                self._create_call(preferences, patience, talk)
            self._end_due_calls(t)
            self.timeline.append(self.sample(t))
            if on_progress and t - last_print >= print_every:
                on_progress(self.progress(t), False)
                last_print = t
            if not draining and not plan and t >= s["duration_seconds"]:
                draining, drain_started = True, t
                if on_progress:
                    on_progress(f"{self.progress(t)}  (arrivals stopped; draining)", True)
            if draining:
                c = self.calls_outcome()
                settled = c["waiting"] == 0 and c["expired_waiting"] == 0 and c["taken"] == 0
                if (settled and not any(m.pending() for m in self.engine.mappings)) \
                        or t - drain_started > s.get("drain_timeout_seconds", 30):
                    break
            time.sleep(0.25)
        for future in self._pending:
            future.result()
        self._events.shutdown(wait=True)
        t = time.monotonic() - self.started
        self.timeline.append(self.sample(t))
        if on_progress:
            on_progress(self.progress(t), True)
        return self.report(time.monotonic() - wall)

    # ------------------------------------------------------------------ checks and report

    def agent_table(self) -> dict[str, dict[str, Any]]:
        """Agent items as the agent table holds them now (the source of truth for busy / available)."""
        table = self.engine.template.resolver.refs["AgentTable"]
        agents: dict[str, dict[str, Any]] = {}
        kwargs: dict[str, Any] = {"TableName": table, "ConsistentRead": True}
        while True:
            page = self.engine.ddb.scan(**kwargs)
            for item in page["Items"]:
                if item.get("entity", {}).get("S") == "agent":
                    agents[item["agentId"]["S"]] = {"status": item["agentStatus"]["S"],
                                                    "busyWith": item.get("busyWith", {}).get("S")}
            if "LastEvaluatedKey" not in page:
                return agents
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def checks(self) -> dict[str, int]:
        """Overlapping calls per agent and matches to agents whose attributes do not fit the caller."""
        overlaps = 0
        by_agent: dict[str, list[tuple[float, float]]] = {}
        for call in self.calls.values():
            if call.agent_id and call.matched_t is not None:
                by_agent.setdefault(call.agent_id, []).append((call.matched_t, call.ended_t if call.ended_t is not None else math.inf))
        for spans in by_agent.values():
            spans.sort()
            overlaps += sum(1 for (_, end), (start, _) in itertools.pairwise(spans) if start < end)
        misfits = sum(1 for m in self.matches
                      if m["agentId"] not in self.profiles or not fits(m["preferences"] or {}, self.profiles[m["agentId"]]["attributes"]))
        stale = sum(1 for e in self.agent_events if e["action"] == "callEnded" and e["outcome"] != "queued")
        return {"agent_on_two_calls": overlaps + sum(1 for e in self.errors if "while on" in e), "misfit_matches": misfits,
                "stale_call_ends": stale, "errors": len(self.errors)}

    def report(self, wall_seconds: float) -> dict[str, Any]:
        outcome = self.calls_outcome()
        table = self.agent_table()
        statuses = [a["status"] for a in table.values()]
        waits = [m["waitedMs"] for m in self.matches if m["waitedMs"] is not None]
        per_agent: dict[str, int] = {a["agentId"]: 0 for a in self.agents}
        for m in self.matches:
            per_agent[m["agentId"]] = per_agent.get(m["agentId"], 0) + 1
        obs = self.engine.observer
        sheds = [{"t": round(t, 2), "callId": task_id, "age_ms": age} for t, task_id, age in obs.sheds if task_id in self.calls]
        return {
            "scenario": self.scenario,
            "parameters": self.engine.template.parameters,
            "time_scale": self.engine.time_scale,
            "wall_seconds": round(wall_seconds, 1),
            "calls": {"created": outcome["created"], "matched": outcome["matched"], "hung_up_shed": outcome["hung_up"],
                      "waiting": outcome["waiting"] + outcome["expired_waiting"], "taken": outcome["taken"]},
            "agents": {"total": len(self.agents), "busy": statuses.count("busy"), "available": statuses.count("queued"),
                       "offline": statuses.count("offline"), "peak_busy": self.peak_busy,
                       "calls_per_agent": per_agent},
            "wait_at_match_ms": {"p50": percentile(waits, 0.5), "p90": percentile(waits, 0.9),
                                 "max": max(waits) if waits else None},
            "checks": self.checks(),
            "errors": self.errors[:50],
            "matches": self.matches,
            "hang_ups": sheds,
            "agent_events": self.agent_events,
            "calls_each": [{"callId": c.call_id, "caller": c.caller, "preferences": c.preferences, "patience": c.patience,
                            "created_t": c.created_t, "matched_t": c.matched_t, "agentId": c.agent_id,
                            "ended_t": c.ended_t, "outcome": self._outcome_of(c.call_id)} for c in self.calls.values()],
            "engine": self.engine.stats(),
            "timeline": self.timeline,
        }

    def _outcome_of(self, call_id: str) -> str:
        outcome = self.engine.observer.outcome_of(call_id)
        return {"SUCCESS": "matched", "SHED": "hung up", "PENDING": "waiting"}.get(outcome or "PENDING", outcome or "waiting")


__all__ = ["CallCenter", "agent_list", "chart", "fits", "invoke_like_sdk", "scenario_parameters", "summary_table", "write"]
