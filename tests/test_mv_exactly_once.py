"""A refresh stopped at any step and run again leaves the view exactly as one uninterrupted
refresh would: the same rows, each late row once, one history row per refresh.

A twin view that is never interrupted is the oracle. Every kill point is tried inside this
process (the refresh raises `progress.Crash` there, so nothing in it can tidy up); one of them,
between the late rows' commit and the view's, is also a real kill -9 of a refresh process
(tests/crash_job.py), on a warehouse of its own, checked by a second process.
"""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mv import progress, refresh
from mv.progress import KILL_POINTS

import crash_job

JOB = str(Path(__file__).with_name("crash_job.py"))


def assert_exactly_once(result: dict, batches: int, step: str) -> None:
    assert result["views_equal"] and result["late_equal"], (step, result)
    # The rerun may add a refresh of its own (with nothing left to do): every committed refresh
    # has exactly one history row, with no refresh missing.
    history = [json.loads(h) for h in result["history"]]
    assert [count for _, count in history] == [1] * len(history), (step, history)
    assert sorted(i for i, _ in history) == list(range(1, len(history) + 1)), (step, history)
    assert result["late_rows"] >= batches, "every batch's far-too-late row is in __late once"


def test_refresh_stopped_at_every_step_then_rerun_is_exactly_once(spark):
    crash_job.setup(spark)
    try:
        for n, step in enumerate(KILL_POINTS, start=1):
            crash_job.batch(spark, n)
            with pytest.raises(progress.Crash), progress.crashing_at(step):
                refresh.refresh(spark, "killed")
            for view in ("killed", "clean"):
                refresh.refresh(spark, view)
            assert_exactly_once(crash_job.compare(spark), n, step)
    finally:
        crash_job.teardown(spark)


def run(home, *args):
    env = {**os.environ, "MV_HOME": str(home)}
    env.pop("MV_KILL_AT", None)
    return subprocess.run([sys.executable, JOB, *args], env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_refresh_process_killed_between_its_two_commits_then_rerun_is_exactly_once(tmp_path):
    step = "late_rows_written"
    killed = run(tmp_path, "setup", step)
    assert killed.returncode == -signal.SIGKILL, f"{step}: {killed.stderr[-3000:]}"
    resumed = run(tmp_path, "resume")
    assert resumed.returncode == 0, f"after {step}: {resumed.stderr[-3000:]}"
    result = json.loads(next(line for line in resumed.stdout.splitlines()[::-1] if line.startswith("{")))
    assert_exactly_once(result, 1, step)
