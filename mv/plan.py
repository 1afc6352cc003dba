"""Whether a view refreshes incrementally or in full, and why (the reason codes EXPLAIN and the
history show).

Example:
    >>> plan.plan(view, info, previous_state)
    Plan(technique='incremental', reason='CHANGES_ONLY')
"""
from __future__ import annotations

from dataclasses import dataclass

from mv import errors
from mv.catalog import View
from mv.query import QueryInfo, Window
from mv.state import RefreshState
from mv.statements import Definition


@dataclass(frozen=True)
class Plan:
    technique: str
    reason: str


# Window kinds whose windows of a row follow from that row alone (SESSION: from its neighbours
# within the gap, which the refresh reads).
INCREMENTAL_KINDS = ("TUMBLE", "HOP", "CUMULATE", "SESSION")


def plan(view: View, info: QueryInfo, previous: RefreshState | None, full: bool = False,
         changed_outside: int | None = None) -> Plan:
    """Incremental or full, and why (reason codes, as EXPLAIN and the history show them).
    `changed_outside`: the view's version, if any, that changed its rows and no refresh wrote.
    A SQL view the query reads defined otherwise than at the last refresh (its fingerprint, kept
    in the state; a state from before fingerprints were kept cannot tell) makes it full too."""
    policy = view.definition.policy
    if full:
        return Plan("full", "REQUESTED_FULL")
    if policy == "FULL":
        return Plan("full", "POLICY_FULL")
    if previous is None:
        return Plan("full", "FIRST_REFRESH")
    if changed_outside is not None:
        if policy.startswith("INCREMENTAL"):
            raise errors.view_changed_outside(view.name, changed_outside)
        return Plan("full", "VIEW_CHANGED_OUTSIDE")
    if previous.views_fingerprint is not None and info.views_fingerprint != previous.views_fingerprint:
        if policy.startswith("INCREMENTAL"):
            raise errors.query_definition_changed(view.name)
        return Plan("full", "QUERY_DEFINITION_CHANGED")
    found = blockers(view.definition, info)
    if found:
        if policy == "INCREMENTAL STRICT":
            raise errors.not_incremental(view.name, found, info.located)
        return Plan("full", ",".join(dict.fromkeys(found)))
    return Plan("incremental", "CHANGES_ONLY")


def kept_incrementally(view: View, info: QueryInfo, chosen: Plan) -> bool:
    """Whether `view`'s query is one the engine keeps incrementally, whatever this refresh's
    technique (`chosen`): no blocker and a policy other than FULL. A refresh of such a view that
    finds no source moved commits nothing (NO_CHANGES).

    Example:
        >>> kept_incrementally(view, info, Plan("full", "FIRST_REFRESH"))
        True
    """
    if chosen.technique == "incremental":
        return True
    return view.definition.policy != "FULL" and not blockers(view.definition, info)


def blockers(definition: Definition, info: QueryInfo) -> list[str]:
    """Why a view of `definition` is not kept incrementally (its query described as `info`): the
    description's reasons, then the engine's. A refresh's plan, EXPLAIN, and CREATE ... INCREMENTAL
    STRICT before the view exists."""
    return list(info.reasons) + incremental_blockers(info, bool(definition.watermark_column))


def by_windows(info: QueryInfo) -> bool:
    """Whether an incremental refresh of `info`'s query works window by window (mv/window_refresh.py,
    weighed by mv/estimate.py): windows other than sessions, grouped by their window or not."""
    return (bool(info.windows) and info.shape == "window" and info.windows[0].kind != "SESSION"
            and not info.keys_by_change)


def weighed(info: QueryInfo) -> bool:
    """Whether AUTO weighs an incremental refresh of `info`'s query against a full one (mv/estimate.py):
    windows by windows (window_refresh.weigh), rows, partitions and groups found by the change (row_refresh)."""
    return by_windows(info) or info.shape in ("rows", "partitions") or info.keys_by_change


def _session_blockers(info: QueryInfo, columns: dict[str, set[str]], view_watermark: bool) -> list[str]:
    """Sessions are kept from the view's own rows, so the view must hold every session and its keys,
    each under its source name (the extension marks the output columns that carry a key). Two
    joined sessions, the extension checks, are joined on their keys; they are recomputed from their
    sources by source table, so one source read twice must be windowed on the same time column."""
    windows = info.windows
    if len(windows) > 2 or len({(w.sources[0], w.time_column.lower()) for w in windows}) != len(
            {w.sources[0] for w in windows}):
        return ["SESSION_JOIN"]
    keys = [k.lower() for k in windows[0].partition_by]
    outputs = {name.lower() for name in info.session_keys}
    blockers = []
    if not all(k in columns[w.sources[0]] and k in outputs for k in keys for w in windows):
        blockers.append("SESSION_KEYS_NOT_SOURCE_AND_OUTPUT_COLUMNS")
    if view_watermark and (len(windows) > 1 or info.group_by is None):  # late rows: grouped, one source
        blockers.append("SESSION_WITH_WATERMARK")
    return blockers


def incremental_blockers(info: QueryInfo, view_watermark: bool = False) -> list[str]:
    """Reason codes for what this engine cannot yet keep incrementally in `info`'s query."""
    blockers = []
    if any(s.get("provider") != "delta" for s in info.sources):
        blockers.append("SOURCE_NOT_DELTA")
    if info.group_by is None and info.shape == "aggregate":  # the others: window by window, or by delta rules
        blockers.append("NO_ROW_KEY")
    if info.shape == "rows" and info.windows and view_watermark:  # late rows are kept by the windows of the output
        blockers.append("WINDOW_COLUMNS_NOT_IN_OUTPUT")
    if blockers or info.shape in ("other", "rows", "partitions"):  # the planner's reasons are the query's
        return blockers
    if info.shape == "window":
        return _window_blockers(info, view_watermark)
    if info.keys_from_source or info.keys_by_change:
        return []
    missing = [step["reason"] for step in info.maintenance if step["reason"]]  # the planner's, e.g. SELF_JOIN
    if missing:
        return list(dict.fromkeys(missing))
    return ["NOT_ONE_SOURCE"] if len(set(info.source_tables)) != 1 else ["GROUP_KEYS_NOT_SOURCE_COLUMNS"]


def late_rows_from_changes(info: QueryInfo) -> bool:
    """Whether a view's late changes are found from each source's change alone
    (window_refresh.write_late_changes): both window bounds in its output, so final windows are
    kept, and each window function a TUMBLE, HOP or CUMULATE over one source whose own column is
    its time column, so a changed row's windows are those of its own time. Then a WATERMARK on
    windows over joins or unions is kept by their groups (row_refresh._watermarked_groups), and a
    full refresh writes its late rows first (refresh._late_changes_first)."""
    return bool(info.window_start and info.window_end) and all(
        w.kind in ("TUMBLE", "HOP", "CUMULATE") and own_time_column(info, w) for w in info.windows)


def alike_windows(windows: list[Window]) -> bool:
    """Whether the window functions are one kind of window: same kind, size, step, offset and zone."""
    return len({(w.kind, w.size, w.step, w.offset, w.time_zone) for w in windows}) <= 1


def own_time_column(info: QueryInfo, w: Window) -> bool:
    """Whether window function `w` reads one source and its time column is that source's own, under
    its own name (QueryDescription.ownTime), so a changed source row falls in the windows of its time."""
    return len(w.sources) == 1 and w.own_time and w.time_column.lower() in info.columns_of(w.sources[0])


def _window_blockers(info: QueryInfo, view_watermark: bool) -> list[str]:
    """Every window function must read one Delta source whose own column is its time column; joined
    windows must be the same windows; sessions need their keys in the view. Windows over joins or
    unions, grouped, are kept by their groups (`keys_by_change`), under a WATERMARK when each window
    reads one source's own time column (`late_rows_from_changes`)."""
    windows = info.windows
    if info.keys_by_change:  # windows over joins or unions, their groups found by the change
        return ["WATERMARK_ON_JOINED_WINDOWS"] if view_watermark and not late_rows_from_changes(info) else []
    if any(w.kind not in INCREMENTAL_KINDS for w in windows):
        return ["WINDOW_DEPENDS_ON_OTHER_ROWS"]  # eKuiper's SESSIONWINDOW: cut at ticks over the whole input
    if any(len(w.sources) != 1 for w in windows):
        return ["WINDOW_OVER_SEVERAL_SOURCES"]
    if not alike_windows(windows):
        return ["JOINED_WINDOWS_DIFFER"]
    if set(info.source_tables) != {w.sources[0] for w in windows}:
        return ["SOURCE_READ_OUTSIDE_A_WINDOW"]
    if not all(own_time_column(info, w) for w in windows):
        return ["TIME_COLUMN_NOT_A_SOURCE_COLUMN"]
    if windows[0].kind == "SESSION":
        return _session_blockers(info, {w.sources[0]: info.columns_of(w.sources[0]) for w in windows}, view_watermark)
    return []
