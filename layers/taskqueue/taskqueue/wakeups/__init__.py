"""How a queue's worker is woken (docs/wakeups.md): publishing on SNS (notify), the producers' side of the
wake-up handshake (producer), a worker's watch and linger (watch), the backstops that wake a queue nobody
watches (backstop: the stream and the relay; safety_net: the schedule). The handshake's rules are
``taskqueue.core.handshake``, the record's reads and writes ``taskqueue.store.handshake``.
May import store and core.
"""
