"""Open windows as state: the rows of the windows an EMIT ON WINDOW CLOSE view holds back, kept
in `<view>__open` so that a refresh combines its change with them (mv/combine.py) instead of
reading those windows again from the source when they close.

A view keeps them when its query is combinable (count, sum, min, max over one source, grouped by
TUMBLE, HOP or CUMULATE windows). `<view>__open` has the view's columns and holds, per group, the
row the view will get when its window closes. Each refresh that keeps it replaces it whole, in one
Delta commit beside the view's (`replace`), naming it with a new id (its table property
`mv.state`, written by the same commit, RefreshCommit's); the view's state, committed in the
view's commit, names the id it goes with (`open_id`). A table whose id is not the state's (a
refresh that died between the two commits, a concurrent refresh, a view last refreshed before
open windows were kept) is not trusted (`named`, `untrusted`): the refresh builds it again from
the source (`rebuilt`), as a full refresh does, even one that finds no source moved. So it never
decides what is exact: the view's state does.

Example:
    >>> open_windows.kept(view, info, previous, tables[view.open_table])
    Kept(rows='hourly__open VERSION AS OF 41', marker='17')
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from pyspark.sql import DataFrame

from mv import errors, progress
from mv.catalog import View
from mv.combine import combinable, foldable
from mv.delta_tables import Table
from mv.history import create_beside
from mv.query import QueryInfo, quote, sql_string, time_sql
from mv.run import Run
from mv.state import REFRESH_ID_PROPERTY, STATE_PROPERTY, RefreshState


@dataclass(frozen=True)
class Kept:
    """A view's open-window table as the refresh found it: `rows`, a relation in SQL's FROM pinned
    to that version, when they are the rows that go with the view's state (else None: they are
    built again); `marker`, its `mv.refresh_id`, which its next commit expects."""
    rows: str | None
    marker: str | None


def applies(view: View, info: QueryInfo) -> bool:
    """Whether the view keeps its open windows: EMIT ON WINDOW CLOSE over combinable groups of
    TUMBLE, HOP or CUMULATE windows, or of one SESSION (`sessions_fold`)."""
    if view.definition.emit != "WINDOW CLOSE" or not info.window_start or info.group_by is None:
        return False
    if all(w.kind in ("TUMBLE", "HOP", "CUMULATE") for w in info.windows):
        return combinable(info)
    return sessions_fold(view, info)


def sessions_fold(view: View, info: QueryInfo) -> bool:
    """Whether the view's open sessions fold with a change's: one SESSION under a watermark, grouped
    by its keys and its bounds alone, its other columns count, sum, min or max. A row that joins a
    session, or two, then gives their rows folded (session_refresh.folded_sessions); a retraction,
    which may split one, has the open sessions recomputed from the source (recent_sessions)."""
    keys = info.session_keys
    return (len(info.windows) == 1 and info.windows[0].kind == "SESSION" and bool(view.definition.watermark_column)
            and combinable(info, sessions=True) and len(keys) == len(info.windows[0].partition_by)
            and len(info.group_by) == len(keys) + 2 and bool(info.window_end)
            and foldable(info.output, ("session_key", "window_start", "window_end")))


def kept(view: View, info: QueryInfo, previous: RefreshState | None, found: Table | None) -> Kept | None:
    """The view's open windows, as `found` (mv_delta_tables) shows their table; None for a view
    that keeps none."""
    if not applies(view, info):
        return None
    if found is None or not found.exists:
        return Kept(None, None)
    ours = named(found, previous.open_id if previous is not None else None)
    return Kept(f"{view.open_table} VERSION AS OF {found.version}" if ours else None,
                found.properties.get(REFRESH_ID_PROPERTY))


def named(found: Table, open_id: str | None) -> bool:
    """Whether the open table `found` (mv_delta_tables) is the one whose id the view's state names
    (`open_id`), so it can be trusted; a table named by no state never is."""
    return open_id is not None and found.properties.get(STATE_PROPERTY) == open_id


def untrusted(found: Kept | None) -> bool:
    """Whether the view keeps open windows and their table is not the one its state names (`kept`),
    so its next refresh builds them again even when no source moved."""
    return found is not None and found.rows is None


def split(run: Run, rows: DataFrame, bound: int) -> tuple[DataFrame, DataFrame]:
    """`rows` divided into those of windows closed by the new watermark (ending at or before
    `bound`, µs), which go to the view, and the rest, which stay open."""
    closed = f"{quote(run.info.window_end)} <= {time_sql(bound, run.time_type)}"
    return rows.where(closed), rows.where(f"NOT ({closed})")


def replace(run: Run, rows: DataFrame) -> str:
    """Replace the view's open-window table by `rows` under a new id, which the caller puts in the
    view's state: one Delta commit, the refresh's own (mv/jvm/RefreshCommit.scala, the id as its
    state), which fails when a concurrent refresh committed to it since this one looked.

    A table committed to before is replaced beside the rest of the refresh, its view's commit
    included (`Run.beside`; the refresh waits for it before it returns): the id check of `kept`
    makes the order of the two commits free, since a view state whose id the table lacks (a crash
    between them, a replacement that lost to a concurrent refresh) has the table built again.
    Nexmark's q7 at 3M bids: two commits of about 0.4 s each in a 2.1 s refresh. The first
    replacement, perhaps of a table just created (CREATE's first refresh), goes before the view's."""
    spark, table, found = run.spark, run.view.open_table, uuid.uuid4().hex
    name = run.temp_view(rows.select(*[quote(c) for c in run.columns]), "open")
    spec = {"view": table, "mode": "overwrite", "rows": name, "refresh_id": run.outcome.refresh_id,
            "expected": run.open_state.marker, "state": found}
    if run.open_state.marker is not None:
        run.beside(lambda: _commit(run, spec, lost_is_error=False))
        return found
    create_beside(spark, run.view, table, name)  # never committed to: perhaps not there yet
    _commit(run, spec, lost_is_error=True)
    return found


def _commit(run: Run, spec: dict, lost_is_error: bool) -> None:
    """The open-window table's commit (`spec`, no analysed write); one that lost to a concurrent
    refresh is MV_CONCURRENT_REFRESH when `lost_is_error`, else the view's own commit decides."""
    progress.checkpoint("open_windows_keeping")
    row = run.spark.sql(f"MV_COMMIT_REFRESH {sql_string(json.dumps(spec))}").first()
    if row.status != "committed":
        if lost_is_error:
            raise errors.concurrent_refresh(run.view.name)
        return
    progress.checkpoint("open_windows_kept")


def rebuilt(run: Run, bound: int, query: str | None = None) -> str:
    """The open windows (ending after `bound`) of `query` (the view's query over the source unless
    given: sessions leave late rows out) recomputed and kept; their id."""
    end = quote(run.info.window_end)
    return replace(run, run.spark.sql(f"SELECT * FROM ({query or run.query}) WHERE {end} > {time_sql(bound, run.time_type)}"))
