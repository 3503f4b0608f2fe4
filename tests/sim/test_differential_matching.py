"""The fake DynamoDB answers the Matcher's agent store and match transactions as the engine does (moto; DynamoDB
Local too on ``--dynamodb=local|both``): fan-out transactions, heads, cancelled matches with their reasons,
hang-ups, a whole Matcher run (tests/sim/differential.py)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from taskqueue.core.settings import Settings
from taskqueue.matching.agents import AgentStatus
from taskqueue.matching.matcher import Matcher
from taskqueue.store import TaskStore
from tests.agent_support import AGENT_TABLE, create_agent_table, create_calls, make_agent_store, pair_of, profile
from tests.conftest import TABLE
from tests.sim.differential import all_items, assert_same_answers, run_both
from tests.support import FakeClock, create_queue_table

pytestmark = pytest.mark.dynamodb_engines

FR_ANY = "Q#gender=*#language=fr"


def _setup(client: Any) -> None:
    create_queue_table(client, TABLE)
    create_agent_table(client)


def agents_and_matches(client: Any, clock: FakeClock) -> list[Any]:
    store = TaskStore(client, Settings(queue_table_name=TABLE, retry_base_seconds=0.0), clock)
    agents = make_agent_store(client, store, clock)
    outcome: list[Any] = []
    outcome.append(agents.put_available(profile("ana", ["fr", "en"])).value)
    outcome.append(agents.put_available(profile("ana", ["fr", "en"])).value)  # idempotent
    clock.advance(1)
    outcome.append(agents.put_available(profile("bob", ["fr"], ["m"])).value)
    outcome.append(agents.put_available(profile("bob", ["fr", "de"], ["m"])).value)  # a profile change
    outcome.append(agents.heartbeat("bob").value)
    head = agents.head(FR_ANY)
    outcome.append(head.agent_id if head else None)
    outcome.append(agents.depth(FR_ANY))
    outcome.append(sorted(a.agent_id for a in agents.queued_agents()))
    first, second, third = create_calls(store, clock.now_ms(), {"language": "fr"}, 3)
    pair_1, pair_2 = pair_of(store, agents, first, FR_ANY), pair_of(store, agents, second, FR_ANY)
    outcome.append(agents.match_pairs([pair_1]).committed)
    lost = agents.match_pairs([pair_2])  # the same agent again: the transaction is cancelled
    outcome.append((lost.committed, sorted(lost.lost.agents), list(lost.reasons)))
    outcome.append(agents.call_ended("ana", first).value)
    outcome.append(agents.offline("bob").value)
    outcome.append(agents.get("bob").status is AgentStatus.OFFLINE)
    task, hung_up = store.hang_up(third, "calls")
    outcome.append((task.status.value, hung_up))
    clock.advance(120)
    outcome.append(sorted(a.agent_id for a in agents.idle_agents()))
    return outcome


def a_matcher_run(client: Any, clock: FakeClock) -> list[Any]:
    store = TaskStore(client, Settings(queue_table_name=TABLE, retry_base_seconds=0.0), clock)
    agents = make_agent_store(client, store, clock)
    for index, name in enumerate(("ana", "bob", "cid")):
        agents.put_available(profile(name, ["fr", "en"][: 1 + index % 2]))
        clock.advance(1)
    create_calls(store, clock.now_ms(), {"language": "fr"}, 2)
    create_calls(store, clock.now_ms(), {"language": "en"}, 2)
    report = Matcher(store, agents, owner="matcher-1", clock=clock).run(5)
    return [report.matched, sorted(a.agent_id for a in agents.agents(AgentStatus.BUSY))]


@pytest.mark.parametrize("scenario", [agents_and_matches, a_matcher_run])
def test_the_fake_answers_the_matchers_requests_as_the_engine_does(scenario: Any, aws: None, clock: FakeClock,
                                                                  request: pytest.FixtureRequest) -> None:
    if scenario is a_matcher_run and "[local" in request.node.name:
        # The seeded entropy gives two of the Matcher's transactions one ClientRequestToken; DynamoDB Local refuses a
        # token reused with other items (IdempotentParameterMismatch), moto does not check. A harness limit: the
        # comparison needs the same tokens on both sides. Run on moto.
        pytest.skip("seeded ClientRequestTokens repeat in a Matcher run; DynamoDB Local refuses them")
    on_engine, on_fake, engine_outcome, fake_outcome, fake = run_both(scenario, _setup, clock.now_ms())
    assert_same_answers(on_engine, on_fake)
    assert fake_outcome == engine_outcome
    engine = boto3.client("dynamodb")
    for table in (TABLE, AGENT_TABLE):
        assert all_items(fake, table) == all_items(engine, table)
