"""`taskq agents`: depths of the matching queues (agents waiting per attribute combination, calls waiting).

Everything goes through the two tables' adapters: ``AgentStore`` (queued agents, each queue's depth and head)
and ``TaskStore`` (the PENDING calls). Which combinations exist is found from the queued agents' entries and
from the calls waiting; the agent table's name and the matching attributes come from the stack.
"""

from __future__ import annotations

import argparse

from taskq import output
from taskq.connection import CliError, Command, Printer, Target
from taskqueue.core.errors import InvalidAgentInput
from taskqueue.matching import rules as matching
from taskqueue.matching.agents import AgentStore


def run(t: Target, args: argparse.Namespace, say: Printer) -> int:
    env = dict(t.env)
    if args.agent_table_name:
        env["AGENT_TABLE_NAME"] = args.agent_table_name
    if not env.get("AGENT_TABLE_NAME", "").strip():
        raise CliError("no agent table: pass --stack-name NAME or --agent-table-name NAME (or set AGENT_TABLE_NAME)")
    settings = matching.MatchSettings.from_env(env)
    store = AgentStore(t.client("dynamodb"), settings, t.store, t.clock)

    if args.want:
        keys = {matching.preferences_key(_preferences(args.want), settings.attributes)}
        calls: dict[str, int] = {}
    else:
        keys = {key for agent in store.queued_agents() for key in agent.entries}
        calls = _waiting_calls(t, settings)
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


def _preferences(pairs: list[str]) -> dict[str, str]:
    preferences = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise CliError(f"--want {pair!r}: use ATTR=VALUE, e.g. language=fr")
        preferences[name.strip()] = value.strip()
    return preferences


def _waiting_calls(t: Target, settings: matching.MatchSettings, limit: int = 1000) -> dict[str, int]:
    """PENDING calls per agent queue they wait on (the first ``limit`` calls in serving order)."""
    counts: dict[str, int] = {}
    if settings.queue not in t.settings.queue_orders:  # the calls queue is not configured here: no calls
        return counts
    token = None
    seen = 0
    while seen < limit:
        page = t.store.list_tasks(settings.queue, "PENDING", min(100, limit - seen), token)
        for task in page.tasks:
            try:
                key = matching.call_queue_key(task.payload, settings.attributes)
            except InvalidAgentInput:  # a call the Matcher will refuse: it waits on no agent queue
                continue
            counts[key] = counts.get(key, 0) + 1
        seen += len(page.tasks)
        token = page.next_token
        if not token:
            break
    return counts


def add_parser(command: Command) -> None:
    p = command("agents", run, "Matching queue depths: available agents per attribute combination.")
    p.add_argument("--agent-table-name", help="the agent table (default: stack output AgentTableName, or env AGENT_TABLE_NAME)")
    p.add_argument("--want", action="append", metavar="ATTR=VALUE",
                   help="only the agent queue a caller with these preferences waits on (repeatable), e.g. --want language=fr")
    p.add_argument("--all-keys", action="store_true", help="also show combinations with no agent and no call waiting")
