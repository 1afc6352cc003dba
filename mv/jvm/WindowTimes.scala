package io.mvengine

import org.apache.spark.sql.catalyst.FunctionIdentifier
import org.apache.spark.sql.catalyst.expressions.{Alias, Expression, ExpressionInfo, Literal}
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, Project}
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.types.{IntegerType, StringType}

/**
 * The event times a query's window function sees: one row per row of its input, the time column
 * as that function computes it, in microseconds since the epoch (`event_time`).
 * {{{
 *   SELECT max(event_time) FROM mv_window_times('<view query>', 0)
 * }}}
 * The maintainer's full refresh moves a view's watermark with these when the time column is not a
 * source column passed through (`ts - INTERVAL 30 MINUTES AS ts`, a column of a join's rows): the
 * source's column of that name, or none, would close windows early or never. Windows are numbered
 * in the order mv_describe lists them.
 */
object WindowTimes {

  val functionName = "mv_window_times"

  def registration: (FunctionIdentifier, ExpressionInfo, Seq[Expression] => LogicalPlan) = (
    FunctionIdentifier(functionName),
    new ExpressionInfo(getClass.getName, null, functionName,
      "mv_window_times(query, index) - The event times, in microseconds, that the query's window function " +
        "number index (from 0) sees.", ""),
    (args: Seq[Expression]) => args match {
      case Seq(text: Literal, index: Literal) if text.dataType == StringType && text.value != null &&
          index.dataType == IntegerType && index.value != null =>
        times(text.toString, index.value.asInstanceOf[Int])
      case _ => throw new IllegalArgumentException(s"$functionName takes a query and a window's number")
    })

  private def times(queryText: String, index: Int): LogicalPlan = {
    val session = SparkSession.active
    val analysed = session.sessionState.executePlan(session.sessionState.sqlParser.parsePlan(queryText)).analyzed
    val windows = analysed.collect { case w: WindowTableFunction => w }
    val w = windows.lift(index).getOrElse(throw new IllegalArgumentException(
      s"$functionName: the query has ${windows.size} window functions, not one numbered $index"))
    Project(Seq(Alias(TimeMicros(w.timeColumn), "event_time")()), w.child)
  }
}
