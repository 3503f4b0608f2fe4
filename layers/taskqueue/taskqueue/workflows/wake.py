"""The wake-up of a queue whose waiting workflow tasks became ready (WAITING -> PENDING, an UpdateItem).

Today a MODIFY of the queue table reaches no worker (the stream's filters pass INSERTs of new tasks), so this sends the
wake-up a producer sends after writing work: the wake-up handshake's ``after_write`` (the queue's worker is woken unless
one watches it). Once the table's stream starts workers for a task made ready (a MODIFY whose new image is PENDING in a
ready partition), this body can become ``return WakeUp("stream")``: the write itself is the wake-up.
"""

from __future__ import annotations

from taskqueue.wakeups.producer import ProducerHandshake, WakeUp

REASON = "workflow"


def wake(handshake: ProducerHandshake, queue: str) -> WakeUp:
    """Wake ``queue``'s worker for tasks a workflow made ready; never raises (a lost wake-up is the safety net's)."""
    return handshake.after_write(queue, reason=REASON)
