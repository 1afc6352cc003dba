"""Where a refresh is: the phases a progress display follows (`watching`), and the points where
crash tests kill it (`checkpoint`).

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

KILL_POINTS = ("changes_read", "late_rows_written", "committed")


def checkpoint(step: str) -> None:
    """Crash-safety tests set MV_KILL_AT to one of KILL_POINTS: the process dies there as by kill -9."""
    if os.environ.get("MV_KILL_AT") == step:
        os.kill(os.getpid(), signal.SIGKILL)


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
