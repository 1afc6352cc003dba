package io.mvengine

import com.fasterxml.jackson.databind.ObjectMapper

import org.apache.spark.sql.{Row, SparkSession}
import org.apache.spark.sql.classic
import org.apache.spark.sql.catalyst.expressions.Attribute
import org.apache.spark.sql.catalyst.plans.logical.CreateTable
import org.apache.spark.sql.catalyst.util.CharVarcharUtils
import org.apache.spark.sql.execution.command.LeafRunnableCommand
import org.apache.spark.sql.types.{ArrayType, DataType, MapType, StringType, StructType}

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
 * runs `CREATE TABLE [IF NOT EXISTS] v__late (<the query's columns>) USING delta ...`: the columns
 * are the analysed query's, as CREATE TABLE ... AS SELECT would make them (nullable, CHAR and
 * VARCHAR kept, comments kept), but no Spark job writes the empty result (CTAS ran one: 0.2-0.4 s
 * of a tiny view's CREATE). It only creates: the statement must parse as CREATE TABLE (never
 * REPLACE, never AS SELECT), which fails on, or with IF NOT EXISTS leaves alone, a table that
 * exists; so calling it gains a user nothing that CREATE TABLE does not give.
 */
object EngineCreate {

  private val Keyword = "MV_CREATE_TABLE"
  private val running: ThreadLocal[java.lang.Boolean] = ThreadLocal.withInitial(() => java.lang.Boolean.FALSE)

  /** Whether this thread is inside an [[EngineCreateCommand]]'s CREATE. */
  def isRunning: Boolean = running.get

  case class Spec(table: String, query: String, clauses: String, ifNotExists: Boolean) {
    /** The CREATE TABLE statement, with the columns of `query` analysed in `session`. */
    def statement(session: SparkSession): String = {
      val schema = CharVarcharUtils.getRawSchema(session.sql(s"SELECT * FROM ($query)").schema)
      s"CREATE TABLE ${if (ifNotExists) "IF NOT EXISTS " else ""}$table (${nullable(schema).toDDL}) $clauses"
    }
  }

  /** `schema` with every field, nested ones too, nullable (as CREATE TABLE ... AS SELECT makes a table's). */
  private def nullable(schema: StructType): StructType = StructType(schema.fields.map(f =>
    f.copy(dataType = nullable(f.dataType), nullable = true)))

  private def nullable(dataType: DataType): DataType = dataType match {
    case s: StructType => nullable(s)
    case a: ArrayType => ArrayType(nullable(a.elementType), containsNull = true)
    case m: MapType => MapType(nullable(m.keyType), nullable(m.valueType), valueContainsNull = true)
    case other => other
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
      val text = spec.statement(session)
      session.asInstanceOf[classic.SparkSession].sessionState.sqlParser.parsePlan(text) match {
        case _: CreateTable =>
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
