package io.mvengine

import org.apache.spark.sql.catalyst.expressions.SubqueryExpression
import org.apache.spark.sql.catalyst.plans.{Cross, FullOuter, Inner, LeftAnti, LeftOuter, LeftSemi, RightOuter}
import org.apache.spark.sql.catalyst.plans.logical._
import org.apache.spark.sql.execution.datasources.LogicalRelation
import org.apache.spark.sql.types.{ArrayType, DataType, MapType, StructType}

/**
 * The maintenance planner's rules for queries of rows (no window function, no GROUP BY): how each
 * operator turns a signed change of its input into a signed change of its output (DBSP's and
 * Enzyme's delta rules). The rules are listed once, here, in `rule`. Every rule below is linear in
 * each source the query reads, so the change of the whole query is the sum over its changed
 * sources S of the query run over S's change, with the sources before S read at their new version
 * and those after it at their old one (a join: dL JOIN R(new) + L(old) JOIN dR). The Python side
 * (mv/row_refresh.py) runs exactly that. An operator without a rule gives a reason code instead,
 * and the view refreshes in full.
 * {{{
 *   DeltaRules.steps(analysedPlan)
 *   // Step(0, "Project", Some("rows pass through"), None), Step(1, "Join Inner", Some("dL JOIN R(new) + ..."), None)
 * }}}
 */
object DeltaRules {

  /** One operator of the plan, `depth` below the top: its rule, or why it has none. */
  case class Step(depth: Int, operator: String, rule: Option[String], reason: Option[String]) {
    def toMap: Map[String, Any] = Map("depth" -> depth, "operator" -> operator, "rule" -> rule.orNull,
      "reason" -> reason.orNull)
  }

  private val passes = "rows pass through"

  /** Each operator of `plan`, top first, with its rule or the reason it has none. */
  def steps(plan: LogicalPlan): Seq[Step] = {
    def walk(p: LogicalPlan, depth: Int): Seq[Step] = {
      val (name, verdict) = rule(p)
      Step(depth, name, verdict.left.toOption, verdict.toOption) +: p.children.flatMap(walk(_, depth + 1))
    }
    walk(plan, 0) ++ outputReasons(plan).map(r => Step(0, "output", None, Some(r)))
  }

  /** The reason codes of `steps`, each once. */
  def reasons(steps: Seq[Step]): Seq[String] = steps.flatMap(_.reason).distinct

  /** An operator's name and its rule (Left) or the reason it has none (Right). */
  private def rule(p: LogicalPlan): (String, Either[String, String]) = p match {
    case _ if p.expressions.exists(_.exists(_.isInstanceOf[SubqueryExpression])) => (p.nodeName, Right("SUBQUERY"))
    case _ if !p.expressions.forall(_.deterministic) => (p.nodeName, Right("NONDETERMINISTIC"))
    case _: Project | _: Filter | _: SubqueryAlias | _: View => (p.nodeName, Left(passes))
    case g: Generate => (s"Generate ${g.generator.prettyName}", Left("each row's generated rows pass through"))
    case s: Sort if s.global => ("Sort", Left("a table keeps no order: rows pass through"))
    case _: Union => ("Union", Left("each branch's change, added"))
    case j: Join => join(j)
    case r: LogicalRelation => (s"Source ${r.catalogTable.map(_.identifier.quotedString).getOrElse("files")}",
      Left("its change feed, signed"))
    case _: LocalRelation | _: OneRowRelation | _: Range => (p.nodeName, Left("constant: no change"))
    case _: Aggregate => ("Aggregate", Right("AGGREGATE_BELOW_ROWS"))
    case _: Distinct | _: Deduplicate => (p.nodeName, Right("DISTINCT"))
    case _: Window => ("Window (OVER)", Right("OVER_WITHOUT_RULE"))
    case _: Intersect | _: Except => (p.nodeName, Right("SET_OPERATION"))
    case _: GlobalLimit | _: LocalLimit => (p.nodeName, Right("LIMIT"))
    case _: WindowTableFunction => (p.nodeName, Right("WINDOW_COLUMNS_NOT_IN_OUTPUT"))
    case _ => (p.nodeName, Right("OPERATOR_WITHOUT_RULE"))
  }

  private def join(j: Join): (String, Either[String, String]) = {
    val name = s"Join ${j.joinType.sql}"
    def tables(p: LogicalPlan) = p.collectLeaves().collect {
      case r: LogicalRelation if r.catalogTable.isDefined => r.catalogTable.get.identifier.nameParts.map(_.toLowerCase)
    }.toSet
    j.joinType match {
      case Inner | Cross if (tables(j.left) & tables(j.right)).nonEmpty => (name, Right("SELF_JOIN"))
      case Inner | Cross => (name, Left("dL JOIN R(new) + L(old) JOIN dR"))
      case LeftOuter | RightOuter | FullOuter => (name, Right("OUTER_JOIN"))
      case LeftSemi | LeftAnti => (name, Right("SEMI_OR_ANTI_JOIN"))
      case _ => (name, Right("SUBQUERY"))  // existence joins come from IN / EXISTS subqueries
    }
  }

  /** A change is netted row by row (grouped by every column): a map column cannot be grouped. */
  private def outputReasons(plan: LogicalPlan): Seq[String] = {
    def hasMap(t: DataType): Boolean = t match {
      case _: MapType => true
      case a: ArrayType => hasMap(a.elementType)
      case s: StructType => s.fields.exists(f => hasMap(f.dataType))
      case _ => false
    }
    if (plan.output.exists(a => hasMap(a.dataType))) Seq("MAP_COLUMN") else Nil
  }
}
