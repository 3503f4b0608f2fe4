"""Benchmarks of the product against ports of the seed designs (see docs/benchmarks.md).

Run everything with ``.venv/bin/python bench/run.py`` (``make bench``). Nothing in here is part of the product:
the seed ports (``seed_lifo``, ``seed_matcher``) exist only to be measured against.
"""
