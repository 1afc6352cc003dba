package io.mvengine

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
 * analysed plan stays as it was.
 */
object SourceSubstitution {

  val functionName = "mv_substitute"

  def registration: (FunctionIdentifier, ExpressionInfo, Seq[Expression] => LogicalPlan) = (
    FunctionIdentifier(functionName),
    new ExpressionInfo(getClass.getName, null, functionName,
      "mv_substitute(query, source_table, replacement) - The query with source_table read from replacement.", ""),
    (args: Seq[Expression]) => args match {
      case Seq(query: Literal, source: Literal, replacement: Literal)
          if Seq(query, source, replacement).forall(l => l.dataType == StringType && l.value != null) =>
        substitute(query.toString, source.toString, replacement.toString)
      case _ => throw new IllegalArgumentException(
        "mv_substitute takes three string literals: the query, the source table, the replacement")
    })

  private def substitute(queryText: String, source: String, replacementText: String): LogicalPlan = {
    val session = SparkSession.active
    def analyse(text: String): LogicalPlan =
      session.sessionState.executePlan(session.sessionState.sqlParser.parsePlan(text)).analyzed
    val query = analyse(queryText)
    val replacement = analyse(s"SELECT * FROM $replacementText")
    val sourceName = session.sessionState.sqlParser.parseMultipartIdentifier(source).last.toLowerCase
    val resolver = session.sessionState.conf.resolver
    var replaced = false
    val result = query.transformUp {
      case relation: LogicalRelation if relation.catalogTable.exists(t =>
          t.identifier.unquotedString.equalsIgnoreCase(source) || t.identifier.table.toLowerCase == sourceName) =>
        replaced = true
        Project(relation.output.map { column =>
          val from = replacement.output.find(a => resolver(a.name, column.name)).getOrElse(
            throw new IllegalArgumentException(s"$replacementText has no column ${column.name}"))
          Alias(from, column.name)(exprId = column.exprId)
        }, replacement)
    }
    if (!replaced) throw new IllegalArgumentException(s"the query does not read $source")
    result
  }
}
