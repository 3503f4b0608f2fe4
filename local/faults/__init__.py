"""Faults AWS produces and the emulator does not (docs/local-engine.md#faults): the setting (``faults.py``,
``Faults``) and the mechanisms of the emulator's fault chain, which run inside its request lock
(``chain.py``): requests refused with an error (``request_faults.py``), GSIs that see writes late
(``index_lag.py``), DynamoDB's 400 KB item-size limit (``item_size.py``), all reading one request through
``wsgi_request.py`` (what a request reads and writes in moto's backend, and ``set_item`` to put an item back).

May import: ``local.template`` (nothing today). The emulator (``local.emulator``) imports this package, never
the other way round.
"""
