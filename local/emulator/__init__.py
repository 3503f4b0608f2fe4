"""The embedded AWS emulator: moto's server app behind one global request lock (``server.py``, also
``python -m local.emulator.server``), the fault chain between the lock and moto (from ``local.faults``), a path
prefix forwarded ahead of the lock (``forward.py``: the local stack's Lambda API), and the speed-ups of moto 5.2.5's
DynamoDB: patched transactions, comparisons, stream records and request dispatch (``moto_patches.py``), item answers
written directly (``item_responses.py``), tables kept in order (``table_index.py`` with ``item_containers.py``) and the
Query/Scan pages read from that order (``index_reads.py``); the changes the engine's pollers wait for (``changes.py``:
``GET /_local/changes``).

May import: ``local.faults``, ``local.template``. Runs in its own server process; the engine talks to it over HTTP.
"""
