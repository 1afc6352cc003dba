package io.mvengine

import scala.collection.mutable

import org.apache.spark.sql.catalyst.analysis.{UnresolvedAttribute, UnresolvedFunction, UnresolvedRelation, UnresolvedTableValuedFunction}
import org.apache.spark.sql.catalyst.expressions.{Expression, FunctionTableSubqueryArgumentExpression, NamedArgumentExpression}
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.catalyst.rules.Rule

/**
 * Turns Esper's data windows (WIN_LENGTH, WIN_TIME_BATCH, STD_UNIQUE, EXT_RANK, ...; see
 * [[EsperWindowKind]]) into Spark's own operators, in two rules like the window TVFs:
 *  1. [[EsperDataWindows.Bind]] binds the call's arguments to names as the statement is parsed
 *     (before Spark could read `DESCRIPTOR(c)` as a scalar call): `TABLE(t) [PARTITION BY k]
 *     [ORDER BY ...]` or a bare table for DATA, `DESCRIPTOR(c)` or a bare column for TIMECOL and
 *     UNIQUE, positional or named arguments;
 *  2. [[EsperDataWindows.Rewrite]], once Spark has resolved them, checks them and replaces the call
 *     with window functions, filters and generators ([[EsperWindowPlans]]); every rewrite is exact.
 *
 * Example: `SELECT * FROM STD_UNIQUE(TABLE(ticks), DESCRIPTOR(ts), DESCRIPTOR(symbol))` becomes
 * `row_number() OVER (PARTITION BY symbol ORDER BY ts DESC, ...) = 1`.
 */
object EsperDataWindows {

  /** Esper's expression-window properties: the state of a live window, and what to use instead. */
  val statefulProperties: Map[String, String] = Map(
    "current_count" -> "WIN_LENGTH(..., n) for current_count <= n, WIN_LENGTH_BATCH(..., n) for current_count >= n",
    "expired_count" -> "WIN_LENGTH or WIN_LENGTH_BATCH",
    "oldest_timestamp" -> "WIN_TIME(..., size) for a time span",
    "newest_timestamp" -> "WIN_TIME(..., size) for a time span",
    "oldest_event" -> "WIN_TIME or WIN_LENGTH",
    "newest_event" -> "WIN_TIME or WIN_LENGTH",
    "view_reference" -> "WIN_TIME or WIN_LENGTH")

  object Bind extends Rule[LogicalPlan] {
    override def apply(plan: LogicalPlan): LogicalPlan = plan.transformUpWithSubqueries {
      case call: UnresolvedTableValuedFunction if EsperWindowKind.find(call.name).isDefined =>
        bind(EsperWindowKind.find(call.name).get, call.functionArgs)
    }
  }

  object Rewrite extends Rule[LogicalPlan] {
    override def apply(plan: LogicalPlan): LogicalPlan = plan.resolveOperatorsUp {
      case call: EsperWindowCall if call.child.resolved && call.expressions.forall(_.resolved) =>
        new EsperWindowPlans(call).plan
    }
  }

  private def bind(kind: EsperWindowKind, args: Seq[Expression]): EsperWindowCall = {
    val bound = bindNames(kind, args)
    val (child, partitionBy, orderBy) = bound("DATA") match {
      case table: FunctionTableSubqueryArgumentExpression =>
        (table.plan, table.partitionByExpressions, table.orderByExpressions)
      case name: UnresolvedAttribute => (UnresolvedRelation(name.nameParts), Nil, Nil)
      case other => throw WindowErrors.esperDataNotATable(kind, other.sql)
    }
    val time = columns(bound("TIMECOL")) match {
      case Some(Seq(column)) => column
      case _ => throw WindowErrors.esperTimeNotAColumn(kind, bound("TIMECOL").sql)
    }
    val keys = bound.get("UNIQUE").map(arg => columns(arg).getOrElse(throw WindowErrors.keysNotColumns(kind, arg.sql)))
    bound.get("EXPRESSION").foreach(refuseStatefulProperties(kind, _))
    val paramNames = kind.arguments.drop(2).filter(name => name != "UNIQUE" && bound.contains(name))
    EsperWindowCall(kind, time, partitionBy, orderBy, keys.getOrElse(Nil), paramNames, paramNames.map(bound), child)
  }

  /** Arguments by name: positional ones in the kind's order, then named ones (`SIZE => 10`). */
  private def bindNames(kind: EsperWindowKind, args: Seq[Expression]): Map[String, Expression] = {
    val bound = mutable.LinkedHashMap[String, Expression]()
    var named = false
    args.zipWithIndex.foreach {
      case (NamedArgumentExpression(key, value), _) =>
        val name = key.toUpperCase
        if (!kind.arguments.contains(name)) throw WindowErrors.esperUnknownArgument(kind, key)
        if (bound.contains(name)) throw WindowErrors.esperDuplicateArgument(kind, name)
        named = true
        bound(name) = value
      case (value, position) =>
        if (named) throw WindowErrors.esperPositionalAfterNamed(kind)
        if (position >= kind.arguments.size) throw WindowErrors.esperTooManyArguments(kind, args.size)
        bound(kind.arguments(position)) = value
    }
    kind.arguments.take(kind.required).find(!bound.contains(_))
      .foreach(missing => throw WindowErrors.esperMissingArgument(kind, missing))
    bound.toMap
  }

  /** The columns of `DESCRIPTOR(a, b)` or of a bare column name; None for anything else. */
  private def columns(arg: Expression): Option[Seq[UnresolvedAttribute]] = arg match {
    case f: UnresolvedFunction if f.nameParts.map(_.toLowerCase) == Seq("descriptor") && f.arguments.nonEmpty &&
        f.arguments.forall(_.isInstanceOf[UnresolvedAttribute]) =>
      Some(f.arguments.map(_.asInstanceOf[UnresolvedAttribute]))
    case column: UnresolvedAttribute => Some(Seq(column))
    case _ => None
  }

  private def refuseStatefulProperties(kind: EsperWindowKind, condition: Expression): Unit =
    condition.foreach {
      case a: UnresolvedAttribute if statefulProperties.contains(a.nameParts.head.toLowerCase) =>
        val name = a.nameParts.head.toLowerCase
        throw WindowErrors.statefulExpression(kind, name, statefulProperties(name))
      case _ =>
    }
}
