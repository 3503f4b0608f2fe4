"""The serialized moto server for tests and benchmarks of concurrency: the local engine's emulator
(``local/emulator/server.py``: moto's server in its own process behind one global request lock, with moto's
TransactWriteItems patched to check every condition first and copy no table), started at construction.

With ``record_transactions=True`` it keeps the body of every TransactWriteItems that committed, in commit
order (``commits``, ``clear_commits()``), so a test can replay what happened; ``requests`` and ``cancelled``
count the requests served and the transactions refused.
"""

from __future__ import annotations

from local.emulator.server import Emulator


class SerializedMoto(Emulator):
    def __init__(self, record_transactions: bool = False, fast_transactions: bool = True) -> None:
        super().__init__(record_transactions=record_transactions, fast_transactions=fast_transactions)
        self.start()
