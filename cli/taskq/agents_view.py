"""`taskq agents`: depths of the matching queues (agents waiting per attribute combination, calls waiting).

Uses the agent store of taskqueue.agents (AgentStore.depth/head, agent_from_item) and taskqueue.matching
(preferences_key, call_queue_key). Which combinations exist is found from the QUEUED agents' profile items
(a filtered Scan of the agent table: one item per agent, not per task) and from the PENDING calls.
"""

from __future__ import annotations

import argparse
from typing import Any

from taskq import output


def run(t: Any, args: argparse.Namespace, say: Any) -> int:
    from taskq.main import CliError

    try:
        from taskqueue import agents, matching
    except ImportError as exc:  # the agent store ships with the Matcher
        raise CliError(f"agents is not available until taskqueue.agents and taskqueue.matching are installed ({exc})") from None
    env = dict(t.env)
    if args.agent_table_name:
        env["AGENT_TABLE_NAME"] = args.agent_table_name
    if not env.get("AGENT_TABLE_NAME", "").strip():
        raise CliError("no agent table: pass --stack-name NAME or --agent-table-name NAME (or set AGENT_TABLE_NAME)")
    settings = matching.MatchSettings.from_env(env)
    db = t.client("dynamodb")
    store = agents.AgentStore(db, settings, t.store, t.clock)

    if args.want:
        preferences = {}
        for pair in args.want:
            name, sep, value = pair.partition("=")
            if not sep:
                raise CliError(f"--want {pair!r}: use ATTR=VALUE, e.g. language=fr")
            preferences[name.strip()] = value.strip()
        keys = {matching.preferences_key(preferences, settings.attributes)}
        calls: dict[str, int] = {}
    else:
        keys = set()
        for agent in _queued_agents(db, settings.agent_table_name, agents):
            keys.update(agent.entries)
        calls = _waiting_calls(t, settings, matching)
        keys.update(calls)

    now = t.clock.now_ms()
    rows = []
    for key in sorted(keys):
        depth = store.depth(key)
        waiting_calls = calls.get(key, 0)
        if not depth and not waiting_calls and not args.all_keys and not args.want:
            continue
        head = store.head(key) if depth else None
        rows.append({
            "queueKey": key,
            "agentsWaiting": depth,
            "callsWaiting": waiting_calls if not args.want else None,
            "nextAgent": head.agent_id if head else None,
            "nextAgentWaitedMs": (now - head.available_ms) if head else None,
        })
    if args.json:
        say(output.dumps({"agentTable": settings.agent_table_name, "queues": rows}))
        return 0
    if not rows:
        say("no agent is waiting and no call is waiting")
        return 0
    header = ["AGENT QUEUE", "AGENTS", "CALLS", "NEXT AGENT", "WAITED"]
    say(output.table(header, [
        [r["queueKey"], str(r["agentsWaiting"]), "-" if r["callsWaiting"] is None else str(r["callsWaiting"]),
         r["nextAgent"] or "-", output.age(r["nextAgentWaitedMs"])]
        for r in rows
    ]))
    return 0


def _queued_agents(db: Any, table: str, agents: Any) -> list[Any]:
    from taskqueue import matching

    kwargs: dict[str, Any] = {
        "TableName": table,
        "FilterExpression": "sk = :profile AND agentStatus = :queued",
        "ExpressionAttributeValues": {
            ":profile": {"S": matching.PROFILE_SORT},
            ":queued": {"S": agents.AgentStatus.QUEUED.value},
        },
    }
    found = []
    while True:
        response = db.scan(**kwargs)
        found += [agents.agent_from_item(item) for item in response.get("Items", [])]
        if "LastEvaluatedKey" not in response:
            return found
        kwargs["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def _waiting_calls(t: Any, settings: Any, matching: Any, limit: int = 1000) -> dict[str, int]:
    """PENDING calls per agent queue they wait on (the first ``limit`` calls in serving order)."""
    counts: dict[str, int] = {}
    try:
        t.settings.order_of(settings.queue)
    except Exception:
        return counts
    token = None
    seen = 0
    while seen < limit:
        page = t.store.list_tasks(settings.queue, "PENDING", min(100, limit - seen), token)
        for task in page.tasks:
            try:
                key = matching.call_queue_key(task.payload, settings.attributes)
            except Exception:
                continue
            counts[key] = counts.get(key, 0) + 1
        seen += len(page.tasks)
        token = page.next_token
        if not token:
            break
    return counts
