package io.mvengine

import org.apache.spark.sql.catalyst.analysis.TypeCheckResult
import org.apache.spark.sql.catalyst.expressions.{Add, Attribute, Expression, Literal, Multiply, PreciseTimestampConversion, RuntimeReplaceable}
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, Project, UnaryNode}
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.types.{LongType, TimestampNTZType, TimestampType}

/**
 * An event time plus a fixed duration in microseconds, of the event time's own type: TIMESTAMP,
 * TIMESTAMP_NTZ or BIGINT epoch milliseconds (the duration then counts whole milliseconds).
 *
 * Example: `TimePlus(ts, -60000000L)` is `ts - INTERVAL '1' MINUTE`, or `ts - 60000` for BIGINT.
 */
case class TimePlus(time: Expression, micros: Long) extends Expression with RuntimeReplaceable {
  override def children: Seq[Expression] = Seq(time)

  override def checkInputDataTypes(): TypeCheckResult = time.dataType match {
    case TimestampType | TimestampNTZType | LongType => TypeCheckResult.TypeCheckSuccess
    case other => throw WindowErrors.ekuiperTimeNotTimestamp(time.sql, other.sql)
  }

  override lazy val replacement: Expression = time.dataType match {
    case LongType => Add(time, Literal(Math.floorDiv(micros, 1000L)))
    case other => PreciseTimestampConversion(
      Add(PreciseTimestampConversion(time, other, LongType), Literal(micros)), LongType, other)
  }

  override protected def withNewChildrenInternal(newChildren: IndexedSeq[Expression]): TimePlus =
    copy(time = newChildren.head)
}

/** An event time as microseconds since the epoch (BIGINT epoch milliseconds times 1000). */
case class TimeMicros(time: Expression) extends Expression with RuntimeReplaceable {
  override def children: Seq[Expression] = Seq(time)
  override def checkInputDataTypes(): TypeCheckResult = TimePlus(time, 0L).checkInputDataTypes()

  override lazy val replacement: Expression = time.dataType match {
    case LongType => Multiply(time, Literal(1000L))
    case other => PreciseTimestampConversion(time, other, LongType)
  }

  override protected def withNewChildrenInternal(newChildren: IndexedSeq[Expression]): TimeMicros =
    copy(time = newChildren.head)
}

/**
 * Every column of `child` but the helper columns named `names`, once `child` is resolved: the
 * rewrites in [[EkuiperWindows]] filter on helper columns after computing the select list, whose
 * own column names Spark only chooses while resolving it.
 */
case class DropColumns(names: Seq[String], child: LogicalPlan) extends UnaryNode {
  override def output: Seq[Attribute] = Nil
  override lazy val resolved: Boolean = false
  override protected def withNewChildInternal(newChild: LogicalPlan): DropColumns = copy(child = newChild)
}

object DropColumns extends Rule[LogicalPlan] {
  override def apply(plan: LogicalPlan): LogicalPlan = plan.resolveOperatorsUp {
    case DropColumns(names, child) if child.resolved => Project(child.output.filterNot(a => names.contains(a.name)), child)
  }
}
