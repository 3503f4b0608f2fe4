"""Event delivery the way AWS does it, one mechanism per module; this module only gathers their names for
older imports (``from local.delivery import AsyncInvoker``). Open the module you mean to change:

- ``async_invoker.py``: Lambda's asynchronous-invocation queue (retries, event age, on-failure destination)
- ``sns_delivery.py``: SNS subscriptions of functions, with the filter-policy matcher
- ``stream_reader.py`` / ``stream_mapping.py``: DynamoDB stream polling / the event source mapping
- ``schedules.py`` (with ``cron.py``): EventBridge scheduled rules
- ``ttl.py``: DynamoDB TTL deletions
"""

from local.async_invoker import AsyncInvoker, Invoked
from local.schedules import Schedule, rate_seconds
from local.sns_delivery import SnsDelivery, SnsSubscription
from local.stream_mapping import StreamMapping
from local.stream_reader import StreamReader, lambda_record
from local.ttl import TtlRegistry, TtlSweeper, key_of

__all__ = ["AsyncInvoker", "Invoked", "Schedule", "SnsDelivery", "SnsSubscription", "StreamMapping", "StreamReader",
           "TtlRegistry", "TtlSweeper", "key_of", "lambda_record", "rate_seconds"]
