"""Event delivery the way AWS does it, one mechanism per module; open the one you mean to change:

- ``sandbox.py``: Lambda execution environments (one subprocess per function instance) and a function's pool
  (its concurrency limit, 429 over reserved concurrency)
- ``async_invoker.py``: Lambda's asynchronous-invocation queue (throttle backoff, retries, event age, on-failure
  destination); ``destinations.py``: the on-failure destinations (an SQS queue or an SNS topic of the stack)
- ``sns_subscriptions.py``: SNS subscriptions of functions, with the filter-policy matcher
- DynamoDB streams to a function: ``stream_reader.py`` (Lambda's poller: GetRecords on every shard, records in
  Lambda's shape) and ``stream_mapping.py`` (the event source mapping: filters, batches, bisection, retries)
- ``schedules.py`` (with ``local/template/cron.py``): EventBridge scheduled rules; ``one_time_schedules.py``: EventBridge
  Scheduler's one-time ``at()`` schedules the functions create (fired when due, then deleted)
- ``ttl.py``: DynamoDB TTL deletions (late, as AWS deletes them), marked on the stream as TTL's
- ``change_feed.py``: the emulator's changes, followed so an idle poller waits instead of asking

May import: ``local.template`` (function specs, account and region, filter patterns, cron), ``local.iam`` (the
sandboxes check each request of a function's code against its role), and of the emulator
only ``local.emulator.changes`` (the names of the kinds of change its feed counts). It reaches AWS through boto3
clients the engine gives it, and the feed over HTTP.
"""
