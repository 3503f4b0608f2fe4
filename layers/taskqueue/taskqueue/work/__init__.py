"""The work queue's worker (ProcessTasks): one loop for every way an invocation starts (worker), what a stream batch
names (stream_batch), the queue's record and pause as a run sees it (record_view), the running limit's slots
(held_slots), fair share (fair_share), what it knows of the delayed partitions (delayed_view), one attempt and its
outcome (outcomes), leases and progress of running tasks (lease, lease_marks, progress), and the runner protocol and
loader (runner). May import wakeups, store and core.
"""
