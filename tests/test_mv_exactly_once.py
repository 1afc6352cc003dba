"""A refresh killed at any step (kill -9) and run again leaves the view exactly as one
uninterrupted refresh would: the same rows, each late row once, one history row per refresh.

Each process (tests/crash_job.py) checks the previous crash and makes the next one, on a
warehouse of its own; a twin view that is never interrupted is the oracle.
"""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mv.progress import KILL_POINTS

JOB = str(Path(__file__).with_name("crash_job.py"))


def run(home, *args):
    env = {**os.environ, "MV_HOME": str(home)}
    env.pop("MV_KILL_AT", None)
    return subprocess.run([sys.executable, JOB, *args], env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_refresh_killed_at_every_step_then_rerun_is_exactly_once(tmp_path):
    killed = run(tmp_path, "setup", KILL_POINTS[0])
    assert killed.returncode == -signal.SIGKILL, f"{KILL_POINTS[0]}: {killed.stderr[-3000:]}"
    for n, step in enumerate(KILL_POINTS, start=2):
        next_step = KILL_POINTS[n - 1:n]
        resumed = run(tmp_path, "resume", str(n), *next_step)
        expected = -signal.SIGKILL if next_step else 0
        assert resumed.returncode == expected, f"after {step}: {resumed.stderr[-3000:]}"
        result = json.loads(next(line for line in resumed.stdout.splitlines()[::-1] if line.startswith("{")))
        assert result["views_equal"] and result["late_equal"], (step, result)
        # The rerun may add a refresh of its own (with nothing left to do): every committed refresh
        # has exactly one history row, with no refresh missing.
        history = [json.loads(h) for h in result["history"]]
        assert [count for _, count in history] == [1] * len(history), (step, history)
        assert sorted(i for i, _ in history) == list(range(1, len(history) + 1)), (step, history)
        assert result["late_rows"] >= n - 1, "every batch's far-too-late row is in __late once"
