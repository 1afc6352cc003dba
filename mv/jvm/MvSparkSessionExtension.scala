package io.mvengine

import org.apache.spark.SparkContext
import org.apache.spark.sql.SparkSessionExtensions
import org.apache.spark.sql.catalyst.FunctionIdentifier
import org.apache.spark.sql.catalyst.expressions.{Expression, ExpressionInfo}

/**
 * The engine's Spark SQL extension: window table functions (TUMBLE, HOP, CUMULATE, SESSION) in
 * Spark SQL, running as Spark's own operators, and the materialized-view statements.
 *
 * Load it with `spark.sql.extensions=io.mvengine.MvSparkSessionExtension` (mv.session() and
 * mv.configure() do), then:
 * {{{
 *   SELECT item, window_start, window_end, SUM(price)
 *   FROM TUMBLE(TABLE(bids), DESCRIPTOR(bidtime), INTERVAL '10' MINUTES)
 *   GROUP BY item, window_start, window_end
 * }}}
 */
class MvSparkSessionExtension extends (SparkSessionExtensions => Unit) {
  override def apply(extensions: SparkSessionExtensions): Unit = {
    // PySpark and Spark re-render messages from their error class, so Spark must know ours.
    WindowErrors.register()
    // A jar built for another Spark line says so now, not with a NoSuchMethodError mid-query.
    SparkCompat.requireLine(SparkCompat.builtLine)
    // In one JVM, local files are created and renamed without a process per file (chmod, readlink).
    // Spark applies extensions once its context runs, so this is that context.
    LocalFiles.install(SparkContext.getOrCreate())
    // Binds window calls before analysis, and accepts Flink's TABLE(TUMBLE(TABLE t, ...)); plans the
    // materialized-view statements (CREATE / REFRESH / DROP / SHOW / DESCRIBE / EXPLAIN ... MATERIALIZED VIEW).
    extensions.injectParser((_, parser) => new WindowSqlParser(parser))
    // DESCRIPTOR(col) must be a known function, or Spark rejects the call before any rule sees it.
    extensions.injectFunction(MvSparkSessionExtension.descriptor)
    // Listed by SHOW FUNCTIONS and DESCRIBE FUNCTION; calls are rewritten before Spark looks them up.
    WindowKind.all.foreach(kind => extensions.injectTableFunction(kind.registration))
    // mv_describe('query') tells the maintainer what a query means, from its analysed plan.
    extensions.injectTableFunction(QueryDescription.registration)
    // mv_delta_tables('t', ...) gives tables' versions and ids from Delta's cached snapshots, not DESCRIBE.
    extensions.injectTableFunction(DeltaTables.tablesRegistration)
    // mv_refresh_history: the views' refreshes, read from their own commits (one commit per refresh).
    extensions.injectTableFunction(DeltaTables.historyRegistration)
    // mv_substitute('query', 'source', 'replacement') runs a view's query over only some source rows.
    extensions.injectTableFunction(SourceSubstitution.registration)
    extensions.injectTableFunction(SourceSubstitution.changeRegistration)
    extensions.injectTableFunction(SourceSubstitution.signedRegistration)
    extensions.injectTableFunction(SourceSubstitution.keysRegistration)
    extensions.injectTableFunction(SourceSubstitution.flipsRegistration)
    extensions.injectTableFunction(SourceSubstitution.regroupsRegistration)
    // mv_window_times('query', i): the event times a window function sees (a full refresh's watermark).
    extensions.injectTableFunction(WindowTimes.registration)
    // mv_scan_bytes('query', ...): what queries would read after file skipping (REFRESH POLICY AUTO's estimate).
    extensions.injectTableFunction(ScanBytes.registration)
    // Window function calls are bound as they are parsed (see WindowSqlParser) or, for plans not
    // built from SQL, while analysed; they become one WindowTableFunction node once resolved.
    extensions.injectResolutionRule(_ => ResolveWindowTableFunctions.Bind)
    extensions.injectResolutionRule(_ => ResolveWindowTableFunctions.Validate)
    // eKuiper's windows without other keys compute their select list, then drop helper columns.
    extensions.injectResolutionRule(_ => DropColumns)
    // Esper's data windows (WIN_LENGTH, STD_UNIQUE, ...): bound like the TVFs, then rewritten into
    // Spark's window functions, filters and generators; its derived-value windows are aggregates.
    EsperWindowKind.all.foreach(kind => extensions.injectTableFunction(kind.registration))
    extensions.injectResolutionRule(_ => EsperDataWindows.Bind)
    extensions.injectResolutionRule(_ => EsperDataWindows.Rewrite)
    EsperAggregates.all.foreach(extensions.injectFunction)
    // time_length_batch replays each partition's rows in order, which no window function can do.
    extensions.injectPlannerStrategy(_ => EsperTimeLengthBatchStrategy)
    // SLIDINGWINDOW's RANGE frame, kept incrementally instead of re-aggregated per row.
    extensions.injectPlannerStrategy(_ => EkuiperSlidingWindowStrategy)
    // A filter on the window columns also bounds the time column, so Delta can skip files.
    extensions.injectOptimizerRule(_ => PushWindowFiltersToTimeColumn)
    // A semi-join on a top-N's partition keys goes below its rank: only the partitions kept are ranked.
    extensions.injectOptimizerRule(_ => SemiJoinsBelowRankFilters)
    // A small Delta table's files come from the list in its checksum, skipped by their statistics
    // in the driver, without the Spark jobs of Delta's scan planning (`mv.smallTableScans`).
    extensions.injectOptimizerRule(_ => SmallDeltaScans)
    // An aggregate over a small read of such a table reads it in one task: no shuffle for its groups.
    extensions.injectPreCBORule(_ => OneTaskAggregates)
    // Only a view's refresh writes its table: other writes fail with MV_VIEW_READ_ONLY.
    extensions.injectCheckRule(session => ReadOnlyViews(session))
    // The node runs as Spark's own Project / Expand / Filter / UpdatingSessions operators.
    extensions.injectPlannerStrategy(_ => WindowTableFunctionStrategy)
  }
}

object MvSparkSessionExtension {
  val descriptor: (FunctionIdentifier, ExpressionInfo, Seq[Expression] => Expression) = (
    FunctionIdentifier("descriptor"),
    new ExpressionInfo(classOf[MvSparkSessionExtension].getName, null, "descriptor",
      "DESCRIPTOR(column) - Names the time column of a window table function.", ""),
    (_: Seq[Expression]) => throw WindowErrors.descriptorMisplaced())
}
