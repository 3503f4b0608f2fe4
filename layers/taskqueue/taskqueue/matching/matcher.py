"""The matching loop of queue "calls": each waiting call, oldest first, gets the longest-waiting matching agent.

One invocation = one ``Matcher.run``. A *pass* reads a snapshot: every idle agent (the everyone partition of the
agent table: each queued agent and the keys it serves, one strongly consistent query) and the waiting calls in
FIFO order, a page at a time, until every idle agent is spoken for or the calls end (at most ``calls_per_pass``).
It plans the pairs in memory (``pairing.plan``: each call takes the head of its combination among the agents no
older call took) and writes them several at a time, each TransactWriteItems taking calls PENDING -> SUCCESS and
their agents queued -> busy, with the agents' entries deleted (``AgentStore.match_pairs``; up to 100 items). A call
is never claimed: no claim write, no lease. A call no idle agent fits costs no write at all. A transaction
cancelled because the snapshot went stale (a hang-up, an agent going offline or not seen for
AGENT_TIMEOUT_SECONDS: taken offline here) names the items that failed; the pass plans again without them, at most
``max_match_retries`` times. A lost race that may leave a fitting pair behind (an item inside another transaction,
an agent whose profile changed) makes the run report work remaining; a match transaction DynamoDB keeps throttling
ends the run reporting work remaining (``stopped_by`` ``throttled``), its pairs unwritten.

Several matchers at once (the tables' streams start one for each new call and each agent who becomes available): the
planner (``planner``: a lease on the queue's record) reads and plans; the others (helpers) never read the snapshot. A helper takes part only when at least
``helper_min_agents`` agents are idle (one COUNT query; fewer, the planner writes them in a few transactions
sooner than a helper could start). Then the planner publishes its plan in chunks, one match transaction each
(``store.matches.MatchPlans``), and every matcher of the pass, the planner too, takes chunks with a conditional
write and commits them: one plan, read once, written by all, disjoint by construction. The planner leaves the
pairs of chunks others took out of its next plans until they are committed or the plan expires.

Passes repeat while they match something and time is left; a pass without a match ends the run (no busy loop) unless
another matcher knocked meanwhile (then it passes again): a newly available agent or a new call starts the Matcher
again through the tables' streams. The reads of a pass are bounded in docs/matcher.md ("The bound").
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from aws_lambda_powertools import Logger

from taskqueue.core.clock import Clock, SystemClock
from taskqueue.core.errors import InvalidAgentInput
from taskqueue.matching import pairing
from taskqueue.matching import rules as matching
from taskqueue.matching.agents import AgentStore, PairsResult
from taskqueue.matching.call_cache import CallCache, KnownCall
from taskqueue.matching.match_items import LostAgent
from taskqueue.matching.pairing import Pair, Snapshot, Waiting
from taskqueue.matching.planner import Planner
from taskqueue.matching.shared_plan import SharedPlan
from taskqueue.observe import match_traces
from taskqueue.store import Candidate, FairTurn, TaskStore
from taskqueue.work.record_view import RecordView

logger = Logger(child=True)

# The planner, with only pairs that other matchers took in sight, looks again after this long (they commit them
# meanwhile). Each look reads the snapshot again.
OTHERS_PAUSE_SECONDS = 0.5
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
    orphans_removed: int = 0  # agents whose entries belonged to no availability of theirs: the entries deleted
    # Lost races of the run's last pass after which a pair may match on a fresh read (an item inside another
    # transaction, an agent whose profile changed): the run tail-calls.
    left_by_races: int = 0
    throttled: int = 0  # match transactions DynamoDB throttled past the retries (the run ended, work remains)
    wait_times_ms: list[int] = field(default_factory=list)
    stopped_by: str = "empty"
    work_remains: bool = False
    planned: bool = False  # this run planned (the planner's lease on the queue's record); else it was a helper


@dataclass
class _Pass:
    matched: int = 0
    others_pending: bool = False  # pairs that other matchers took are not written yet


class _Throttled(Exception):
    """A match transaction DynamoDB kept throttling: the run ends (``stopped_by`` throttled) and tail-calls."""


class _Replaced(Exception):
    """The planner's lease lapsed during a long pass and another matcher took it: the run ends (``stopped_by``
    replaced), its plan's unwritten pairs left to the new planner."""


class Matcher:
    def __init__(
        self,
        tasks: TaskStore,
        agents: AgentStore,
        *,
        owner: str,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        calls: CallCache | None = None,
    ) -> None:
        """``calls``: what this execution environment remembers of the calls (``MatcherServices.calls``: one per
        environment, kept across invocations); a run of its own otherwise."""
        self._tasks = tasks
        self._agents = agents
        self._owner = owner
        self._clock = clock or SystemClock()
        self._rng = rng or random.Random()
        self._settings = agents.settings
        self._known = CallCache() if calls is None else calls
        self._planner: Planner | None = None  # while this run plans: renewed before each match transaction

    def run(self, budget_seconds: float) -> MatchReport:
        queue = self._settings.queue
        report = MatchReport(queue=queue)
        deadline = self._clock.monotonic() + budget_seconds
        # This run's side of the plans shared with other matchers; the chunks it writes count in its report.
        self._shared = SharedPlan(self._tasks, queue, self._owner, self._clock, lambda chunk: self._write_chunk(chunk, report))
        control = RecordView(self._tasks, queue, self._clock, _not_handled)
        planner = Planner(self._tasks, queue, self._owner, self._clock)
        report.planned = planner.begin()
        self._planner = planner if report.planned else None
        try:
            if not report.planned:
                self._help(report, control, deadline)
            else:
                self._recover_leases(queue)  # the planner looks for calls a crashed run left TAKEN
                try:
                    self._plan(report, control, planner, deadline)
                finally:
                    planner.end()
        except _Throttled:
            report.stopped_by = "throttled"
        except _Replaced:
            report.stopped_by = "replaced"
        report.work_remains = _work_remains(report, lambda: self._tasks.has_claimable(queue))
        report.shed = self._tasks.drain_shed().get(queue, 0)
        return report

    def _plan(self, report: MatchReport, control: RecordView, planner: Planner, deadline: float) -> None:
        """The planner's passes: read, plan, write (or share), until a pass matches nothing and nobody knocked since
        it began, or time runs out."""
        queue = self._settings.queue
        first = True
        while True:
            left = deadline - self._clock.monotonic()
            if left <= 0:
                report.stopped_by = "budget"
                return
            if control.paused_now():
                report.stopped_by = "paused"
                return
            if not planner.keep():
                raise _Replaced
            snapshot = self._snapshot(queue, report, first)
            first = False
            if snapshot is None:  # no call waits
                if planner.may_end():
                    report.stopped_by = "empty"
                    return
                continue
            report.passes += 1
            done = self._pass(snapshot, report, deadline)
            if done.matched:
                continue
            if done.others_pending:  # only pairs other matchers took: theirs to write
                self._clock.sleep(min(max(0.0, deadline - self._clock.monotonic()), OTHERS_PAUSE_SECONDS))
                continue
            # No call could match now: end, unless work arrived since this pass began (a knock).
            if planner.may_end():
                report.stopped_by = "no-progress"
                return

    def _help(self, report: MatchReport, control: RecordView, deadline: float) -> None:
        """A helper: when enough agents are idle, take chunks of the planner's shared plans and write them
        (``shared_plan``); else leave at once (``not-needed``)."""
        if not self._needed():
            report.stopped_by = "not-needed"
            return
        report.stopped_by, report.passes = self._shared.help(deadline, control.paused_now)

    def _needed(self) -> bool:
        """Whether a helper takes part: at least MATCH_HELPER_MIN_AGENTS agents idle (one COUNT query of the
        everyone partition). Below that the planner writes them in a few transactions, sooner than a helper could
        start."""
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
        report.left_by_races = 0  # a fresh read: what lost races left behind is seen again
        agents = tuple(self._agents.idle_agents())
        if not agents and not first:
            return Snapshot((), ())
        # Groups do not apply to calls (docs/fairness.md): CreateTasks refuses a grouped call.
        calls = self._tasks.iter_candidates(queue, self._settings.calls_per_pass, fair=FairTurn(groups=False))
        # A call a crashed run left TAKEN (its lease passed) is not matched as it stands: ``_recover_leases`` returns it.
        calls = (c for c in calls if not c.leased)
        head = next(calls, None)
        if head is None:
            return None
        pool = matching.IdlePool(agents, self._settings.agent_order)
        waiting: list[Waiting] = []
        for page in _pages(itertools.islice(itertools.chain([head], calls), self._settings.calls_per_pass), _WALK_PAGE):
            self._learn(page, report)
            for candidate in page:
                known = self._known.get(candidate.task_id, candidate.ttl)
                if known is None:  # gone meanwhile, or dead-lettered
                    continue
                waiting.append(Waiting(candidate, known.key, known.created_ms))
                if pool.take(known.key) is None:
                    report.no_agent += 1  # no idle agent fits it now: it keeps waiting, untouched
            if pool.empty:
                break
        return Snapshot(tuple(waiting), agents)

    def _pass(self, snapshot: Snapshot, report: MatchReport, deadline: float) -> _Pass:
        """Plan the snapshot's pairs and write them: alone, in transactions of up to 100 items, planning again
        without what a cancelled transaction names as gone; or, when helpers may be there, as a shared plan."""
        snapshot, held = self._shared.without_in_flight(snapshot)
        state = _Pass(others_pending=held)
        attempt = 0
        while True:
            pairs = pairing.plan(snapshot, self._settings.agent_order)
            chunks = pairing.transactions(pairs)
            if len(chunks) > 1 and len(snapshot.agents) >= self._settings.helper_min_agents:  # helpers may be there
                before = report.matched
                state.others_pending |= self._shared.publish(chunks, deadline)
                state.matched += report.matched - before
                return state
            cancelled: tuple[list[Pair], PairsResult] | None = None
            for chunk in chunks:
                if self._clock.monotonic() >= deadline:
                    return state
                result = self._match(chunk, report)
                if not result.committed:
                    cancelled = (chunk, result)
                    break
                self._record(result, report)
                state.matched += len(chunk)
                snapshot = snapshot.without((p.call.task_id for p in chunk), (p.head.agent_id for p in chunk))
            if cancelled is None:
                return state
            chunk, result = cancelled
            lost = self._lost(chunk, result, report)
            snapshot = snapshot.without(lost.calls, lost.agents)
            attempt += 1
            if attempt > self._settings.max_match_retries:
                report.gave_up += len(pairing.plan(snapshot, self._settings.agent_order))
                return state
            if not lost.named:  # the request met another transaction as a whole: back off, then the same plan
                self._backoff(attempt)

    def _write_chunk(self, chunk: list[Pair], report: MatchReport) -> None:
        """One chunk of a shared plan: on a cancelled transaction, the pairs that failed are left out and the rest
        written again (the plan is shared: planning again here could take what other matchers write)."""
        attempt = 0
        while chunk:
            result = self._match(chunk, report)
            if result.committed:
                self._record(result, report)
                return
            lost = self._lost(chunk, result, report)
            chunk = [p for p in chunk if p.call.task_id not in lost.calls and p.head.agent_id not in lost.agents]
            attempt += 1
            if attempt > self._settings.max_match_retries:
                report.gave_up += len(chunk)
                return
            if not lost.named:
                self._backoff(attempt)

    def _match(self, chunk: Sequence[Pair], report: MatchReport) -> PairsResult:
        """One match transaction; DynamoDB throttling it past the retries ends the run (``_Throttled``). The planner
        renews its lease first: a pass of many transactions must not let it lapse while it still plans."""
        if self._planner is not None and not self._planner.keep():
            raise _Replaced
        result = self._agents.match_pairs(chunk)
        if result.throttled:
            report.throttled += 1
            logger.warning("a match transaction was throttled past its retries: the run ends, a tail call follows",
                           extra={"pairs": len(chunk), "reasons": result.reasons[:20]})
            raise _Throttled
        return result

    def _lost(self, chunk: Sequence[Pair], result: PairsResult, report: MatchReport) -> pairing.Lost:
        """Count a cancelled match transaction and settle the agents that refused it: not seen lately, taken offline;
        entries of no availability, deleted. A call or an agent that may match on a fresh read (inside another
        transaction; an agent whose profile changed) counts in ``left_by_races``."""
        assert result.lost is not None
        report.conflicts += 1
        report.lost += len(result.lost.calls)
        report.left_by_races += len(result.calls_in_flight)
        for pair in chunk:
            if pair.head.agent_id not in result.lost.agents:
                continue
            verdict = self._agents.settle_lost_agent(pair, result)
            report.timed_out += verdict is LostAgent.UNSEEN
            report.orphans_removed += verdict is LostAgent.ORPHANED
            report.left_by_races += verdict in (LostAgent.CHANGED, LostAgent.UNKNOWN)
        logger.debug("a match transaction lost a race", extra={"reasons": result.reasons[:20]})
        return result.lost

    def _backoff(self, attempt: int) -> None:
        self._clock.sleep(self._rng.uniform(0, self._settings.retry_base_ms * 2 ** (attempt - 1)) / 1000)

    def _record(self, result: PairsResult, report: MatchReport) -> None:
        match_traces.record_matches(self._tasks, result)  # each call's span in its producer's trace
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

    def _learn(self, candidates: Sequence[Candidate], report: MatchReport) -> None:
        """Learn the agent queue and creation time of every call this execution environment has not seen, in
        batches (a call's preferences never change: ``call_cache``); a call with invalid preferences is
        dead-lettered."""
        unknown = [c for c in candidates if not self._known.knows(c.task_id, c.ttl)]
        if not unknown:
            return
        facts = self._tasks.call_facts([c.task_id for c in unknown])
        for candidate in unknown:
            fact = facts.get(candidate.task_id)
            if fact is None:
                continue  # removed by TTL meanwhile
            try:
                key = matching.call_queue_key(fact.payload, self._settings.attributes)
            except InvalidAgentInput as exc:
                self._dead_letter(candidate, str(exc), report)
                continue
            self._known.put(candidate.task_id, candidate.ttl, KnownCall(key, fact.created_ms))

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


def _work_remains(report: MatchReport, claimable: Callable[[], bool]) -> bool:
    """Tail-call only when a call could still match now: time ran out with claimable calls, DynamoDB throttled a
    match, or lost races left pairs behind (given up after MATCH_RETRIES, or that may match on a fresh read)."""
    if report.stopped_by == "throttled":
        return True
    if report.stopped_by == "budget":
        return claimable()
    return report.stopped_by != "paused" and (report.gave_up > 0 or report.left_by_races > 0)


def _not_handled(what: str, exc: Exception, then: str) -> bool:
    return False  # the Matcher lets every DynamoDB error fail the run, as before (Lambda retries the wake-up)
