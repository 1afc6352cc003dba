package io.mvengine

import org.apache.spark.sql.catalyst.expressions.{Attribute, AttributeSet, Expression, SubqueryExpression}
import org.apache.spark.sql.catalyst.plans.{LeftAnti, LeftSemi}
import org.apache.spark.sql.catalyst.plans.logical.{Filter, Join, LogicalPlan, Project, Window}
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.internal.SQLConf

/**
 * A semi- or anti-join on an OVER's partition keys, above the filter on its rank (a top-N, a
 * deduplication), goes below the OVER: it keeps or drops whole partitions, so it commutes with the
 * OVER and with any filter over it. Spark pushes such a join below an OVER (its
 * PushDownLeftSemiAntiJoin), not below the filter, so the rank was computed over every row and the
 * join applied after: a refresh recomputing the partitions a change reaches
 * (mv/row_refresh.py `refresh_partitions`) sorted the whole source by its partitions. Below the
 * OVER, Spark pushes the join on through projections, aggregates and joins to the reads that carry
 * the keys, and the OVER sorts only the partitions kept.
 *
 * The filter stays above the OVER (Spark's InferWindowGroupLimit still sees it there), so results
 * are unchanged. Applied in any query of a session with the extension unless
 * `mv.semiJoinsBelowRankFilters` is set to false.
 *
 * Example:
 * {{{
 *   SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY t DESC) AS rn FROM bids)
 *   WHERE rn = 1 LEFT SEMI JOIN keys ON k = keys.k
 *   // Filter rn = 1 <- Window <- (bids LEFT SEMI JOIN keys)
 * }}}
 */
object SemiJoinsBelowRankFilters extends Rule[LogicalPlan] {
  /** "false" leaves such joins where Spark puts them. */
  val Enabled = "mv.semiJoinsBelowRankFilters"

  override def apply(plan: LogicalPlan): LogicalPlan =
    if (!SQLConf.get.getConfString(Enabled, "true").toBoolean) plan
    else plan.transform {
      case j @ Join(f @ Filter(_, w: Window), right, LeftSemi | LeftAnti, Some(on), _) if byPartitions(f, w, right, on) =>
        below(j, f, w)
      // the columns the query keeps (the rank dropped): Spark leaves such a join above them
      case j @ Join(p @ Project(columns, f @ Filter(_, w: Window)), right, LeftSemi | LeftAnti, Some(on), _)
          if columns.forall(_.isInstanceOf[Attribute]) && byPartitions(f, w, right, on) =>
        p.copy(child = below(j, f, w))
    }

  private def below(j: Join, f: Filter, w: Window): LogicalPlan = f.copy(child = w.copy(child = j.copy(left = w.child)))

  /** Whether `on` reads only `w`'s partition columns (as themselves) and `right`'s, and nothing
   *  on the way is nondeterministic or a subquery. */
  private def byPartitions(f: Filter, w: Window, right: LogicalPlan, on: Expression): Boolean = {
    val keys = AttributeSet(w.partitionSpec.collect { case a: Attribute => a })
    keys.nonEmpty && on.references.subsetOf(keys ++ right.outputSet) && on.references.intersect(keys).nonEmpty &&
      Seq(f.condition, on).forall(e => e.deterministic && !SubqueryExpression.hasSubquery(e)) &&
      w.windowExpressions.forall(_.deterministic)
  }
}
