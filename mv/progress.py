"""Where a refresh is: the phases a progress display follows (`watching`) and Spark's UI shows
(`labelled`), and the points where crash tests kill it (`checkpoint`, `crashing_at`).

Example:
    >>> with progress.watching(lambda view, phase: print(view, phase)):
    ...     refresh.refresh(spark, "hourly")
    hourly planning
    hourly reading changes
    ...
"""
from __future__ import annotations

import os
import signal
from contextlib import contextmanager
from typing import Callable, Iterator

# open_windows_keeping: before the open windows' commit, which runs beside the view's (open_windows.replace),
# so that the view's commit lands without it
KILL_POINTS = ("changes_read", "late_rows_written", "open_windows_keeping", "open_windows_kept", "committed")


class Crash(BaseException):
    """A refresh stopped at a kill point inside the process (`crashing_at`); a BaseException, so no
    `except Exception` on the way out can tidy up after it, as none could after a kill -9."""


_crash_at: list[str] = []


def checkpoint(step: str) -> None:
    """Crash-safety tests stop a refresh at one of KILL_POINTS: the process dies there as by kill -9
    when MV_KILL_AT names it, the refresh raises `Crash` there inside `crashing_at(step)`."""
    if os.environ.get("MV_KILL_AT") == step:
        os.kill(os.getpid(), signal.SIGKILL)
    if step in _crash_at:
        raise Crash(step)


@contextmanager
def crashing_at(step: str) -> Iterator[None]:
    """Refreshes in the block stop at kill point `step` by raising `Crash`.

    Example:
        >>> with pytest.raises(progress.Crash), progress.crashing_at("committed"):
        ...     refresh.refresh(spark, "hourly")
    """
    assert step in KILL_POINTS, step
    _crash_at.append(step)
    try:
        yield
    finally:
        _crash_at.remove(step)


PHASES = ("planning", "reading changes", "recomputing", "merging")
_watchers: list[Callable[[str, str], None]] = []


@contextmanager
def watching(watcher: Callable[[str, str], None]) -> Iterator[None]:
    """Call `watcher(view, phase)` as each refresh in the block enters one of PHASES.

    Example:
        >>> with progress.watching(lambda view, phase: print(view, phase)):
        ...     refresh.refresh(spark, "hourly")
        hourly planning
        hourly reading changes
        ...
    """
    _watchers.append(watcher)
    try:
        yield
    finally:
        _watchers.remove(watcher)


def phase(view: str, name: str) -> None:
    """Tell the watchers that the refresh of `view` enters the phase `name` (one of PHASES)."""
    for watcher in list(_watchers):
        watcher(view, name)


JOB_DESCRIPTION = "spark.job.description"   # what Spark's UI shows for the SQL executions of a thread
LABEL = "mv refresh "   # how a refresh's executions are described: LABEL + "<view>: <phase>"


@contextmanager
def labelled(spark, view: str) -> Iterator[None]:
    """Spark SQL executions of the refresh of `view` in the block are described in Spark's UI (and its
    REST API) as "mv refresh <view>: <phase>"; the thread's own description comes back afterwards.
    Under Spark Connect the block changes nothing: the server's executions are described there.

    Example:
        >>> with progress.labelled(spark, "hourly"):
        ...     progress.phase("hourly", "planning"); spark.sql("SELECT 1").collect()
        # the SQL tab lists "mv refresh hourly: planning"
    """
    try:
        context = spark.sparkContext
        before = context.getLocalProperty(JOB_DESCRIPTION)
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext here
        yield
        return

    def describe(name: str, entered: str) -> None:
        if name == view:
            context.setLocalProperty(JOB_DESCRIPTION, f"{LABEL}{view}: {entered}")

    try:
        with watching(describe):
            yield
    finally:
        context.setLocalProperty(JOB_DESCRIPTION, before)
