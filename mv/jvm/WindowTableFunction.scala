package io.mvengine

import org.apache.spark.sql.catalyst.expressions.{Attribute, AttributeSet, Expression}
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, UnaryNode}

/**
 * A window table function call whose arguments are bound but not yet resolved.
 *
 * The analyzer resolves `timeColumn`, `partitionBy` and `params` against `child` like any
 * operator's expressions; [[ResolveWindowTableFunctions]] then validates them and turns the call
 * into a [[WindowTableFunction]].
 */
case class WindowTableFunctionCall(
    kind: WindowKind,
    timeColumn: Expression,
    partitionBy: Seq[Expression],
    paramNames: Seq[String],
    params: Seq[Expression],
    child: LogicalPlan) extends UnaryNode {

  override def output: Seq[Attribute] = Nil
  override lazy val resolved: Boolean = false

  def param(name: String): Option[Expression] =
    paramNames.zip(params).collectFirst { case (n, e) if n == name => e }

  override protected def withNewChildInternal(newChild: LogicalPlan): WindowTableFunctionCall =
    copy(child = newChild)
}

/**
 * A resolved window table function: every column of `child` plus window_start, window_end and
 * window_time, typed like the time column.
 *
 * It stays one node through analysis and optimization, so the optimizer can turn filters on the
 * window columns into ranges on the time column ([[PushWindowFiltersToTimeColumn]]) and the
 * maintainer can read a view's window from its analysed plan. The planner runs it as Spark's own
 * operators ([[WindowTableFunctionStrategy]]). `child` already drops rows whose time is NULL.
 *
 * `pushedTimeFilters` records the time-column ranges already pushed below it, so the optimizer
 * pushes each only once.
 */
case class WindowTableFunction(
    spec: WindowSpec,
    timeColumn: Expression,
    partitionBy: Seq[Expression],
    windowOutput: Seq[Attribute],
    pushedTimeFilters: Seq[Expression],
    child: LogicalPlan) extends UnaryNode {

  def windowStart: Attribute = windowOutput(0)
  def windowEnd: Attribute = windowOutput(1)
  def windowTime: Attribute = windowOutput(2)

  override def output: Seq[Attribute] = child.output ++ windowOutput
  override def producedAttributes: AttributeSet = AttributeSet(windowOutput)

  override protected def withNewChildInternal(newChild: LogicalPlan): WindowTableFunction =
    copy(child = newChild)
}

object WindowTableFunction {
  val columnNames: Seq[String] = Seq("window_start", "window_end", "window_time")
}
