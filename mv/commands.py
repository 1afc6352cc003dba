"""Running statements: the materialized-view ones here, anything else through spark.sql.

Example:
    >>> mv.sql(spark, '''CREATE MATERIALIZED VIEW hourly
    ...     AS SELECT window_start, window_end, count(*) AS bids
    ...     FROM TUMBLE(TABLE(bids), DESCRIPTOR(bidtime), INTERVAL '1' HOUR)
    ...     GROUP BY window_start, window_end''')
    >>> mv.sql(spark, "REFRESH MATERIALIZED VIEW hourly").show()
"""
from __future__ import annotations

from dataclasses import asdict

from pyspark.sql import DataFrame, SparkSession

from mv import catalog, delta_tables, errors, internal_columns, maintainer, plan, refresh, statements
from mv.catalog import View
from mv.history import ENGINE_WRITE
from mv.query import QueryInfo, describe, interval_micros, sql_string
from mv.settings import session_settings
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
    if d.partitioned_by and d.cluster_by:
        raise errors.unsupported_combination("PARTITIONED BY and CLUSTER BY were both given", "Use one of them.")
    if d.policy == "INCREMENTAL STRICT":
        blockers = info.reasons + plan.incremental_blockers(spark, info, bool(d.watermark_column))
        if blockers:
            raise errors.not_incremental(d.name, blockers)
    return info


def create(spark: SparkSession, statement: Create) -> tuple:
    d = statement.definition
    existing = catalog.load(spark, d.name)
    if existing is None and spark.catalog.tableExists(d.name):
        raise errors.table_exists(d.name)
    if existing is not None and statement.if_not_exists:
        return (f"{d.name} already exists",)
    if existing is not None and not statement.or_replace:
        raise errors.view_exists(d.name)
    info = _validate(spark, statement)
    if existing is not None:
        drop(spark, d.name, if_exists=True)
    for source in info.source_tables:
        if catalog.shown_properties(spark, source).get("delta.enableChangeDataFeed") != "true":
            spark.sql(f"ALTER TABLE {source} SET TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    layout = (f" PARTITIONED BY {d.partitioned_by}" if d.partitioned_by else "") + \
             (f" CLUSTER BY {d.cluster_by}" if d.cluster_by else "") + \
             (f" COMMENT {d.comment}" if d.comment else "")
    view = View(d.name, d, spark.conf.get("spark.sql.session.timeZone"))
    # The table is the view from its first commit; a catalog that creates it before writing its
    # (empty) rows makes that write one into a view's table, which only the engine may do.
    with session_settings(spark, {ENGINE_WRITE: "true"}):
        spark.sql(f"CREATE TABLE {d.name} USING delta{layout} "
                  f"TBLPROPERTIES ({_properties(d.tblproperties)}, {catalog.definition_property(view)}) "
                  f"AS SELECT * FROM ({d.query}) WHERE false")
    outcome = refresh.refresh(spark, d.name)
    return (f"created {d.name}: {outcome.rows_inserted} rows",)


# A view's change feed is what views reading it consume; deletion vectors make merges cheaper. A
# checkpoint every 100 commits, not Delta's 10: each rebuilds the table's state in Spark jobs, +1.3-1.6 s
# on one refresh in ten of a small view (0.15 s a refresh on average), where replaying up to 99 small
# commit files on a cold read costs far less (bench/RESULTS.md, "The fixed cost of a refresh").
VIEW_PROPERTIES = {"delta.enableChangeDataFeed": "true", "delta.enableDeletionVectors": "true",
                   "delta.checkpointInterval": "100"}


def _properties(tblproperties: str | None) -> str:
    """The view table's TBLPROPERTIES list: the statement's own (`(k = v, ...)`), and the engine's
    defaults for the keys it does not set."""
    given = tblproperties.strip()[1:-1] if tblproperties else ""
    named = given.lower().replace("`", "").replace("'", "").replace('"', "")
    defaults = [f"'{k}' = '{v}'" for k, v in VIEW_PROPERTIES.items() if k.lower() not in named]
    return ", ".join(defaults + ([given] if given else []))


def drop(spark: SparkSession, name: str, if_exists: bool = False) -> tuple:
    if catalog.load(spark, name) is None:
        if if_exists:
            return (f"{name} does not exist",)
        raise errors.unknown_view(name)
    spark.sql(f"DROP TABLE {name}")
    spark.sql(f"DROP TABLE IF EXISTS {catalog.late_table(name)}")
    spark.sql(f"DROP TABLE IF EXISTS {catalog.open_table(name)}")
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
    if statement.create is not None:
        _validate(spark, statement.create)
        d = statement.create.definition
        view, previous = View(d.name, d, spark.conf.get("spark.sql.session.timeZone")), "after the first refresh"
    else:
        view, previous = catalog.require(spark, statement.name), None
    info = describe(spark, view.definition.query)
    state = read(spark, view.name) if previous is None else _pretend_state(info)
    outside = delta_tables.lookup(spark, [view.name])[view.name].changed_outside if previous is None else None
    chosen = plan.plan(spark, view, info, state, changed_outside=outside)
    weighed = refresh.estimated(spark, view.name) if previous is None and chosen.technique == "incremental" else None
    if weighed is not None and weighed.switches and view.definition.policy == "AUTO":
        chosen = plan.Plan("full", "FULL_CHEAPER")
    unweighed = "none: nothing to weigh (no pending change, a full refresh, or not a window query)"
    return [("technique", chosen.technique), ("reason", chosen.reason), ("shape", info.shape),
            ("sources", ", ".join(info.source_tables)), ("row_key", ", ".join(info.group_by or [])),
            ("estimate", weighed.describe() if weighed else unweighed)]


def _pretend_state(info):
    from mv.state import RefreshState
    return RefreshState(1, {s: 0 for s in info.source_tables})


__all__ = ["sql", "run", "create", "drop", "describe_view", "explain", "sql_string"]
