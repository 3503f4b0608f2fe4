"""Reports of a run: ``run_report.py`` (the run report: a JSON file and a PNG chart of depth, completions, sheds and
ages at claim) and ``callcenter_report.py`` (the call-center scenario's summary table, files and chart).

May import: nothing else of ``local`` today (a report reads the engine's results as plain data); below it all
packages but ``local.scenarios``.
"""
