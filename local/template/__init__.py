"""The stack the engine runs, as described: the SAM template read after the SAM transform (``template.py``,
``sam_transform.py``), CloudFormation intrinsics (``intrinsics.py``) and the template's Rules (``rules.py``), the
event filter patterns of stream filters and SNS filter policies (``filter_patterns.py``) and EventBridge cron expressions
(``cron.py``). Pure description: no emulator, no process.

May import: nothing else of ``local`` (the lowest package).
"""
