package io.mvengine

import org.apache.spark.sql.catalyst.expressions.{Attribute, Between, ExprId, Expression, GreaterThan,
  GreaterThanOrEqual, LessThan, LessThanOrEqual, Literal, PredicateHelper, RuntimeReplaceable}
import org.apache.spark.sql.catalyst.plans.Inner
import org.apache.spark.sql.catalyst.plans.logical.{Filter, Join, LogicalPlan, Project, SubqueryAlias}
import org.apache.spark.sql.types.{CalendarIntervalType, TimestampNTZType, TimestampType, YearMonthIntervalType}
import org.apache.spark.unsafe.types.CalendarInterval

/**
 * Rows of a source held to a window's time by a join: a relation read as rows (under no
 * aggregate) of a query of rows, inner-joined to windowed aggregates of another read, with its
 * time column between two bounds of those windows, each give or take a constant. Nexmark's q7:
 *
 * {{{
 *   SELECT B.* FROM bid B JOIN (SELECT max(price) AS maxprice, window_end AS dateTime
 *                               FROM TUMBLE(TABLE(bid), DESCRIPTOR(dateTime), INTERVAL '10' SECOND)
 *                               GROUP BY window_start, window_end) B1 ON B.price = B1.maxprice
 *   WHERE B.dateTime BETWEEN B1.dateTime - INTERVAL '10' SECOND AND B1.dateTime
 * }}}
 *
 * Each output row then depends only on rows within its window's time widened by the constants:
 * the read is window-local as the windowed one is (QueryDescription.windowPartners), and its reach
 * is the window's size plus both constants (micros).
 */
object WindowBands extends PredicateHelper {

  /** A banded read: its time column, how far (micros) an output row's rows may lie apart, and the
   *  index of the windowed read it is held to. */
  case class Band(timeColumn: String, reach: Long, partner: Int)

  /**
   * The band of read `leaf` held to one of the windowed reads `windowed` (index -> that read's
   * relation, its window bounds' attributes, traced through aliases, and its longest window's
   * size), when an inner join with `leaf` on one side and the windowed read's aggregates wholly on
   * the other bounds `leaf`'s time column from below and above by bounds of those windows, in its
   * condition or in a filter right above it. `timesOf` gives `leaf`'s timestamp columns by the
   * attributes that carry them (traced through aliases).
   */
  def of(plan: LogicalPlan, leaf: LogicalPlan, timesOf: Map[ExprId, String],
         windowed: Seq[(Int, LogicalPlan, Set[ExprId], Long)]): Option[Band] = {
    val bands = plan.collect {
      case j @ Join(left, right, Inner, _, _) if j.children.exists(_.exists(_ == leaf)) =>
        val conjuncts = conditionsAt(plan, j).flatMap(splitConjunctivePredicates).flatMap(expanded)
        for {
          (index, read, bounds, size) <- windowed
          other = if (left.exists(_ == leaf)) right else left
          if other.exists(_ == read) && !other.exists(_ == leaf) &&
            DeltaRules.regroupingsOf(plan, read).forall(a => other.exists(_ eq a))
          limits = conjuncts.flatMap(limit(_, timesOf, bounds))
          column <- limits.map(_._1).distinct
          lows = limits.collect { case (`column`, true, offset) => offset }
          highs = limits.collect { case (`column`, false, offset) => offset }
          if lows.nonEmpty && highs.nonEmpty
        } yield Band(column, size + lows.map(math.abs).min + highs.map(math.abs).min, index)
    }.flatten
    bands.sortBy(_.reach).headOption
  }

  /** The conditions every row of join `j` meets: its own, and those of filters right above it. */
  private def conditionsAt(plan: LogicalPlan, j: Join): Seq[Expression] = {
    def reaches(p: LogicalPlan): Boolean = p match {
      case x if x eq j => true
      case Project(_, child) => reaches(child)
      case SubqueryAlias(_, child) => reaches(child)
      case Filter(_, child) => reaches(child)
      case _ => false
    }
    j.condition.toSeq ++ plan.collect { case f: Filter if reaches(f.child) => f.condition }
  }

  private def expanded(e: Expression): Seq[Expression] = e match {
    case b: Between => Seq(GreaterThanOrEqual(b.input, b.lower), LessThanOrEqual(b.input, b.upper))
    case other => Seq(other)
  }

  /** A conjunct bounding a time column of `timesOf` by a window bound of `bounds` plus a constant:
   *  (the column, whether from below, the constant in micros). */
  private def limit(e: Expression, timesOf: Map[ExprId, String],
                    bounds: Set[ExprId]): Option[(String, Boolean, Long)] = {
    // (time, the other side, whether the time is bounded from below), both ways round
    val sides: Seq[(Expression, Expression, Boolean)] = e match {
      case GreaterThanOrEqual(l, r) => Seq((l, r, true), (r, l, false))
      case GreaterThan(l, r) => Seq((l, r, true), (r, l, false))
      case LessThanOrEqual(l, r) => Seq((l, r, false), (r, l, true))
      case LessThan(l, r) => Seq((l, r, false), (r, l, true))
      case _ => Nil
    }
    sides.collectFirst(Function.unlift {
      case (time: Attribute, other, below) if timesOf.contains(time.exprId) =>
        other.references.toSeq match {
          case Seq(bound) if bounds.contains(bound.exprId) =>
            shift(other, bound).map(offset => (timesOf(time.exprId), below, offset))
          case _ => None
        }
      case _ => None
    })
  }

  /** `e` as `bound` plus a constant number of micros: that constant, when `e` is a timestamp that
   *  only adds fixed durations to `bound` (no months, no days: their length depends on the date). */
  private def shift(e: Expression, bound: Attribute): Option[Long] = {
    val timed = Seq(TimestampType, TimestampNTZType)
    val fixed = e.deterministic && timed.contains(e.dataType) && timed.contains(bound.dataType) && !e.exists {
      case Literal(v: CalendarInterval, CalendarIntervalType) => v.months != 0 || v.days != 0
      case l: Literal => l.dataType.isInstanceOf[YearMonthIntervalType]
      case _ => false
    }
    def at(micros: Long): Option[Long] = scala.util.Try {
      var plain = e
      while (plain.exists(_.isInstanceOf[RuntimeReplaceable])) {
        plain = plain.transformUp { case r: RuntimeReplaceable => r.replacement }
      }
      plain.transformUp { case a: Attribute if a.exprId == bound.exprId => Literal(micros, a.dataType) }.eval() match {
        case v: Long => v
      }
    }.toOption
    val apart = 1000000000000L
    if (!fixed) None
    else (at(0L), at(apart)) match {
      case (Some(p), Some(q)) if q - p == apart => Some(p)
      case _ => None
    }
  }
}
