package io.mvengine

import org.apache.spark.sql.catalyst.expressions.{And, Attribute, BinaryComparison, EqualTo, Expression, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual, Literal, Or, PredicateHelper}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, LogicalPlan}
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.types.LongType

/**
 * A filter on window_start, window_end or window_time above TUMBLE, HOP or CUMULATE also bounds
 * the time column, because every window holding a row has start <= t < end and end - start <= size:
 * {{{
 *   window_start >= X  =>  t >= X              window_end <= X  =>  t < X
 *   window_start <= X  =>  t < X + size        window_end >= X  =>  t >= X - size
 * }}}
 * Conjunctions and disjunctions of such comparisons imply the same combination of ranges, so a
 * refresh recomputing windows in several separate periods reads only those periods.
 * The implied range goes below the window node, where Spark pushes it to the scan and Delta skips
 * files by their min/max statistics; the original filter stays where it was, so results are
 * unchanged. Rows are windowed independently in these kinds, so dropping rows outside the range
 * cannot change the windows that remain. SESSION is left alone: its windows depend on neighbours.
 */
object PushWindowFiltersToTimeColumn extends Rule[LogicalPlan] with PredicateHelper {

  override def apply(plan: LogicalPlan): LogicalPlan = plan.transform {
    case filter @ Filter(condition, window: WindowTableFunction) if !window.spec.kind.isSession =>
      val implied = splitConjunctivePredicates(condition).flatMap(impliedRange(_, window))
        .filterNot(p => window.pushedTimeFilters.exists(_.semanticEquals(p)))
      if (implied.isEmpty) filter
      else filter.copy(child = window.copy(
        pushedTimeFilters = window.pushedTimeFilters ++ implied,
        child = Filter(implied.reduce(And), window.child)))
  }

  private sealed trait Op
  private case object Lt extends Op
  private case object Le extends Op
  private case object Eq extends Op
  private case object Ge extends Op
  private case object Gt extends Op

  /** (window column, operator, constant in microseconds) of `column op constant`, either way round. */
  private def comparison(predicate: Expression): Option[(Attribute, Op, Long)] = {
    def op(c: BinaryComparison, flipped: Boolean): Option[Op] = (c, flipped) match {
      case (_: LessThan, false) | (_: GreaterThan, true) => Some(Lt)
      case (_: LessThanOrEqual, false) | (_: GreaterThanOrEqual, true) => Some(Le)
      case (_: EqualTo, _) => Some(Eq)
      case (_: GreaterThanOrEqual, false) | (_: LessThanOrEqual, true) => Some(Ge)
      case (_: GreaterThan, false) | (_: LessThan, true) => Some(Gt)
      case _ => None
    }
    def constant(e: Expression): Option[Long] =
      if (e.foldable) Option(e.eval()).collect { case v: java.lang.Long => v.longValue } else None
    predicate match {
      case c: BinaryComparison => (c.left, c.right) match {
        case (a: Attribute, v) => for (o <- op(c, flipped = false); x <- constant(v)) yield (a, o, x)
        case (v, a: Attribute) => for (o <- op(c, flipped = true); x <- constant(v)) yield (a, o, x)
        case _ => None
      }
      case _ => None
    }
  }

  /** The time-column range `predicate` implies, if it implies one. */
  private def impliedRange(predicate: Expression, w: WindowTableFunction): Option[Expression] =
    predicate match {
      case Or(left, right) => for (l <- impliedRange(left, w); r <- impliedRange(right, w)) yield Or(l, r)
      case And(left, right) => (impliedRange(left, w) ++ impliedRange(right, w)).reduceOption(And)
      case comparison => timeRange(comparison, w).reduceOption(And)
    }

  private def timeRange(predicate: Expression, w: WindowTableFunction): Seq[Expression] = {
    val t = w.timeColumn
    def at(micros: Long): Expression = Literal(micros, t.dataType)
    // BIGINT time columns count milliseconds, as do their window columns.
    val size = if (t.dataType == LongType) (w.spec.maxWindowLength + 999) / 1000 else w.spec.maxWindowLength
    comparison(predicate).toSeq.flatMap {
      case (a, op, x) if a.exprId == w.windowStart.exprId && a.dataType == t.dataType => op match {
        case Ge => Seq(GreaterThanOrEqual(t, at(x)))
        case Gt => Seq(GreaterThan(t, at(x)))
        case Le | Lt => Seq(LessThan(t, at(x + size)))
        case Eq => Seq(GreaterThanOrEqual(t, at(x)), LessThan(t, at(x + size)))
      }
      case (a, op, x) if (a.exprId == w.windowEnd.exprId || a.exprId == w.windowTime.exprId) &&
          a.dataType == t.dataType =>
        val end = if (a.exprId == w.windowTime.exprId) x + 1 else x
        op match {
          case Le | Lt => Seq(LessThan(t, at(end)))
          case Ge => Seq(GreaterThanOrEqual(t, at(end - size)))
          case Gt => Seq(GreaterThan(t, at(end - size)))
          case Eq => Seq(LessThan(t, at(end)), GreaterThanOrEqual(t, at(end - size)))
        }
      case _ => Nil
    }
  }
}
