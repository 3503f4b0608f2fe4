"""The starts a queue's worker needs besides the table's stream (docs/wakeups.md): publishing a wake-up on SNS
(notify: a worker's tail call at its budget, Trigger's), the safety net (safety_net: Trigger's schedule), and the
scheduled wake-up at a queue's delayed head (delayed_wakeup: EventBridge Scheduler). May import store and core.
"""
