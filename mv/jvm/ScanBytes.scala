package io.mvengine

import org.apache.spark.sql.Row
import org.apache.spark.sql.catalyst.FunctionIdentifier
import org.apache.spark.sql.catalyst.expressions.{AttributeReference, Expression, ExpressionInfo, Literal, PlanExpression}
import org.apache.spark.sql.catalyst.plans.logical.{LocalRelation, LogicalPlan}
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.execution.{FileSourceScanExec, SparkPlan}
import org.apache.spark.sql.types.{IntegerType, LongType, StringType}

/**
 * What queries would read, before they run: for each query, the bytes and the number of the files
 * its scans open once Delta (or SmallDeltaScans) has skipped files by their statistics, as planned.
 * {{{
 *   SELECT * FROM mv_scan_bytes('SELECT * FROM bids WHERE ts >= ...', 'SELECT * FROM hourly')
 *   -- query 0, bytes 31457280, files 3; query 1, bytes ..., files ...
 * }}}
 * The maintainer's REFRESH POLICY AUTO weighs an incremental refresh against a full one with it
 * (mv/estimate.py): it plans the queries each would run and compares what they read. Nothing is
 * executed; planning a Delta scan of a large table filters its files (Delta's own Spark job, as
 * the query itself would).
 */
object ScanBytes {

  val functionName = "mv_scan_bytes"

  def registration: (FunctionIdentifier, ExpressionInfo, Seq[Expression] => LogicalPlan) = (
    FunctionIdentifier(functionName),
    new ExpressionInfo(getClass.getName, null, functionName,
      s"$functionName(query, ...) - Bytes and files each query's scans would read, after file skipping.", ""),
    (args: Seq[Expression]) => measure(args.map {
      case l: Literal if l.dataType == StringType && l.value != null => l.toString
      case _ => throw new IllegalArgumentException(s"$functionName takes string literals: one query each")
    }))

  private def measure(queries: Seq[String]): LogicalPlan = {
    val session = SparkSession.active
    val rows = queries.zipWithIndex.map { case (text, index) =>
      val files = fileSizes(session.sessionState.executePlan(session.sessionState.sqlParser.parsePlan(text)).sparkPlan)
      Row(index, files.sum, files.size.toLong)
    }
    LocalRelation.fromExternalRows(Seq(AttributeReference("query", IntegerType)(),
      AttributeReference("bytes", LongType)(), AttributeReference("files", LongType)()), rows)
  }

  /** The sizes of the files the plan's scans open once files are skipped by their statistics. */
  def fileSizes(plan: SparkPlan): Seq[Long] =
    plan.collect { case scan: FileSourceScanExec => scan }.flatMap { scan =>
      // Filters that need a subquery's result (dynamic pruning) are not known before the query runs.
      def known(filters: Seq[Expression]) = filters.filterNot(_.exists(_.isInstanceOf[PlanExpression[_]]))
      scan.relation.location.listFiles(known(scan.partitionFilters), known(scan.dataFilters)).flatMap(_.files)
    }.map(_.getLen)
}
