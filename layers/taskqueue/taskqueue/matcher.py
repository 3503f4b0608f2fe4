"""The matching loop of queue "calls": each waiting call, oldest first, gets the longest-waiting matching agent.

One invocation = one ``Matcher.run``. A *pass* first finds which waiting calls can match now, anywhere in the
queue: it reads every idle agent (the everyone partition of the agent table: each queued agent and the keys it
serves), then walks the waiting calls in FIFO order, a page at a time, giving each the agent its match would
take (``matching.IdlePool``), until every idle agent is spoken for or the calls end (at most
``calls_per_pass``). Only those calls are tried, oldest first: for each it reads the head of the agent queue its
preferences name (strongly consistent, one item), claims the call and runs the match transaction
(``AgentStore.match``); a call no idle agent fits is never claimed and costs no write. A lost race (another
matcher took the agent) re-reads the head and tries again, at most ``max_match_retries`` times with jittered
backoff; a head agent not seen for AGENT_TIMEOUT_SECONDS is taken offline and the next head read. With no agent
left the call is released with its attempt refunded, so it keeps its place. Within a pass, a queue found empty
is not queried again. Passes repeat while they make progress and time is left; a pass without a match ends the
run (no busy loop): a newly available agent wakes the Matcher again through the agent table's stream.
The reads of a pass are bounded in docs/matcher.md ("The bound").
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from aws_lambda_powertools import Logger

from taskqueue import matching
from taskqueue.agents import AgentStore, MatchOutcome, QueueHead
from taskqueue.claim_control import ClaimControl
from taskqueue.clock import Clock, SystemClock
from taskqueue.errors import InvalidAgentInput
from taskqueue.handshake.watch import Lingering, Watch
from taskqueue.model import Task
from taskqueue.store import Candidate, TaskStore

logger = Logger(child=True)

# A matcher with only other matchers' calls in sight looks again after this long (they may take them meanwhile).
OTHERS_PAUSE_SECONDS = 0.2
# Preference lookups remembered per execution environment (a call's preferences never change): ~100 bytes each.
_KEY_CACHE_LIMIT = 200_000
# Waiting calls read (and their preferences fetched, one BatchGetItem) per step of a pass's walk.
_WALK_PAGE = 100


@dataclass
class MatchReport:
    queue: str
    passes: int = 0
    matched: int = 0
    no_agent: int = 0  # calls looked at that had no matching agent (and keep waiting)
    conflicts: int = 0  # match transactions cancelled by a lost race
    gave_up: int = 0  # calls handed back after max retries although agents remained
    lost: int = 0  # claims lost to another matcher, or calls whose lease passed
    invalid: int = 0  # calls with preferences that can never match: dead-lettered
    shed: int = 0  # waiting calls past their ttl (hung up) that this run met and shed
    timed_out: int = 0  # head agents not seen for AGENT_TIMEOUT_SECONDS, taken offline instead of matched
    wait_times_ms: list[int] = field(default_factory=list)
    stopped_by: str = "empty"
    work_remains: bool = False
    watched: bool = False  # this run watched the queue (the wake-up handshake); else it was a helper


@dataclass
class _Pass:
    matched: int = 0
    empty_keys: set[str] = field(default_factory=set)


class Matcher:
    def __init__(
        self,
        tasks: TaskStore,
        agents: AgentStore,
        *,
        owner: str,
        clock: Clock | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._tasks = tasks
        self._agents = agents
        self._owner = owner
        self._clock = clock or SystemClock()
        self._rng = rng or random.Random()
        self._settings = agents.settings
        self._keys: dict[str, str | None] = {}

    def run(self, budget_seconds: float) -> MatchReport:
        queue = self._settings.queue
        report = MatchReport(queue=queue)
        deadline = self._clock.monotonic() + budget_seconds
        self._recover_leases(queue)
        lanes = ClaimControl(self._tasks, queue, self._owner, self._clock, self._rng, _not_handled)
        lanes.join(budget_seconds)
        # Producers (new calls, freed agents) count on the watcher to see what they write; it lingers before it stops.
        watch = Watch(self._tasks, queue, self._owner, self._clock, refused=_not_handled)
        report.watched = watch.begin()
        lingering = Lingering(watch, self._clock, self._tasks.settings.worker_linger_seconds)
        look_started_ms: int | None = None
        missed = False
        try:
            while True:
                left = deadline - self._clock.monotonic()
                if left <= 0:
                    report.stopped_by = "budget"
                    break
                if lanes.paused_now():
                    report.stopped_by = "paused"
                    break
                watch.keep()
                look_started_ms = self._clock.now_ms()
                candidates = self._matchable(queue, report)  # the waiting calls an idle agent fits, FIFO
                if candidates is None:  # no call waits
                    if lingering.step(look_started_ms, left):
                        report.stopped_by = "empty"
                        break
                    continue
                plan = lanes.plan(candidates)  # with several matchers, the calls of this one's lane
                report.passes += 1
                done = self._pass(plan, report, deadline)
                if done.matched == 0:
                    if lanes.has_lane and candidates and not plan:  # only other matchers' calls fit, not yet ours: look again
                        self._clock.sleep(min(max(0.0, deadline - self._clock.monotonic()), OTHERS_PAUSE_SECONDS))
                        continue
                    # No call could match now: wait for a write (a new call, an agent freed), then stop as allowed.
                    if lingering.step(look_started_ms, max(0.0, deadline - self._clock.monotonic())):
                        report.stopped_by = "no-progress"
                        break
                    continue
        finally:
            lanes.leave()
            if report.stopped_by not in ("empty", "no-progress"):
                missed = watch.end(look_started_ms)
        # Tail-call only when a call could still match now: time ran out, or lost races left agents behind.
        report.work_remains = (report.stopped_by == "budget" and (missed or self._tasks.has_claimable(queue))) or (
            report.stopped_by not in ("budget", "paused") and report.gave_up > 0
        )
        report.shed = self._tasks.drain_shed().get(queue, 0)
        return report

    def _recover_leases(self, queue: str) -> None:
        """Calls a crashed matcher left TAKEN go back to waiting at their old place once their lease passed."""
        outcome = self._tasks.recover_expired_leases(queue, None, self._clock.now_ms())
        if any(outcome.values()):
            logger.warning("expired call leases recovered", extra={"queue": queue, **outcome})

    def _matchable(self, queue: str, report: MatchReport) -> list[Candidate] | None:
        """The waiting calls that can match now, in FIFO order, wherever they are in the queue; ``None`` when no
        call waits at all. Reads the idle agents once, then the calls page by page while an idle agent is not yet
        spoken for (``matching.IdlePool``); the first page always, so calls with invalid preferences at the head are
        dead-lettered even when no agent is idle. A call read that no idle agent fits counts as ``no_agent``."""
        calls = self._tasks.iter_candidates(queue, self._settings.calls_per_pass)
        first = next(calls, None)
        if first is None:
            return None
        pool = matching.IdlePool(self._agents.idle_agents(), self._settings.agent_order)
        fitting: list[Candidate] = []
        walked = itertools.islice(itertools.chain([first], calls), self._settings.calls_per_pass)
        for page in _pages(walked, _WALK_PAGE):
            self._prefetch_keys(page, report)
            for candidate in page:
                key = self._key_of(candidate, report)
                if key is None:
                    continue
                if pool.take(key) is None:
                    report.no_agent += 1  # no idle agent fits it now: it keeps waiting, untouched
                else:
                    fitting.append(candidate)
            if pool.empty:
                break
        return fitting

    def _pass(self, candidates: list[Candidate], report: MatchReport, deadline: float) -> _Pass:
        state = _Pass()
        self._prefetch_keys(candidates, report)
        for candidate in candidates:  # oldest first (of this matcher's lane, when several match at once)
            if self._clock.monotonic() >= deadline:
                break
            key = self._key_of(candidate, report)
            if key is None:
                continue
            if key in state.empty_keys:  # found empty earlier in this pass: the call keeps waiting, untouched
                report.no_agent += 1
                continue
            head = self._agents.head(key)
            if head is None:  # no agent for this call now: it keeps waiting, untouched (no claim, no write)
                state.empty_keys.add(key)
                report.no_agent += 1
                continue
            call = self._tasks.claim(candidate, self._owner)
            if call is None:
                report.lost += 1  # another matcher took this call first (a failed conditional write)
                continue
            outcome = self._match_claimed(call, key, head, report)
            if outcome == "matched":
                state.matched += 1
            elif outcome == "no-agent":
                state.empty_keys.add(key)
        return state

    def _match_claimed(self, call: Task, key: str, head: QueueHead | None, report: MatchReport) -> str:
        """Match a claimed call with ``head`` (the head of its agent queue read before the claim), retrying lost
        races on a fresh head. Returns "matched", "no-agent" (released: it keeps its place), "gave-up" (released
        after max retries) or "lost"."""
        attempt = 0
        while head is not None:
            outcome = self._agents.match(call, self._owner, head)
            if outcome.outcome is MatchOutcome.MATCHED:
                waited = int(outcome.result["waitedMs"])
                report.matched += 1
                report.wait_times_ms.append(waited)
                logger.info(
                    "call matched",
                    extra={"call_id": call.task_id, "agent_id": head.agent_id, "queue_key": key, "waited_ms": waited},
                )
                return "matched"
            if outcome.outcome is MatchOutcome.CALL_LOST:
                report.lost += 1
                logger.warning("call lost before its match (lease passed)", extra={"call_id": call.task_id})
                return "lost"
            if self._agents.retire_if_unseen(head):  # not seen for AGENT_TIMEOUT_SECONDS: offline now, next head
                report.timed_out += 1
                head = self._agents.head(key)
                continue
            report.conflicts += 1
            attempt += 1
            logger.debug("lost a race for an agent", extra={"agent_id": head.agent_id, "reasons": outcome.reasons})
            if attempt > self._settings.max_match_retries:
                report.gave_up += 1
                self._release(call, report)
                return "gave-up"
            self._clock.sleep(self._rng.uniform(0, self._settings.retry_base_ms * 2 ** (attempt - 1)) / 1000)
            head = self._agents.head(key)
        report.no_agent += 1
        self._release(call, report)
        return "no-agent"

    def _release(self, call: Task, report: MatchReport) -> None:
        """Back to waiting at its old place, the claim's attempt refunded (waiting is not a failed attempt)."""
        if not self._tasks.release(call, self._owner, refund_attempt=True):
            report.lost += 1

    def _prefetch_keys(self, candidates: list[Candidate], report: MatchReport) -> None:
        """Learn the agent queue of every call not seen before, in batches (a call's preferences never change)."""
        unknown = [c for c in candidates if c.task_id not in self._keys]
        if not unknown:
            return
        payloads = self._tasks.payloads([c.task_id for c in unknown])
        if len(self._keys) + len(unknown) > _KEY_CACHE_LIMIT:
            self._keys.clear()
        for candidate in unknown:
            if candidate.task_id not in payloads:
                continue  # removed by TTL meanwhile
            try:
                self._keys[candidate.task_id] = matching.call_queue_key(payloads[candidate.task_id], self._settings.attributes)
            except InvalidAgentInput as exc:
                self._keys[candidate.task_id] = None
                self._dead_letter(candidate, str(exc), report)

    def _key_of(self, candidate: Candidate, report: MatchReport) -> str | None:
        """The agent queue a call asks for; None if unknown (gone) or invalid (dead-lettered)."""
        return self._keys.get(candidate.task_id)

    def _dead_letter(self, candidate: Candidate, error: str, report: MatchReport) -> None:
        call = self._tasks.claim(candidate, self._owner)
        if call is None:
            report.lost += 1
            return
        if self._tasks.fail(call, self._owner, f"call cannot be matched: {error}"):
            report.invalid += 1
            logger.error("call dead-lettered: invalid preferences", extra={"call_id": call.task_id, "error": error})
        else:
            report.lost += 1


def _pages(items: Iterator[Candidate], size: int) -> Iterator[list[Candidate]]:
    while page := list(itertools.islice(items, size)):
        yield page


def _not_handled(what: str, exc: Exception, then: str) -> bool:
    return False  # the Matcher lets every DynamoDB error fail the run, as before (Lambda retries the wake-up)
