package io.mvengine

import com.fasterxml.jackson.databind.ObjectMapper

import org.apache.spark.sql.{Row, SparkSession}
import org.apache.spark.sql.classic
import org.apache.spark.sql.catalyst.expressions.Attribute
import org.apache.spark.sql.catalyst.plans.logical.CreateTableAsSelect
import org.apache.spark.sql.execution.command.LeafRunnableCommand
import org.apache.spark.sql.types.StringType

/**
 * The engine's one analysed write into a view's tables: creating a view's table, or the `__late`
 * or `__open` table beside it, empty, with the columns of a query. A catalog that creates a table
 * before writing its (empty) rows makes that write one into a view's table, which [[ReadOnlyViews]]
 * refuses to anyone else; it lets it pass while [[isRunning]], which only this command's own
 * thread sees, and only while its CREATE runs. No session setting is involved, so neither a user
 * nor another thread of the session can switch the rule off.
 *
 * {{{
 *   MV_CREATE_TABLE '{"table": "v__late", "query": "SELECT * FROM rows", "if_not_exists": true,
 *                     "clauses": "USING delta TBLPROPERTIES (...)"}'
 * }}}
 * runs `CREATE TABLE [IF NOT EXISTS] v__late USING delta ... AS SELECT * FROM (SELECT * FROM rows) WHERE false`.
 * It only creates: the statement must parse as CREATE TABLE ... AS SELECT (never REPLACE), which
 * fails on, or with IF NOT EXISTS leaves alone, a table that exists; so calling it gains a user
 * nothing that CREATE TABLE does not give.
 */
object EngineCreate {

  private val Keyword = "MV_CREATE_TABLE"
  private val running: ThreadLocal[java.lang.Boolean] = ThreadLocal.withInitial(() => java.lang.Boolean.FALSE)

  /** Whether this thread is inside an [[EngineCreateCommand]]'s CREATE. */
  def isRunning: Boolean = running.get

  case class Spec(table: String, query: String, clauses: String, ifNotExists: Boolean) {
    def statement: String = s"CREATE TABLE ${if (ifNotExists) "IF NOT EXISTS " else ""}$table $clauses " +
      s"AS SELECT * FROM ($query) WHERE false"
  }

  /** The statement, if `sqlText` is one: its spec, from the string literal after the keyword. */
  def parse(sqlText: String, literal: String => String): Option[EngineCreateCommand] = {
    val text = sqlText.trim
    if (!text.regionMatches(true, 0, Keyword, 0, Keyword.length)) return None
    val json = new ObjectMapper().readTree(literal(text.substring(Keyword.length).trim))
    def field(name: String) = Option(json.get(name)).filterNot(_.isNull).map(_.asText).getOrElse("")
    Some(EngineCreateCommand(Spec(field("table"), field("query"), field("clauses"),
      Option(json.get("if_not_exists")).exists(_.asBoolean))))
  }

  case class EngineCreateCommand(spec: Spec) extends LeafRunnableCommand {
    override val output: Seq[Attribute] = RefreshCommit.resultColumns("status" -> StringType)

    override def run(session: SparkSession): Seq[Row] = {
      val text = spec.statement
      session.asInstanceOf[classic.SparkSession].sessionState.sqlParser.parsePlan(text) match {
        case _: CreateTableAsSelect =>
        case other => throw new IllegalArgumentException(s"$Keyword creates a table only, not ${other.nodeName}")
      }
      val before = running.get
      running.set(true)
      try session.sql(text).collect()
      finally running.set(before)
      Seq(Row("created"))
    }
  }
}
