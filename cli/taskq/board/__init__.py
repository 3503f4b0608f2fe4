"""`taskq board`: the queue board, a web page operators watch and act from (served on 127.0.0.1).

- ``command``: the subcommand, the server (loopback only, a free port unless --port).
- ``services``: what the board works with, built from taskq's connection: the store, the agent store,
  FailedEventsQueue, the metrics source.
- ``reads``: what the pages show (counts by COUNT queries, listings with filters, timelines, the matching queue).
- ``metrics`` and ``charts``: per-minute series from the functions' EMF metrics (CloudWatch on AWS, the function
  log locally) and their SVG geometry.
- ``app``, ``views``, ``actions``, ``assets``: the Flask application, its GET pages, its POST actions (CSRF token,
  read-only), and htmx (installed from npm, not kept here).

Every read and action goes through the same store and operator code as the ``taskq`` commands.
"""
