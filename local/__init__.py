"""The local engine: runs the project's real handlers against an embedded, serialized AWS emulator,
wired the way template.yaml says (see docs/local-engine.md). In packages by concern; imports run one way only,
top to bottom of this list (tests/unit/test_layering.py checks it):

    __main__    ``python -m local demo|invoke|up|down``: the command line, may import every package
    scenarios/  the demo's scenarios and what they turn on (demo_defaults), the call-center driver
    reports/    the run report (JSON and chart) and the call-center's summary
    engine/     the engine (emulator + resources + sandboxes + wiring), the task observer, and the long-running
                stack (``make up``): its Lambda Invoke API and its state on disk
    delivery/   how an event reaches a function, as AWS does it: execution environments (sandboxes), Lambda's
                asynchronous queue, destinations, SNS subscriptions, DynamoDB streams and their mapping,
                schedules, TTL
    emulator/   the embedded moto server behind one request lock, and its speed-ups (patches, sorted indexes)
    faults/     faults AWS produces and moto does not: the setting and the mechanisms of the emulator's fault chain
    iam/        IAM as AWS enforces it: what a request needs, what a function's role grants, the check (the sandboxes
                and the tests run every request of a function's code through it)
    template/   the stack description: the SAM template, its transform, intrinsics, Rules, filter patterns, cron

Everything here is internal to the project (no compatibility names): import a module by its package path.
"""
