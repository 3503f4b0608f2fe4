"""The local engine's scaled function clock (local/delivery/sandbox.py, ``scale_clocks``): time, sleeps and threading's
waits run 1/scale as fast, counted from one shared epoch."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from tests.support import ROOT

PROBE = """
import json, sys, threading, time
from concurrent.futures import ThreadPoolExecutor, wait
sys.path.insert(0, {root!r})
from local.delivery.sandbox import scale_clock
epoch = {epoch!r}
real0 = time.perf_counter()
scale_clock(0.05, epoch)
t0, m0 = time.time(), time.monotonic()
time.sleep(2)                                     # 2 s of the function's time
with ThreadPoolExecutor(1) as pool:
    unset = threading.Event()
    slow = pool.submit(unset.wait, 1000)          # not set yet: the wait below times out
    wait([slow], timeout=2)                       # 2 s more
    threading.Event().wait(2)                     # and 2 more
    unset.set()
print(json.dumps({{"virtual": time.time() - t0, "monotonic": time.monotonic() - m0,
                  "real": time.perf_counter() - real0, "since_epoch": time.time() - epoch}}))
"""


def test_a_scaled_clock_runs_time_and_waits_faster_from_a_shared_epoch():
    epoch = time.time() - 10  # the engine started 10 real seconds ago: 200 s of function time at scale 0.05
    done = subprocess.run([sys.executable, "-c", PROBE.format(root=str(ROOT), epoch=epoch)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert 5.9 <= seen["virtual"] < 12 and 5.9 <= seen["monotonic"] < 12  # three waits of 2 s each
    assert seen["real"] < 3  # about 0.3 s of real time (plus the pool's start)
    assert seen["since_epoch"] >= 200
