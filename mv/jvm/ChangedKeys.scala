package io.mvengine

import org.apache.spark.sql.catalyst.expressions.{Alias, And, Attribute, AttributeMap, AttributeSet, Expression,
  PredicateHelper, SubqueryExpression}
import org.apache.spark.sql.catalyst.expressions.aggregate.AggregateExpression
import org.apache.spark.sql.catalyst.plans.{Cross, Inner, JoinType, LeftAnti, LeftOuter, LeftSemi, RightOuter}
import org.apache.spark.sql.catalyst.plans.logical._
import org.apache.spark.sql.internal.SQLConf

/**
 * The keys a change reaches, read off the changed rows themselves when the query lets them: a
 * keys term (DeltaRules.forKeys: the groups or partitions a change reaches, recomputed) whose
 * key columns are each an expression of the changed read's columns, through operators that only
 * drop, repeat, group or rank rows (filters, projections, OVER, GROUP BY those keys, inner and
 * semi joins, the kept side of an outer join), outputs a subset of those expressions over the
 * changed rows. So the term can be cut to them, and the other sides of the joins on the way are
 * not read: a dimension's change (an auction moved) no longer joins every fact row (each bid) to
 * learn keys it already holds (Nexmark q9's auction id). A key of the other side is still found
 * by the join (a bid's auction id from the auctions): read off its equal on the changed side, it
 * would reach bids of auctions that are not there, and the other side is most often the small one.
 * The filters on the changed side's columns are kept, the rest dropped: a superset either way.
 * {{{
 *   ChangedKeys.cut(q9 over auction's change, reads = p => p reads auction, Seq("id"))
 *   // Some(SELECT id FROM auction_change): no bid read
 * }}}
 */
object ChangedKeys extends PredicateHelper {

  /**
   * `plan` cut to its `keys` columns over the changed read (`reads`), or None when some key is not
   * an expression of that read's columns on the way (an aggregate's value, a padded column, a
   * window's bounds, a join's other side) or no join is left out by the cut.
   */
  def cut(plan: LogicalPlan, reads: LogicalPlan => Boolean, keys: Seq[String]): Option[LogicalPlan] = {
    val resolver = SQLConf.get.resolver
    val top = keys.map(k => plan.output.filter(a => resolver(a.name, k)))
    if (keys.isEmpty || top.exists(_.size != 1)) return None
    val columns = top.map(_.head)
    traced(plan, columns, Nil, reads).collect { case Traced(read, exprs, conditions, true) =>
      val kept = conditions.reduceOption(And).map(Filter(_, read)).getOrElse(read)
      Project(exprs.zip(columns).map { case (e, a) => Alias(e, a.name)() }, kept)
    }
  }

  /** Keys as expressions of `read`'s columns, filters on them, and whether a join's side was left out. */
  private case class Traced(read: LogicalPlan, keys: Seq[Expression], conditions: Seq[Expression], cut: Boolean)

  private def traced(p: LogicalPlan, keys: Seq[Expression], conditions: Seq[Expression], reads: LogicalPlan => Boolean)
      : Option[Traced] = {
    def on(child: LogicalPlan, ks: Seq[Expression], cs: Seq[Expression]): Option[Traced] =
      if (!ks.forall(_.references.subsetOf(child.outputSet))) None
      else traced(child, ks, cs.filter(_.references.subsetOf(child.outputSet)), reads)
    p match {
      case _ if !p.expressions.forall(e => e.deterministic && !SubqueryExpression.hasSubquery(e)) => None
      case Project(list, child) =>
        val renamed = AttributeMap(list.collect { case a: Alias => a.toAttribute -> a.child })
        def through(e: Expression) = e.transform { case a: Attribute if renamed.contains(a) => renamed(a) }
        on(child, keys.map(through), conditions.map(through))
      case Filter(condition, child) => on(child, keys, conditions ++ splitConjunctivePredicates(condition))
      // A row that fails a filter above still moves its partition's ranks (or which copy is kept):
      // below, only filters on whole partitions hold.
      case w: Window => on(w.child, keys, onlyOn(conditions, w.partitionSpec))
      case d: Deduplicate => on(d.child, keys, onlyOn(conditions, d.keys))
      case _: Sort | _: SubqueryAlias | _: Distinct => on(p.children.head, keys, conditions)
      case a: Aggregate =>  // a key is a grouping expression of the child's rows; filters over values (HAVING) dropped
        val grouped = AttributeMap(a.aggregateExpressions.collect {
          case alias: Alias if !alias.exists(_.isInstanceOf[AggregateExpression]) => alias.toAttribute -> alias.child
        })
        val ks = keys.map(_.transform { case x: Attribute if grouped.contains(x) => grouped(x) })
        if (ks.exists(_.exists(_.isInstanceOf[AggregateExpression]))) None else on(a.child, ks, Nil)
      case j: Join => joined(j, keys, conditions, reads)
      case _ if reads(p) && keys.forall(_.references.subsetOf(p.outputSet)) =>
        Some(Traced(p, keys, conditions, cut = false))
      case _ => None
    }
  }

  /** Through `j` to its side that reads the change, the other side left out. */
  private def joined(j: Join, keys: Seq[Expression], conditions: Seq[Expression], reads: LogicalPlan => Boolean)
      : Option[Traced] = {
    val changedLeft = reads(j.left)
    if (changedLeft == reads(j.right)) return None  // both sides read it (or neither): not cut here
    val side = if (changedLeft) j.left else j.right
    if (!keeps(j.joinType, changedLeft)) return None
    if (!keys.forall(_.references.subsetOf(side.outputSet))) return None  // a key of the other side: found by the join
    // Every output row of an inner or semi join meets its condition; an outer or anti join's need not.
    val met = if (Seq(Inner, Cross, LeftSemi).contains(j.joinType)) j.condition.toSeq.flatMap(splitConjunctivePredicates)
      else Nil
    traced(side, keys, (conditions ++ met).filter(_.references.subsetOf(side.outputSet)), reads).map(_.copy(cut = true))
  }

  /** The `conditions` that read only those of `columns` that are attributes: filters on whole partitions. */
  private def onlyOn(conditions: Seq[Expression], columns: Seq[Expression]): Seq[Expression] = {
    val whole = AttributeSet(columns.collect { case a: Attribute => a })
    conditions.filter(_.references.subsetOf(whole))
  }

  /** Whether every output row of a `joinType` join carries the changed side's row as it is (not padded with NULLs). */
  private def keeps(joinType: JoinType, changedLeft: Boolean): Boolean = joinType match {
    case Inner | Cross => true
    case LeftSemi | LeftAnti | LeftOuter => changedLeft
    case RightOuter => !changedLeft
    case _ => false
  }
}
