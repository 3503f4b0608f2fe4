"""The matching queue (the Matcher, AgentEvents; docs/matcher.md): which agent may take which call (rules, pure),
the agent table's items (agent_items) and adapter (agents), which pairs a pass makes (pairing), one plan written by
several matchers (shared_plan), the Matcher's loop (matcher) and a caller's hang-up (hangup).
May import work, wakeups, store and core.
"""
