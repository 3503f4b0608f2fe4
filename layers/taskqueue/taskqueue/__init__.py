"""The queue core shared by every function (the Lambda layer), in packages by concern. Imports run one way only,
top to bottom of this list (tests/unit/test_layering.py checks it):

    client/     what an application imports: TaskQueueClient, task creation (CreateTasks' path), stack discovery
    services    the wiring a handler needs, built once from the environment
    matching/   the matching queue: agent rules and items, pairing, the shared plan, the Matcher's loop, hang-ups
    work/       the work queue's worker: one loop for every start, slots, leases, progress, outcomes, the runner
    workflows/  tasks that wait for other tasks: creation, what a runner reads of its dependencies, views, the hooks
    wakeups/    the starts a worker's own code makes or needs: SNS wake-ups, the safety net, the delayed head's schedule
    observe/    what users see while it runs: one trace from producer to runner, the queue metrics
    store/      the queue table's one adapter (the only code that sends DynamoDB requests, through store.dynamo)
    core/       pure rules and values: states, keys, the task model, settings, errors, clock, the queue's record

Public module paths (stable; what runners and applications import, as README.md and docs/runner.md show them):
``taskqueue.client``, ``taskqueue.errors``, ``taskqueue.model``, ``taskqueue.lease``, ``taskqueue.progress``,
``taskqueue.runner``, ``taskqueue.tracing``. The last six are short names of modules that live in ``core/``, ``work/``
and ``observe/``: an import of one gives the very module object of its package (one module, not a copy), made on
first use. Everything else is internal and may move.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType

# Public name -> the module that holds it. Add a line here (and to test_public_api.py) to publish another module.
PUBLIC_MODULES = {
    "taskqueue.errors": "taskqueue.core.errors",
    "taskqueue.model": "taskqueue.core.model",
    "taskqueue.lease": "taskqueue.work.lease",
    "taskqueue.progress": "taskqueue.work.progress",
    "taskqueue.runner": "taskqueue.work.runner",
    "taskqueue.tracing": "taskqueue.observe.tracing",
}


class _PublicModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves a public short name to its module: the import system then finds that module in sys.modules."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in PUBLIC_MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        # The import system returns whatever sys.modules holds under the name after this: the real module.
        sys.modules[module.__name__] = importlib.import_module(PUBLIC_MODULES[module.__name__])


if not any(isinstance(finder, _PublicModules) for finder in sys.meta_path):
    sys.meta_path.append(_PublicModules())
