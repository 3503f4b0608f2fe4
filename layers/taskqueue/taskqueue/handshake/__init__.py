"""The wake-up handshake: producers wake a queue's worker themselves when no worker watches it, and a worker
stops only when no write can have been missed (docs/wakeups.md).

``rules`` (pure), ``producer`` (after a write; the backstops), ``watch`` (the worker's side). The record's
reads and writes are in ``taskqueue.store.wake``. Import the modules themselves: this package imports nothing,
so the store can use the rules without a cycle.
"""
