"""What the demo and the local stack turn on themselves. A deploy that sets no parameter is a quiet production
stack: no scheduled tasks, no reserved concurrency (so it deploys to an account with a small concurrency quota), no
task runner (ProcessTasks claims nothing until the deployer names one).
The demo's scenarios and ``make up`` ask for what they need here, and nothing that changes how work starts: they run
the path a default deploy runs (no reserved concurrency, the tables' streams start the workers).

docs/operations.md ("Demo and local stack versus a production deploy") lists each of these beside its production
default; tests/unit/test_local_defaults.py checks that the list and this module agree.
"""

from __future__ import annotations

# The schedule as a load generator: 15 empty tasks a minute into queue "work" (a scenario sets its own count).
SCHEDULE: dict[str, str] = {
    "CreateTasksScheduleState": "ENABLED",
    "CreateTasksScheduleQueue": "work",
    "CreateTasksCount": "15",
}
# Agents made available by hand in a long-running local stack stay available until taken offline, as before
# agents had to heartbeat: nobody sends heartbeats while poking at it with `make invoke`.
PRESENCE: dict[str, str] = {"AgentTimeoutSeconds": "0"}
# The fake legacy system runs the tasks: the template names no runner (a deploy without one claims nothing), and
# the demo, the local stack, the tests and the benchmarks run the fake one they were measured with.
RUNNER: dict[str, str] = {"TaskRunner": "taskqueue.runner:fake_legacy_system"}
# `make up` (python -m local up): all of these, under whatever --param-overrides says.
LOCAL_STACK: dict[str, str] = {**SCHEDULE, **PRESENCE, **RUNNER}
# `make demo` scenarios of the work queue: the same but PRESENCE; the call-center scenario turns the schedule off
# again (its calls come from its driver) and keeps the runner.
DEMO: dict[str, str] = {**SCHEDULE, **RUNNER}

__all__ = ["DEMO", "LOCAL_STACK", "PRESENCE", "RUNNER", "SCHEDULE"]
