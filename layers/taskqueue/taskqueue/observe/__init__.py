"""What a user sees of the queues while they run: one trace from producer to runner (``tracing``), the queue metrics
SQS users alarm on (``queue_metrics``) and a match's span in its call's trace (``match_traces``).

Between ``store`` and ``wakeups`` in the layer's order: may import ``store`` and ``core``; ``wakeups`` (the safety net
publishes the queue metrics), ``work`` (each attempt's span), ``matching`` and ``client`` (capturing the producer's
context) import it. It sends no request of its own but through the store (and the X-Ray daemon's UDP port).
"""
