"""The work queue's worker (ProcessTasks): the claim loop (worker), what a run asks before it claims (claim_control:
pause, claim lanes, running-limit slots; held_slots), what it knows of the delayed partitions (delayed_view),
one attempt and its outcome (outcomes), leases and progress of running tasks (lease, progress), and the runner
protocol and loader (runner). May import workflows, wakeups, store and core.
"""
