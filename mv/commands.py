"""Running statements: the materialized-view ones here, anything else through spark.sql.

Example:
    >>> mv.sql(spark, '''CREATE MATERIALIZED VIEW hourly
    ...     AS SELECT window_start, window_end, count(*) AS bids
    ...     FROM TUMBLE(TABLE(bids), DESCRIPTOR(bidtime), INTERVAL '1' HOUR)
    ...     GROUP BY window_start, window_end''')
    >>> mv.sql(spark, "REFRESH MATERIALIZED VIEW hourly").show()
"""
from __future__ import annotations

import time
import uuid
from contextlib import contextmanager
from dataclasses import asdict
from typing import Iterator

from pyspark.sql import DataFrame, SparkSession

from mv import (catalog, delta_tables, errors, estimate, history, internal_columns, maintainer, plan, refresh,
                schedule, statements, strategies)
from mv.catalog import View
from mv.combine import combinable_by_terms
from mv.names import TableName
from mv.query import QueryInfo, at_fragment, describe, interval_micros, sql_string
from mv.state import read
from mv.statements import Create, Describe, Drop, Explain, Refresh, Show, SparkSql


def sql(spark: SparkSession, text: str) -> DataFrame:
    """Run one statement and return its result as a DataFrame: `spark.sql(text)`, the engine's
    errors raised as MvError. The materialized-view statements are Spark SQL (the extension hands
    them to the maintainer, mv/maintainer.py), so spark.sql, %sql cells and Connect clients get
    the same results."""
    if isinstance(statements.parse(text), SparkSql):  # parsed here too: a syntax error is an MvError
        return spark.sql(text)
    maintainer.attach(spark)
    try:
        return spark.sql(text)
    except Exception as e:
        converted = errors.from_spark(e)
        if converted is None:
            raise
        raise converted from None


def run(spark: SparkSession, text: str) -> list[tuple]:
    """The rows of one materialized-view statement, in the columns the extension declares for it
    (MaterializedViewStatements.scala): what the maintainer answers the extension."""
    statement = statements.parse(text)
    match statement:
        case Create():
            return [create(spark, statement)]
        case Refresh(name=name, full=full):
            return [_outcome_row(refresh.refresh(spark, name, full=full))]
        case Drop(name=name, if_exists=if_exists):
            return [drop(spark, name, if_exists)]
        case Show():
            return [(name,) for name in catalog.list_views(spark)]
        case Describe(name=name, extended=extended):
            return describe_view(spark, name, extended)
        case Explain():
            return explain(spark, statement)
    raise errors.internal(f"not a materialized-view statement: {text[:80]}")


def _outcome_row(o: refresh.Outcome) -> tuple:
    return (o.view, o.technique, o.reason, o.refresh_id, o.rows_read, o.rows_inserted, o.rows_updated,
            o.rows_deleted, o.late_rows, o.groups_combined, o.groups_recomputed, o.duration_s)


def _validate(spark: SparkSession, statement: Create) -> QueryInfo:
    """Everything that can be wrong with CREATE, checked before anything is changed; the query's
    description."""
    d = statement.definition
    info = describe(spark, d.query)
    internal_columns.check(d.name, info)
    for source in info.sources:
        if source.get("provider") != "delta" and d.policy != "FULL":
            raise errors.source_not_delta(d.name, source.get("table") or "a file source", source.get("provider"))
    if d.emit == "WINDOW CLOSE" and not d.watermark_column:
        raise errors.unsupported_combination("EMIT ON WINDOW CLOSE was given without a WATERMARK",
                                             "Add WATERMARK FOR col AS col - INTERVAL ..., which says when windows close.")
    if d.grace and not d.watermark_column:
        raise errors.unsupported_combination("GRACE was given without a WATERMARK",
                                             "Add WATERMARK FOR col AS col - INTERVAL ...; grace counts from it.")
    if d.emit == "WINDOW CLOSE" and info.shape != "window":
        raise errors.unsupported_combination("EMIT ON WINDOW CLOSE needs windows in the query's output",
                                             "Group by window_start and window_end of a window function.")
    if d.watermark_column:
        time_columns = [w.time_column for w in info.windows]
        if d.watermark_column.lower() not in [c.lower() for c in time_columns]:
            raise errors.watermark_column(d.name, d.watermark_column, time_columns)
    for interval in (d.watermark_delay, d.grace):
        interval_micros(spark, interval)
    if d.watermark_idle and interval_micros(spark, d.watermark_idle) <= 0:
        raise errors.interval(d.watermark_idle, "IDLE AFTER must be longer than zero")
    if info.temporary_views:  # the refresh runs in a session of its own, which has none of them
        raise errors.source_temporary(d.name, list(info.temporary_views))
    if d.schedule:  # a schedule that cannot be read would fail every scheduler pass, not CREATE
        when = schedule.parse(d.schedule)
        interval_micros(spark, when.at_most_every)
    if d.partitioned_by and d.cluster_by:
        raise errors.unsupported_combination("PARTITIONED BY and CLUSTER BY were both given", "Use one of them.")
    if d.policy == "INCREMENTAL STRICT":
        blockers = plan.blockers(d, info)
        if blockers:
            raise errors.not_incremental(d.name, blockers, info.located)
    return info


def create(spark: SparkSession, statement: Create) -> tuple:
    d = statement.definition
    existing = _found(spark, d.name)
    if existing is _TAKEN:
        raise errors.table_exists(d.name)
    if existing is not None and statement.if_not_exists:
        return (f"{d.name} already exists",)
    if existing is not None and not statement.or_replace:
        raise errors.view_exists(d.name)
    info = _validate(spark, statement)
    with _old_kept_until_replaced(spark, d.name, existing is not None):
        return _made(spark, statement, info)


def _made(spark: SparkSession, statement: Create, info: QueryInfo) -> tuple:
    """The view of `statement` made: its sources' change feeds on, its table, its first refresh."""
    d = statement.definition
    for source in info.source_tables:
        _enable_change_feed(spark, d.name, source)
    layout = (f" PARTITIONED BY {d.partitioned_by}" if d.partitioned_by else "") + \
             (f" CLUSTER BY {d.cluster_by}" if d.cluster_by else "") + \
             (f" COMMENT {d.comment}" if d.comment else "")
    view = View(d.name, d, spark.conf.get("spark.sql.session.timeZone"), spark.catalog.currentDatabase())
    # The table is the view from its first commit; a catalog that creates it before writing its
    # (empty) rows makes that write one into a view's table, which only the engine may do.
    try:
        catalog.create_empty(spark, d.name, d.query, f"USING delta{layout} "
                             f"TBLPROPERTIES ({_properties(d.tblproperties)}, {catalog.definition_property(view)})")
    except Exception as e:  # noqa: BLE001 - Spark's and Delta's errors reach Python as several types
        location_taken = _LOCATION_TAKEN in str(e)  # another CREATE's first commit, or files left behind
        if not (errors.lost_race(e) or location_taken):
            raise
        lost = _lost_create(spark, d.name)  # another thread or session created the name since the check above
        if lost is None and location_taken:
            raise
        lost = lost or errors.concurrent_refresh(d.name)
        if statement.if_not_exists and lost.error_class == "MV_VIEW_ALREADY_EXISTS":
            return (f"{d.name} already exists",)
        raise lost from None
    with _undone_on_failure(spark, d.name):
        outcome = refresh.refresh(spark, d.name)
    return (f"created {d.name}: {outcome.rows_inserted} rows",)


def _lost_create(spark: SparkSession, name: str) -> errors.MvError | None:
    """The error of a CREATE whose table another CREATE made first: that one's view exists, or a
    table that is none; None when nothing is there (that CREATE failed too, or files were left
    in the table's location without a table)."""
    found = _found(spark, name, wait=True)
    return errors.table_exists(name) if found is _TAKEN else errors.view_exists(name) if found else None


_TAKEN = object()  # `_found`'s answer for a name that is a table but no materialized view
_LOCATION_TAKEN = "DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION"
SETTLING_S = 5.0  # how long a CREATE waits for another's table to become a view (its first commit)


def _found(spark: SparkSession, name: str, wait: bool = False) -> View | object | None:
    """The view called `name`, None if the name is free, `_TAKEN` for a table that is no view (or
    a temporary view).
    A Delta table without its first commit yet, and with `wait` no table at all, may be another
    CREATE's, in another thread or session, between its catalog entry and its first commit (which
    makes it a view) or its first commit and its catalog entry: it is looked at again for up to
    SETTLING_S seconds.

    Example:
        >>> _found(spark, "hourly") is _TAKEN     # a plain table called hourly
        True
    """
    name, deadline = TableName.parse(name), time.monotonic() + SETTLING_S
    while True:
        table = delta_tables.lookup(spark, [name])[name]
        view = catalog.of_table(name, table)
        # Spark sees a name the lookup did not: a temporary view, or a table created since the lookup
        appeared = not view and not table.exists and spark.catalog.tableExists(str(name))
        if appeared and not delta_tables.lookup(spark, [name])[name].exists:
            return _TAKEN  # a temporary view
        settling = appeared or (table.exists and table.version < 0 and table.schema is not None) or \
            (wait and not table.exists)
        if view or not settling or time.monotonic() > deadline:
            return view or (_TAKEN if table.exists or appeared else None)
        time.sleep(0.1)


def _enable_change_feed(spark: SparkSession, view: str, source: str) -> None:
    """Turn on the change feed of `source`, unless on; a CREATE in another thread turning it on at
    the same moment makes Delta fail this ALTER, which is then as good as done."""
    def enabled() -> bool:
        return catalog.shown_properties(spark, source).get("delta.enableChangeDataFeed") == "true"
    if enabled():
        return
    try:
        spark.sql(f"ALTER TABLE {source} SET TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    except Exception as e:  # noqa: BLE001 - Delta's conflicts reach Python as several exception types
        if not errors.lost_race(e):
            raise
        if not enabled():
            raise errors.concurrent_refresh(view) from None


@contextmanager
def _old_kept_until_replaced(spark: SparkSession, name: str, replacing: bool) -> Iterator[None]:
    """CREATE OR REPLACE keeps the old view until the new one is whole: its tables (the view's,
    `__late`, `__open`) are renamed aside while the new view is made, renamed back if that fails,
    and dropped once it succeeded. Renaming keeps a Delta table's files, properties and history.

    Example:
        >>> with _old_kept_until_replaced(spark, "hourly", replacing=True):
        ...     _made(spark, statement, info)    # raises: hourly is the old view again
    """
    if not replacing:
        yield
        return
    name, tag = TableName.parse(name), f"__replaced_{uuid.uuid4().hex[:8]}"
    side = [name.late, name.open]
    found = delta_tables.lookup(spark, side)
    aside = {t: name.beside(tag + t.table[len(name.table):]) for t in [name] + [t for t in side if found[t].exists]}
    for table, renamed in aside.items():
        spark.sql(f"ALTER TABLE {table} RENAME TO {renamed}")
    try:
        yield
    except BaseException:
        for table, renamed in aside.items():
            try:
                spark.sql(f"ALTER TABLE {renamed} RENAME TO {table}")
            except Exception:  # noqa: BLE001 - the failure that stopped CREATE is the one to report
                pass
        raise
    for renamed in aside.values():
        spark.sql(f"DROP TABLE IF EXISTS {renamed}")


@contextmanager
def _undone_on_failure(spark: SparkSession, name: str) -> Iterator[None]:
    """CREATE is all or nothing: when its first refresh fails (or stops at a kill point, which is a
    BaseException), the view's table, just created, goes, with the side tables (`__late`, `__open`)
    that did not exist before; then the failure is raised as it was. The definition is a property
    of the view's table, so it goes with it. (A process killed here leaves the view; DROP removes it.)

    Example:
        >>> with _undone_on_failure(spark, "hourly"):
        ...     refresh.refresh(spark, "hourly")     # raises: hourly, hourly__late are gone
    """
    name = TableName.parse(name)
    side = [name.late, name.open]
    before = delta_tables.lookup(spark, side)
    try:
        yield
    except BaseException:
        for table in [name] + [t for t in side if not before[t].exists]:
            try:
                spark.sql(f"DROP TABLE IF EXISTS {table}")
            except Exception:  # noqa: BLE001 - the failure that stopped CREATE is the one to report
                pass
        raise


# A view's change feed is what views reading it consume; deletion vectors make merges cheaper. A
# checkpoint every 100 commits, not Delta's 10 (history.CHECKPOINTS_EVERY): +1.3-1.6 s on one refresh
# in ten of a small view, 0.15 s a refresh on average.
VIEW_PROPERTIES = {"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": "true",
                   history.CHECKPOINT_INTERVAL: history.CHECKPOINTS_EVERY}


def _properties(tblproperties: str | None) -> str:
    """The view table's TBLPROPERTIES list: the statement's own (`(k = v, ...)`), and the engine's
    defaults for the keys it does not set."""
    given = tblproperties.strip()[1:-1] if tblproperties else ""
    named = given.lower().replace("`", "").replace("'", "").replace('"', "")
    defaults = [f"'{k}' = '{v}'" for k, v in VIEW_PROPERTIES.items() if k.lower() not in named]
    return ", ".join(defaults + ([given] if given else []))


def drop(spark: SparkSession, name: str, if_exists: bool = False) -> tuple:
    name = TableName.parse(name)
    if not catalog.is_view(spark, name):  # a view whose definition cannot be read is dropped too
        if if_exists:
            return (f"{name} does not exist",)
        raise errors.unknown_view(name)
    spark.sql(f"DROP TABLE {name}")
    spark.sql(f"DROP TABLE IF EXISTS {name.late}")
    spark.sql(f"DROP TABLE IF EXISTS {name.open}")
    return (f"dropped {name}",)


def describe_view(spark: SparkSession, name: str, extended: bool) -> list[tuple]:
    view = catalog.require(spark, name)
    rows = [(k, str(v)) for k, v in asdict(view.definition).items() if v is not None]
    rows.append(("time_zone", view.time_zone))
    if extended:
        state = read(spark, name)
        if state is not None:
            rows += [("last_refresh_id", str(state.refresh_id)), ("source_versions", str(state.sources)),
                     ("watermark_micros", str(state.watermark))]
            rows += [(f"last_refresh.{k}", str(v)) for k, v in state.metrics.items()]
    return rows


def explain(spark: SparkSession, statement: Explain) -> list[tuple]:
    """How the view is (or would be) refreshed, and why."""
    deploy = []
    if statement.create is not None:
        _validate(spark, statement.create)
        d = statement.create.definition
        view = View(d.name, d, spark.conf.get("spark.sql.session.timeZone"), spark.catalog.currentDatabase())
        previous = "after the first refresh"
        deploy = [("deploy", _deploy_action(spark, d))]
    else:
        view, previous = catalog.require(spark, statement.name), None
    info = refresh.described(spark, view)
    state = read(spark, view.name) if previous is None else _pretend_state(info)
    outside = delta_tables.lookup(spark, [view.name])[view.name].changed_outside if previous is None else None
    chosen = plan.plan(view, info, state, changed_outside=outside)
    weighed = refresh.estimated(spark, view.name) if previous is None and chosen.technique == "incremental" else None
    if weighed is not None and weighed.switches and view.definition.policy == "AUTO":
        chosen = plan.Plan("full", "FULL_CHEAPER")
    unweighed = "none: nothing to weigh (no pending change, a full refresh, or not a window query)"
    strategy = strategies.described(info, plan.kept_incrementally(view, info, chosen))
    return [("technique", chosen.technique), ("reason", chosen.reason), ("shape", info.shape),
            ("strategy", strategy),
            ("sources", ", ".join(info.source_tables)), ("row_key", ", ".join(info.group_by or info.partition_by or [])),
            ("estimate", weighed.describe() if weighed else unweighed)] + _last_refresh(spark, view, previous) \
        + _terms(info) + _operators(info, plan.blockers(view.definition, info)) + deploy


def _last_refresh(spark: SparkSession, view: View, create: str | None) -> list[tuple]:
    """EXPLAIN's `last_refresh` row: how the view's newest refresh ran and how far AUTO's estimate
    of it was off (estimate.hindsight); none before the view exists (`create`)."""
    if create is not None:
        return []
    last = history.of_view(spark, view.name, newest=1).first()
    if last is None:
        return []
    return [("last_refresh", f"{last.refresh_id}: " + estimate.hindsight(
        last.technique, last.reason, last.duration_s, last.estimated_incremental_s, last.estimated_full_s))]


def _terms(info) -> list[tuple]:
    """EXPLAIN's `terms` row for a window-local query of rows (QueryInfo.window_local), and for a
    GROUP BY without windows by change that combines its groups from the change of the sources it
    reads row by row (combine.combinable_by_terms), naming which sources' changes combine and which
    recompute."""
    if info.shape == "rows" and info.window_local:
        return [("terms", "window by window: the query over the change's time range, at the new versions "
                          "minus at the old (each row is one window's)")]
    if not info.keys_by_change or info.keys_from_source or info.windows or not combinable_by_terms(info, set()):
        return []
    combined = [t for t in dict.fromkeys(r.table for r in info.reads) if combinable_by_terms(info, {t})]
    recomputed = [t for t in info.source_tables if t not in combined]
    line = (f"groups combined with a change of {', '.join(combined)}: its rows' aggregates added to their "
            f"groups' rows (a retracted minimum or maximum recomputes its group)") if combined else ""
    if recomputed:
        line += ("; " if line else "") + f"a change of {', '.join(recomputed)} recomputes the groups it reaches"
    return [("terms", line)]


def _operators(info, blockers: list[str]) -> list[tuple]:
    """EXPLAIN's `operator` rows: each operator, indented by its depth, with its rule (how a change
    reaches the view through it) or the reason code that makes the view refresh in full
    (mv/jvm/DeltaRules.scala; a windowed query's, mv/jvm/QueryDescription.scala's windowSteps);
    then a `query` row for each of the view's `blockers` no operator gives (plan.py's, such as
    SOURCE_NOT_DELTA or SESSION_KEYS_NOT_SOURCE_AND_OUTPUT_COLUMNS)."""
    given = {s["reason"] for s in info.explained}
    return [("operator", f"{'  ' * s['depth']}{s['operator']}: {s['rule'] or s['reason'] + at_fragment(s)}")
            for s in info.explained] + [("operator", f"query: {code}") for code in dict.fromkeys(blockers)
                                        if code not in given]


def _deploy_action(spark: SparkSession, declared: statements.Definition) -> str:
    """EXPLAIN CREATE's `deploy` row: what CREATE OR REPLACE would do to the view stored under the
    name, as `mv deploy` decides it: "create", "unchanged", or "replace: " and the differing fields."""
    action, found = catalog.compare(spark, declared)
    return f"replace: {', '.join(field for field, _, _ in found)}" if action == "replace" else action


def _pretend_state(info):
    from mv.state import RefreshState
    return RefreshState(1, {s: 0 for s in info.source_tables})


__all__ = ["sql", "run", "create", "drop", "describe_view", "explain", "sql_string"]
