package io.mvengine

import org.apache.spark.sql.catalyst.expressions.{Expression, SubqueryExpression, WindowExpression}
import org.apache.spark.sql.catalyst.expressions.aggregate.AggregateExpression
import org.apache.spark.sql.types._
import org.apache.spark.unsafe.types.CalendarInterval

/**
 * The checked constant arguments of an Esper data window call, in the units the plans use:
 * counts as Long, durations in microseconds. Esper writes durations as time periods or as a
 * number of seconds, so both `INTERVAL '10' SECONDS` and `10` are 10 seconds here; a reference
 * point is a timestamp or, as in Esper, epoch milliseconds (`5000` is 1970-01-01 00:00:05 UTC).
 */
class EsperWindowArguments(call: EsperWindowCall) {
  import EsperWindowPlans.FlowControl

  private val kind = call.kind

  def checkTimeColumn(): Unit = {
    val time = call.timeColumn
    if (time.references.isEmpty || !time.references.subsetOf(call.child.outputSet)) {
      throw WindowErrors.esperTimeNotAColumn(kind, time.sql)
    }
    time.dataType match {
      case TimestampType | TimestampNTZType =>
      case other => throw WindowErrors.esperTimeNotTimestamp(kind, time.sql, other.sql)
    }
  }

  /** A constant whole number of rows, at least 1 (and at most `limit`). */
  def count(name: String, limit: Option[Int] = None): Long = {
    val e = call.param(name).get
    val value = (e.foldable, e.dataType) match {
      case (true, ByteType | ShortType | IntegerType | LongType) => Option(e.eval()).map(_.toString.toLong)
      case _ => None
    }
    val n = value.getOrElse(throw WindowErrors.countNotConstant(kind, name, e.sql))
    if (n < 1) throw WindowErrors.countNotPositive(kind, name, e.sql)
    limit.filter(n > _).foreach(max => throw WindowErrors.countTooLarge(kind, n, max))
    n
  }

  /** A positive constant duration in microseconds: a day-time interval or a number of seconds. */
  def interval(name: String): Long = {
    val e = call.param(name).get
    if (!e.foldable) throw WindowErrors.esperIntervalNotConstant(kind, name, e.sql)
    val micros: Long = (e.dataType, e.eval()) match {
      case (_, null) => throw WindowErrors.esperIntervalNotConstant(kind, name, e.sql)
      case (_: DayTimeIntervalType, value: java.lang.Long) => value.longValue
      case (CalendarIntervalType, value: CalendarInterval) =>
        if (value.months != 0) throw WindowErrors.esperIntervalNotDayTime(kind, name, e.sql)
        value.days * 86400000000L + value.microseconds
      case (_: YearMonthIntervalType, _) => throw WindowErrors.esperIntervalNotDayTime(kind, name, e.sql)
      case (_: NumericType, seconds) => BigDecimal(seconds.toString).*(1000000).toLong
      case (other, _) => throw WindowErrors.esperIntervalNotConstant(kind, name, s"${e.sql} (${other.sql})")
    }
    if (micros <= 0) throw WindowErrors.esperIntervalNotPositive(kind, name, e.sql)
    micros
  }

  /** REFERENCE in epoch microseconds: a constant timestamp, or integral epoch milliseconds. */
  def reference(): Option[Long] = call.param("REFERENCE").map { e =>
    val value = if (e.foldable) Option(e.eval()) else None
    (e.dataType, value) match {
      case (TimestampType | TimestampNTZType, Some(micros: java.lang.Long)) => micros.longValue
      case (ByteType | ShortType | IntegerType | LongType, Some(millis)) => millis.toString.toLong * 1000L
      case _ => throw WindowErrors.badReferencePoint(kind, e.sql)
    }
  }

  /** FLOW_CONTROL: 'FORCE_UPDATE', 'START_EAGER' or both; START_EAGER implies FORCE_UPDATE. */
  def flowControl(): FlowControl = call.param("FLOW_CONTROL") match {
    case None => FlowControl(forceUpdate = false, startEager = false)
    case Some(e) =>
      val text = if (e.foldable && e.dataType == StringType) Option(e.eval()).map(_.toString) else None
      val words = text.getOrElse(throw WindowErrors.unknownFlowControl(kind, e.sql))
        .split(",").map(_.trim.toUpperCase).filter(_.nonEmpty).toSet
      if (words.isEmpty || !words.subsetOf(Set("FORCE_UPDATE", "START_EAGER"))) {
        throw WindowErrors.unknownFlowControl(kind, e.sql)
      }
      FlowControl(forceUpdate = true, startEager = words("START_EAGER"))
  }

  /** A deterministic BOOLEAN condition on the row's own columns (no aggregates, windows, subqueries). */
  def condition(name: String): Expression = {
    val e = call.param(name).get
    val stateful = e.exists {
      case _: AggregateExpression | _: WindowExpression | _: SubqueryExpression => true
      case _ => false
    }
    if (e.dataType != BooleanType || !e.deterministic || stateful) throw WindowErrors.notARowCondition(kind, e.sql)
    e
  }

  /** A constant TRUE or FALSE; TRUE when not given. */
  def flag(name: String): Boolean = call.param(name) match {
    case None => true
    case Some(e) if e.foldable && e.dataType == BooleanType && e.eval() != null => e.eval().asInstanceOf[Boolean]
    case Some(e) => throw WindowErrors.notABooleanConstant(kind, name, e.sql)
  }
}
