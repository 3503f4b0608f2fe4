"""IAM as AWS enforces it on the local engine: each sandbox checks its function's requests against the role the
template gives it (local/iam), so a grant the template lacks fails the request with AccessDenied there, as on AWS,
not only after a deploy."""

from __future__ import annotations

import pytest

from tests.iam_support import denials_expected
from tests.support import load_event

pytestmark = pytest.mark.e2e

# AgentEvents' grants on the agent table without PutItem: an agent can no longer be queued.
AGENT_EVENTS_PUT = ("                - dynamodb:Query\n                - dynamodb:PutItem\n",
                    "                - dynamodb:Query\n")


def test_a_request_the_template_does_not_grant_is_access_denied_in_the_sandbox(start_engine, template_copy):
    path = template_copy(lambda text: text.replace(*AGENT_EVENTS_PUT, 1))
    engine = start_engine(template=path)
    with denials_expected() as denied:
        refused = engine.invoke("AgentEventsFunction", load_event("agent_events-agent-available.json"))
    assert not refused.ok and "AccessDeniedException" in refused.error["errorMessage"], refused.error
    assert "dynamodb:PutItem" in refused.error["errorMessage"]
    assert [(d["function"], d["action"], d["resource"], d["operation"]) for d in denied] == [
        ("AgentEventsFunction", "dynamodb:PutItem", "AgentTable", "TransactWriteItems")]  # one request refused
    assert engine.fault_report()["access_denied"]["AgentEventsFunction"] == 1
    # What the role does allow goes through: the depth of a combination (a Query).
    assert engine.invoke("AgentEventsFunction", load_event("agent_events-queue-depth.json")).ok
