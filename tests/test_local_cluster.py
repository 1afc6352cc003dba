"""The window functions run on executors in their own JVMs, not only in the driver.

A local-cluster master starts two executor JVMs; the job runs in a subprocess because a Python
process holds one SparkContext and the test run's shared session is already one.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_window_functions_on_a_local_cluster(tmp_path):
    env = {**os.environ, "MV_HOME": str(tmp_path / "home")}
    job = subprocess.run([sys.executable, str(Path(__file__).with_name("cluster_job.py"))],
                         env=env, capture_output=True, text=True, timeout=400)
    assert job.returncode == 0, job.stderr[-3000:]
    result = json.loads(job.stdout.strip().splitlines()[-1])
    assert result["executors"] == 2
    # 1000 rows 7 minutes apart span 116.55 hours: 117 hourly windows, every row once.
    assert result["tumble"] == [117, sum(range(1000)), 1000]
    # Each item has a row every 21 minutes: t <= last + gap holds, so one session per item.
    assert result["sessions"] == [[0, 1], [1, 1], [2, 1]]
