"""The demo's scenarios: the scenario files (``*.json``, read by ``python -m local demo --scenario NAME``), what
the demo and the local stack turn on themselves (``demo_defaults.py``) and the call-center driver
(``callcenter.py``: agents, callers with preferences and patience, hang-ups).

May import: every other package of ``local`` (the highest package; only ``local/__main__.py`` imports it).
"""
