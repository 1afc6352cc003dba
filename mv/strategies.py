"""The incremental refresh's strategies, listed once: which one a view's query takes, by what its
description says (mv/query.py), and the one result every strategy returns (`Step`).

A strategy gets the change already read (`Change`: each changed source's rows, signed) and
returns a `writes.Recomputed` (the view's new state and the write that brings its rows there) or
an `estimate.Stopped` (it stopped at its estimate before writing: EXPLAIN's answer, or under
REFRESH POLICY AUTO a full refresh that costs less, which refresh.py then runs). The first
strategy in STRATEGIES whose `applies` holds is the query's: the list's order is the precedence.
Whether the query is kept incrementally at all is plan.py's (and the operators' delta rules,
mv/jvm/DeltaRules.scala); EXPLAIN names the strategy (`strategy` row).

Example:
    >>> choose(describe(spark, "SELECT auction, count(*) FROM bids GROUP BY auction")).name
    'groups'
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

from pyspark.sql import DataFrame

from mv import row_refresh, session_refresh, window_refresh
from mv.estimate import Stopped
from mv.query import QueryInfo
from mv.run import Run
from mv.writes import Recomputed

Step = Union[Recomputed, Stopped]


@dataclass(frozen=True)
class Change:
    """The change a strategy maintains the view by, read once (change_feed.read): each changed
    source's rows as a frame and as a temporary view, the rows counted by sign (change_feed.signs;
    none for windows, which `touched` counts), and the windows it touches (window_refresh.touched;
    None for the shapes that do not go window by window)."""
    frames: dict[str, DataFrame]
    views: dict[str, str]
    signs: dict[str, dict[int, int]]
    touched: window_refresh.Touched | None

    @property
    def view(self) -> str:
        """The temporary view of the change of a query that reads one source."""
        return next(iter(self.views.values()))


@dataclass(frozen=True)
class Strategy:
    name: str
    summary: str  # what it does, on EXPLAIN's `strategy` row
    applies: Callable[[QueryInfo], bool]
    refresh: Callable[[Run, Change], Step]


def _session(info: QueryInfo) -> bool:
    return bool(info.windows) and info.windows[0].kind == "SESSION"


STRATEGIES = [
    Strategy("rows", "the query over each changed source's rows, signed; their copies merged",
             lambda i: i.shape == "rows", row_refresh.refresh_rows),
    Strategy("partitions", "the partitions the change reaches, recomputed; the rows that differ merged",
             lambda i: i.shape == "partitions", row_refresh.refresh_partitions),
    Strategy("groups by change", "the groups the query over the change reaches, combined or recomputed",
             lambda i: i.keys_by_change and not i.keys_from_source, row_refresh.refresh_groups_by_change),
    Strategy("groups", "the groups of the change's keys, combined or recomputed",
             lambda i: i.shape == "aggregate", window_refresh.refresh_groups),
    Strategy("session join", "the sessions of both sides a change reaches, recomputed",
             lambda i: _session(i) and len(i.windows) > 1, session_refresh.refresh_session_join),
    Strategy("sessions", "the sessions a change can reach, recomputed from their rows",
             _session, session_refresh.refresh_sessions),
    Strategy("windows", "the windows the change touches, combined or recomputed",
             lambda i: True, window_refresh.refresh_windows),
]


def choose(info: QueryInfo) -> Strategy:
    """The strategy that keeps `info`'s query incrementally (when plan.py says it is)."""
    return next(s for s in STRATEGIES if s.applies(info))


def described(info: QueryInfo, kept: bool) -> str:
    """EXPLAIN's `strategy` row: the strategy's name and what it does, when the query is `kept`
    incrementally (plan.kept_incrementally).

    Example:
        >>> described(info, True)
        'windows: the windows the change touches, combined or recomputed'
    """
    if not kept:
        return "none: every refresh is full (the reason says why)"
    chosen = choose(info)
    return f"{chosen.name}: {chosen.summary}"
