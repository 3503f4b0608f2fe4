"""The engine and the long-running stack: ``engine.py`` (an emulator, the template's resources, the functions'
sandboxes and the wiring of every event source), ``observer.py`` (each task's story, from the queue table's stream),
``stack.py`` (``python -m local up``: the engine kept running on one endpoint, ``.taskq/local-stack.json``),
``lambda_api.py`` (the stack's Lambda ``Invoke`` API) and ``persist.py`` (its state on disk, ``--persist DIR``).

May import: ``local.delivery``, ``local.emulator``, ``local.faults``, ``local.iam`` (a role's grants, the stack's names), ``local.template``.
"""
