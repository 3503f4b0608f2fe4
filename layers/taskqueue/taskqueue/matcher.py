"""The matching loop of queue "calls": each waiting call, oldest first, gets the longest-waiting matching agent.

One invocation = one ``Matcher.run``. A *pass* reads a snapshot: every idle agent (the everyone partition of the
agent table: each queued agent and the keys it serves, one strongly consistent query) and the waiting calls in
FIFO order, a page at a time, until every idle agent is spoken for or the calls end (at most ``calls_per_pass``).
It plans the pairs in memory (``pairing.plan``: each call takes the head of its combination among the agents no
older call took) and writes them several at a time, each TransactWriteItems taking calls PENDING -> SUCCESS and
their agents queued -> busy, with the agents' entries deleted (``AgentStore.match_pairs``; up to 100 items). A call
is never claimed: no claim write, no lease. A call no idle agent fits costs no write at all.

Several matchers at once (MatcherConcurrency > 1, one claim lane each) read the same snapshot, so they plan the
same pairs; each writes only the pairs whose call falls in its lane (``taskqueue.lanes``), so their transactions
touch disjoint calls and agents. A transaction cancelled because a snapshot was stale (another matcher, a hang-up,
an agent going offline or not seen for AGENT_TIMEOUT_SECONDS: taken offline here) names the items that failed;
the pass plans again without them, at most ``max_match_retries`` times. A helper (a run that does not watch the
queue) stops once no pair of the snapshot is its lane's; the watcher looks again while other lanes' pairs wait,
and takes them over once they have waited (``lanes.claim_order``'s patience). Passes repeat while they match
something and time is left; a pass without a match ends the run (no busy loop) as the wake-up handshake allows
(``handshake.watch``): a newly available agent wakes the Matcher again through the agent table's stream.
The reads of a pass are bounded in docs/matcher.md ("The bound").
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from aws_lambda_powertools import Logger

from taskqueue import matching, pairing
from taskqueue.agents import AgentStore, PairsResult
from taskqueue.claim_control import ClaimControl
from taskqueue.clock import Clock, SystemClock
from taskqueue.errors import InvalidAgentInput
from taskqueue.handshake.watch import Lingering, Watch
from taskqueue.pairing import Pair, Snapshot, Waiting
from taskqueue.store import Candidate, TaskStore

logger = Logger(child=True)

# The watcher, with only other matchers' pairs in sight, looks again after this long (they commit them meanwhile;
# after the lanes' patience it takes over those still waiting). Each look reads the idle agents and a page of calls.
OTHERS_PAUSE_SECONDS = 0.5
# Calls' agent queues and creation times remembered per execution environment (they never change): ~150 bytes each.
_KEY_CACHE_LIMIT = 200_000
# Waiting calls read (and their preferences fetched, one BatchGetItem) per step of a pass's walk.
_WALK_PAGE = 100


@dataclass
class MatchReport:
    queue: str
    passes: int = 0
    matched: int = 0
    transactions: int = 0  # match transactions committed (each holds one or more matches)
    no_agent: int = 0  # calls looked at that had no matching agent (and keep waiting)
    conflicts: int = 0  # match transactions cancelled by a lost race (a stale snapshot, a conflict)
    gave_up: int = 0  # calls left waiting after max lost races in a pass although agents remained
    lost: int = 0  # calls that stopped waiting between the read and the match (another matcher, a hang-up)
    invalid: int = 0  # calls with preferences that can never match: dead-lettered
    shed: int = 0  # waiting calls past their ttl (hung up) that this run met and shed
    timed_out: int = 0  # agents not seen for AGENT_TIMEOUT_SECONDS, taken offline instead of matched
    wait_times_ms: list[int] = field(default_factory=list)
    stopped_by: str = "empty"
    work_remains: bool = False
    watched: bool = False  # this run watched the queue (the wake-up handshake); else it was a helper


@dataclass
class _Pass:
    matched: int = 0
    others_pending: bool = False  # the plan had pairs, none of this matcher's lane


@dataclass(frozen=True)
class _Known:
    key: str | None  # the agent queue a call's preferences name; None: invalid (dead-lettered)
    created_ms: int


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
        self._known: dict[str, _Known] = {}

    def run(self, budget_seconds: float) -> MatchReport:
        queue = self._settings.queue
        report = MatchReport(queue=queue)
        deadline = self._clock.monotonic() + budget_seconds
        lanes = ClaimControl(self._tasks, queue, self._owner, self._clock, self._rng, _not_handled)
        # Producers (new calls, freed agents) count on the watcher to see what they write; it lingers before it stops.
        watch = Watch(self._tasks, queue, self._owner, self._clock, refused=_not_handled)
        report.watched = watch.begin()
        if report.watched:  # one run per wake-up chain looks for calls a crashed run left TAKEN
            self._recover_leases(queue)
        elif not self._needed():  # a helper: the watcher alone writes a pass this small sooner
            report.stopped_by = "not-needed"
            report.shed = self._tasks.drain_shed().get(queue, 0)
            return report
        # Helpers take part: each matcher then writes the pairs of its claim lane. The watcher joins once it sees
        # as many idle agents as make helpers take part (until then it writes every pair).
        joined = not report.watched
        if joined:
            lanes.join(budget_seconds)
        lingering = Lingering(watch, self._clock, self._tasks.settings.worker_linger_seconds)
        look_started_ms: int | None = None
        missed = False
        first = True
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
                snapshot = self._snapshot(queue, report, first)
                first = False
                if snapshot is None:  # no call waits
                    if lingering.step(look_started_ms, left):
                        report.stopped_by = "empty"
                        break
                    continue
                report.passes += 1
                if not joined and len(snapshot.agents) >= self._settings.helper_min_agents:
                    joined = True
                    lanes.join(max(0.0, deadline - self._clock.monotonic()))
                done = self._pass(snapshot, lanes, report, deadline)
                if done.matched:
                    continue
                if done.others_pending:  # only other lanes' pairs: theirs to write
                    if not watch.watching:
                        report.stopped_by = "no-progress"
                        break
                    self._clock.sleep(min(max(0.0, deadline - self._clock.monotonic()), OTHERS_PAUSE_SECONDS))
                    continue
                # No call could match now: wait for a write (a new call, an agent freed), then stop as allowed.
                if lingering.step(look_started_ms, max(0.0, deadline - self._clock.monotonic())):
                    report.stopped_by = "no-progress"
                    break
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

    def _needed(self) -> bool:
        """Whether a helper takes part: at least MATCH_HELPER_MIN_AGENTS agents idle (one COUNT query of the
        everyone partition). Below that the watcher matches them in a few transactions, and a helper would first
        have to read the whole snapshot (every idle agent, the waiting calls) to write its share."""
        minimum = self._settings.helper_min_agents
        return minimum == 0 or self._agents.depth(matching.everyone_key(self._settings.attributes)) >= minimum

    def _recover_leases(self, queue: str) -> None:
        """Calls left TAKEN (a run that crashed while dead-lettering one, or an older version that claimed calls)
        go back to waiting at their old place once their lease passed."""
        outcome = self._tasks.recover_expired_leases(queue, None, self._clock.now_ms())
        if any(outcome.values()):
            logger.warning("expired call leases recovered", extra={"queue": queue, **outcome})

    def _snapshot(self, queue: str, report: MatchReport, first: bool) -> Snapshot | None:
        """The idle agents and the waiting calls, FIFO, walked until every idle agent is spoken for
        (``matching.IdlePool``) or the calls end; ``None`` when no call waits at all. The first pass of a run always
        reads the first page of calls (calls with invalid preferences at the head are dead-lettered even when no
        agent is idle); a later pass with no agent idle reads nothing more. A call read that no idle agent fits
        counts as ``no_agent``."""
        agents = tuple(self._agents.idle_agents())
        if not agents and not first:
            return Snapshot((), ())
        calls = self._tasks.iter_candidates(queue, self._settings.calls_per_pass)
        head = next(calls, None)
        if head is None:
            return None
        pool = matching.IdlePool(agents, self._settings.agent_order)
        waiting: list[Waiting] = []
        walked = 0
        for page in _pages(itertools.islice(itertools.chain([head], calls), self._settings.calls_per_pass), _WALK_PAGE):
            walked += len(page)
            self._learn(page, report)
            for candidate in page:
                known = self._known.get(candidate.task_id)
                if known is None or known.key is None:  # gone meanwhile, or dead-lettered
                    continue
                waiting.append(Waiting(candidate, known.key, known.created_ms))
                if pool.take(known.key) is None:
                    report.no_agent += 1  # no idle agent fits it now: it keeps waiting, untouched
            if pool.empty:
                break
        complete = pool.empty or walked < self._settings.calls_per_pass
        return Snapshot(tuple(waiting), agents, complete)

    def _pass(self, snapshot: Snapshot, lanes: ClaimControl, report: MatchReport, deadline: float) -> _Pass:
        """Plan the snapshot's pairs, write this matcher's share in transactions of up to 100 items, and plan again
        without what a cancelled transaction names as gone."""
        state = _Pass()
        attempt = 0
        while True:
            pairs = pairing.plan(snapshot, self._settings.agent_order)
            mine = self._mine(pairs, lanes)
            state.others_pending = bool(pairs) and not mine
            if not mine:
                return state
            cancelled: tuple[list[Pair], PairsResult] | None = None
            for chunk in pairing.transactions(mine):
                if self._clock.monotonic() >= deadline:
                    return state
                result = self._agents.match_pairs(chunk)
                if not result.committed:
                    cancelled = (chunk, result)
                    break
                self._record(result, report)
                state.matched += len(chunk)
                snapshot = snapshot.without((p.call.task_id for p in chunk), (p.head.agent_id for p in chunk))
            if cancelled is None:
                return state
            chunk, result = cancelled
            assert result.lost is not None
            report.conflicts += 1
            report.lost += len(result.lost.calls)
            self._retire_unseen(chunk, result.lost.agents, report)
            snapshot = snapshot.without(result.lost.calls, result.lost.agents)
            logger.debug("a match transaction lost a race", extra={"reasons": result.reasons[:20]})
            attempt += 1
            if attempt > self._settings.max_match_retries:
                left = self._mine(pairing.plan(snapshot, self._settings.agent_order), lanes)
                report.gave_up += len(left)
                return state
            if not result.lost.named:  # the request met another transaction as a whole: back off, then the same plan
                self._clock.sleep(self._rng.uniform(0, self._settings.retry_base_ms * 2 ** (attempt - 1)) / 1000)

    def _mine(self, pairs: Sequence[Pair], lanes: ClaimControl) -> list[Pair]:
        """The pairs this matcher writes, in plan order: those whose call is in its claim lane (all of them when it
        matches alone), or other lanes' that have waited past the lanes' patience."""
        chosen = {c.task_id for c in lanes.plan([p.call for p in pairs])}
        return [p for p in pairs if p.call.task_id in chosen]

    def _record(self, result: PairsResult, report: MatchReport) -> None:
        report.transactions += 1
        for pair, recorded in result.matched:
            waited = int(recorded["waitedMs"])
            report.matched += 1
            report.wait_times_ms.append(waited)
            logger.info(
                "call matched",
                extra={"call_id": pair.call.task_id, "agent_id": pair.head.agent_id, "queue_key": pair.head.queue_key,
                       "waited_ms": waited},
            )

    def _retire_unseen(self, chunk: Sequence[Pair], agent_ids: frozenset[str], report: MatchReport) -> None:
        """Agents whose items failed: those not seen for AGENT_TIMEOUT_SECONDS are taken offline (counted); the
        others were taken by another matcher or changed by an event. Either way the pass plans without them."""
        for pair in chunk:
            if pair.head.agent_id in agent_ids and self._agents.retire_if_unseen(pair.head):
                report.timed_out += 1

    def _learn(self, candidates: Sequence[Candidate], report: MatchReport) -> None:
        """Learn the agent queue and creation time of every call not seen before, in batches (a call's preferences
        never change); a call with invalid preferences is dead-lettered."""
        unknown = [c for c in candidates if c.task_id not in self._known]
        if not unknown:
            return
        facts = self._tasks.call_facts([c.task_id for c in unknown])
        if len(self._known) + len(unknown) > _KEY_CACHE_LIMIT:
            self._known.clear()
        for candidate in unknown:
            fact = facts.get(candidate.task_id)
            if fact is None:
                continue  # removed by TTL meanwhile
            try:
                key: str | None = matching.call_queue_key(fact.payload, self._settings.attributes)
            except InvalidAgentInput as exc:
                key = None
                self._dead_letter(candidate, str(exc), report)
            self._known[candidate.task_id] = _Known(key, fact.created_ms)

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
