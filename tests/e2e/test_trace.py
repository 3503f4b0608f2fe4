"""One trace from a traced producer to its runner's own span, on the local engine: the producer (an API traced with
aws-xray-sdk, in this process) enqueues with the client; the table's wiring starts ProcessTasks in its sandbox, whose
span for the attempt joins the producer's trace (an X-Ray segment whose parent is the producer's enqueue) and whose
runner (the example runner, runner/example_runner/http_call.py) makes its call a span of that trace and sends its
headers to the service. Every segment goes to one X-Ray daemon, a UDP listener here, as in Lambda: one trace id from
the enqueue to the runner's own span, printed."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from aws_xray_sdk import global_sdk_config
from aws_xray_sdk.core import xray_recorder
from aws_xray_sdk.core.context import Context
from aws_xray_sdk.core.emitters.udp_emitter import UDPEmitter

from taskqueue.client import TaskQueueClient
from taskqueue.core.clock import SystemClock
from taskqueue.core.settings import Settings
from taskqueue.core.states import TaskStatus
from taskqueue.services import Services
from taskqueue.store import TaskStore
from taskqueue.wakeups.notify import Notifier
from tests.http_service import http_service

pytestmark = pytest.mark.e2e


class XRayDaemon:
    """The X-Ray daemon's UDP side: each datagram is a header line, then one segment document."""

    def __init__(self) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.socket.bind(("127.0.0.1", 0))
        self.socket.settimeout(0.2)
        self.port = self.socket.getsockname()[1]
        self.documents: list[dict] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._receive, daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.socket.recv(65536)
            except TimeoutError:
                continue
            _, _, document = data.decode().partition("\n")
            self.documents.append(json.loads(document))

    def named(self, name: str) -> list[dict]:
        return [d for d in list(self.documents) if d.get("name") == name]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.socket.close()


@contextmanager
def traced_producer(daemon: XRayDaemon) -> Iterator[None]:
    """This process's X-Ray recorder sending to the daemon, as an instrumented application's does."""
    previous_context, previous_emitter, enabled = xray_recorder.context, xray_recorder.emitter, global_sdk_config.sdk_enabled()
    global_sdk_config.set_sdk_enabled(True)
    xray_recorder.configure(context=Context(), sampling=False, emitter=UDPEmitter(f"127.0.0.1:{daemon.port}"))
    try:
        yield
    finally:
        xray_recorder.configure(context=previous_context, emitter=previous_emitter)
        global_sdk_config.set_sdk_enabled(enabled)


def test_one_enqueue_from_a_traced_producer_is_one_trace_to_the_runners_own_span(start_engine, template_copy):
    daemon = XRayDaemon()
    try:
        with http_service() as (url, received), traced_producer(daemon):
            # Every function sends its segments to this daemon (Lambda sets the same variable for its own).
            template = template_copy(lambda text: text.replace(
                "        POWERTOOLS_SERVICE_NAME: taskqueue\n",
                f"        POWERTOOLS_SERVICE_NAME: taskqueue\n        AWS_XRAY_DAEMON_ADDRESS: 127.0.0.1:{daemon.port}\n", 1))
            engine = start_engine({"TaskRunner": "example_runner.http_call:run",
                                   "RunnerEnvironment": json.dumps({"EXAMPLE_API_URL": f"{url}/ok"})}, template=template)
            refs = engine.template.resolver.refs
            settings = Settings.from_env({"QUEUE_TABLE_NAME": refs["QueueTable"],
                                          "WORKER_WAKE_UP_TOPIC_ARN": refs["WorkerWakeUpTopic"]})
            clock = SystemClock()
            client = TaskQueueClient(Services(settings, TaskStore(engine.ddb, settings, clock),
                                              Notifier(engine.sns_client, settings), clock))

            producer = xray_recorder.begin_segment("orders-api")
            enqueue = xray_recorder.begin_subsegment("enqueue")
            task_id = client.enqueue({"order": 42})
            xray_recorder.end_subsegment()
            xray_recorder.end_segment()

            assert engine.wait_for(lambda: client.get(task_id).status is TaskStatus.SUCCESS, timeout=60), \
                client.get(task_id)
            assert engine.wait_for(lambda: daemon.named("process work") and daemon.named("orders-api"), timeout=10)
    finally:
        daemon.close()

    (attempt,) = daemon.named("process work")
    (runner_span,) = attempt["subsegments"]
    (call,) = received
    print(f"\ntrace {producer.trace_id}\n"
          f"  segment    {producer.id} orders-api (the producer)\n"
          f"    subseg   {enqueue.id} enqueue -> task {task_id}\n"
          f"      segment  {attempt['id']} {attempt['name']} (ProcessTasks), trace {attempt['trace_id']}, "
          f"parent {attempt['parent_id']}, "
          f"annotations {json.dumps(attempt['annotations'], sort_keys=True)}\n"
          f"        subseg {runner_span['id']} {runner_span['name']} (the example runner's call)\n"
          f"          the service got traceparent {call['traceparent']}\n"
          f"                          X-Amzn-Trace-Id {call['xray']}")
    assert daemon.named("orders-api")[0]["trace_id"] == attempt["trace_id"] == producer.trace_id
    assert attempt["parent_id"] == enqueue.id
    assert attempt["annotations"] == {"task_id": task_id, "queue": "work", "group": "default", "attempt": 1}
    assert runner_span["name"] == "POST 127.0.0.1"
    # The service the runner called was handed the runner's span, in the same trace, both ways.
    assert call["xray"] == f"Root={producer.trace_id};Parent={runner_span['id']};Sampled=1"
    assert call["traceparent"] == f"00-{producer.trace_id[2:].replace('-', '')}-{runner_span['id']}-01"
