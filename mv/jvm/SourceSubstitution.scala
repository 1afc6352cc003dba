package io.mvengine

import scala.collection.mutable

import org.apache.spark.sql.catalyst.FunctionIdentifier
import org.apache.spark.sql.catalyst.expressions.{Alias, Expression, ExpressionInfo, Literal}
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, Project}
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.execution.datasources.LogicalRelation
import org.apache.spark.sql.types.StringType

/**
 * A view's query with one of its source tables replaced by another relation of the same columns:
 * {{{
 *   SELECT * FROM mv_substitute('<view query>', 'spark_catalog.default.bids', 'affected_bids')
 * }}}
 * The maintainer recomputes only what changed by running the view's own query over just the
 * source rows that can affect it (for SESSION windows: the rows of the touched sessions), without
 * re-parsing or rewriting the query's text. The replacement must have every column of the source
 * (extra columns are ignored); each keeps the source column's identity, so the rest of the
 * analysed plan stays as it was. Several sources take several pairs (joined SESSION windows):
 * `mv_substitute('<query>', 'bids', 'affected_bids', 'asks', 'affected_asks')`.
 */
object SourceSubstitution {

  val functionName = "mv_substitute"

  def registration: (FunctionIdentifier, ExpressionInfo, Seq[Expression] => LogicalPlan) = (
    FunctionIdentifier(functionName),
    new ExpressionInfo(getClass.getName, null, functionName,
      "mv_substitute(query, source_table, replacement) - The query with source_table read from replacement.", ""),
    (args: Seq[Expression]) => args match {
      case (query: Literal) +: pairs if pairs.nonEmpty && pairs.size % 2 == 0 && args.forall {
            case l: Literal => l.dataType == StringType && l.value != null
            case _ => false
          } =>
        substitute(query.toString, pairs.map(_.toString).grouped(2).map(p => p(0) -> p(1)).toSeq)
      case _ => throw new IllegalArgumentException(
        "mv_substitute takes string literals: the query, then one or more source tables each with its replacement")
    })

  /** One pass, so a replacement's own reads of another source (its rows' regions) stay as they are. */
  private def substitute(queryText: String, replacements: Seq[(String, String)]): LogicalPlan = {
    val session = SparkSession.active
    def analyse(text: String): LogicalPlan =
      session.sessionState.executePlan(session.sessionState.sqlParser.parsePlan(text)).analyzed
    val parser = session.sessionState.sqlParser
    val resolver = session.sessionState.conf.resolver
    val byName = replacements.map { case (source, text) =>
      (source, parser.parseMultipartIdentifier(source).map(_.toLowerCase), text, analyse(s"SELECT * FROM $text"))
    }
    def target(relation: LogicalRelation) = byName.find { case (_, parts, _, _) =>  // `t`, `db.t`, `cat.db.t`
      relation.catalogTable.exists(t => t.identifier.nameParts.map(_.toLowerCase).endsWith(parts))
    }
    val replaced = mutable.Set[String]()
    val result = analyse(queryText).transformUp {
      case relation: LogicalRelation if target(relation).isDefined =>
        val (source, _, text, replacement) = target(relation).get
        replaced += source
        Project(relation.output.map { column =>
          val from = replacement.output.find(a => resolver(a.name, column.name)).getOrElse(
            throw new IllegalArgumentException(s"$text has no column ${column.name}"))
          Alias(from, column.name)(exprId = column.exprId)
        }, replacement)
    }
    replacements.map(_._1).find(s => !replaced.contains(s)).foreach { source =>
      throw new IllegalArgumentException(s"the query does not read $source")
    }
    result
  }
}
