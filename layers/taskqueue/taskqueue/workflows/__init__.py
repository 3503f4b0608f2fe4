"""Workflows: tasks that wait for other tasks (docs/workflows.md). Creating one (create), what a runner is given of its
dependencies (runtime), the worker's hook for a PENDING task DynamoDB's TTL deleted (ttl), an operator's view and a
workflow's cancel (views). A task made ready needs no wake-up of its own: its MODIFY into PENDING is on the table's
stream, which starts the queue's worker. (The safety net finishes the fan-outs
a crashed writer left owed with the store's ``finish_owed_fan_outs``.)

The rules are pure, in core/ (workflow_spec: the input; workflow_rules: policies, counters, keys; workflow_plan: the
items), and every DynamoDB request is the store's (store/workflows.py, store/workflow_fan_out.py). May import wakeups,
store and core.
"""
