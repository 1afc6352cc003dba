package io.mvengine

import scala.jdk.CollectionConverters._
import scala.util.control.NonFatal

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}

import org.apache.spark.sql.{classic, AnalysisException, Row, SparkSession}
import org.apache.spark.sql.catalyst.expressions.{Attribute, AttributeReference}
import org.apache.spark.sql.execution.command.LeafRunnableCommand
import org.apache.spark.sql.types.{DataType, DoubleType, LongType, StringType, StructType}

/**
 * The materialized-view statements as Spark SQL: the parser recognizes them by their leading
 * words and plans a [[MaterializedViewCommand]], which hands the statement's text to the
 * maintainer (the Python side, mv/maintainer.py) registered in this JVM:
 * {{{
 *   spark.sql("REFRESH MATERIALIZED VIEW hourly")        -- PySpark, %sql cells, any Connect client
 * }}}
 * Only the leading words are read here; the maintainer parses the whole statement, so its syntax
 * errors (MV_STATEMENT_SYNTAX, with the fragment pointed at) are the same from every client.
 * Spark 4.2's own CREATE MATERIALIZED VIEW (Declarative Pipelines) is taken over only in sessions
 * with this extension. See docs/statements.md.
 */
object MaterializedViewStatements {

  /** A statement kind: its leading words (the same as mv/statements.py's) and its result columns. */
  case class Kind(name: String, output: StructType)

  private val status = new StructType().add("status", StringType)
  private val properties = new StructType().add("property", StringType).add("value", StringType)
  /** REFRESH's row: mv/run.py's Outcome, as mv/commands.py gives it. */
  val outcome: StructType = StructType.fromDDL(
    "view STRING, technique STRING, reason STRING, refresh_id BIGINT, rows_read BIGINT, rows_inserted BIGINT, " +
      "rows_updated BIGINT, rows_deleted BIGINT, late_rows BIGINT, groups_combined BIGINT, " +
      "groups_recomputed BIGINT, duration_s DOUBLE")

  private val kinds: Seq[(Seq[String], Kind)] = Seq(
    Seq("CREATE", "MATERIALIZED", "VIEW") -> Kind("CREATE", status),
    Seq("CREATE", "OR", "REPLACE", "MATERIALIZED", "VIEW") -> Kind("CREATE", status),
    Seq("REFRESH", "MATERIALIZED", "VIEW") -> Kind("REFRESH", outcome),
    Seq("DROP", "MATERIALIZED", "VIEW") -> Kind("DROP", status),
    Seq("SHOW", "MATERIALIZED", "VIEWS") -> Kind("SHOW", new StructType().add("name", StringType)),
    Seq("DESCRIBE", "MATERIALIZED", "VIEW") -> Kind("DESCRIBE", properties),
    Seq("DESC", "MATERIALIZED", "VIEW") -> Kind("DESCRIBE", properties),
    Seq("EXPLAIN", "MATERIALIZED", "VIEW") -> Kind("EXPLAIN", properties),
    Seq("EXPLAIN", "CREATE", "MATERIALIZED", "VIEW") -> Kind("EXPLAIN", properties),
    Seq("EXPLAIN", "CREATE", "OR", "REPLACE", "MATERIALIZED", "VIEW") -> Kind("EXPLAIN", properties))

  /** The command for `sqlText` if it is a materialized-view statement. */
  def parse(sqlText: String): Option[MaterializedViewCommand] = {
    val words = FlinkWindowSyntax.tokenize(sqlText).iterator.filterNot(_.isSpace).take(6).toSeq
    kinds.collectFirst {
      case (leading, kind) if leading.size <= words.size &&
          leading.zip(words).forall { case (word, token) => token.is(word) } => MaterializedViewCommand(kind, sqlText)
    }
  }

  /** Turns the maintainer's answer into rows of `output`, or throws the error it reports. */
  private[mvengine] def rows(answer: AnyRef, output: StructType): Seq[Row] = answer match {
    case error: Throwable => throw error  // a Spark error met while running the statement, as Spark raised it
    case json: String =>
      val tree = new ObjectMapper().readTree(json)
      if (tree.has("error_class")) throw Maintainer.error(tree)
      tree.get("rows").elements().asScala.map { row =>
        Row.fromSeq(output.fields.toSeq.zipWithIndex.map { case (field, i) => value(row.get(i), field.dataType) })
      }.toSeq
    case other => throw Maintainer.internal(s"the maintainer answered ${String.valueOf(other)}")
  }

  private def value(node: JsonNode, dataType: DataType): Any =
    if (node == null || node.isNull) null
    else dataType match {
      case LongType => node.asLong
      case DoubleType => node.asDouble
      case _ => node.asText
    }
}

/** One materialized-view statement, run by the registered maintainer. */
case class MaterializedViewCommand(kind: MaterializedViewStatements.Kind, text: String) extends LeafRunnableCommand {
  override val output: Seq[Attribute] =
    kind.output.fields.toSeq.map(f => AttributeReference(f.name, f.dataType, nullable = true)())

  override def run(session: SparkSession): Seq[Row] =
    MaterializedViewStatements.rows(Maintainer.run(session, text), kind.output)

  override def simpleString(maxFields: Int): String = s"MaterializedViewCommand ${kind.name}"
}

/**
 * What runs the statements: the Python maintainer implements this interface and registers
 * itself (PySpark calls Python from the JVM this way for foreachBatch and query listeners).
 * `run` answers JSON, `{"rows": [[...], ...]}` or `{"error_class": ..., "text": ..., "params": {...}}`,
 * or the Spark error it met (a Throwable).
 */
trait MaintainerHandler {
  def run(session: SparkSession, statement: String): AnyRef
}

/** The maintainer registered in this JVM, if any: one per driver. */
object Maintainer {
  @volatile private var handler: Option[MaintainerHandler] = None

  def register(maintainer: MaintainerHandler): Unit = { handler = Some(maintainer) }
  def unregister(): Unit = { handler = None }
  def isRegistered: Boolean = handler.isDefined

  def run(session: SparkSession, statement: String): AnyRef = {
    val maintainer = handler.getOrElse(throw notRunning("no maintainer is registered in this Spark driver"))
    try maintainer.run(session, statement)
    catch {
      case NonFatal(e) if e.getClass.getName.startsWith("py4j.") =>  // the Python process is gone
        unregister()
        throw notRunning(s"the maintainer stopped answering (${e.getClass.getSimpleName})")
    }
  }

  private def notRunning(why: String): AnalysisException = WindowErrors.maintainerNotRunning(why)

  /** `body` with `session` the active one: the maintainer's calls into the JVM arrive on py4j's
   *  threads, whose active session is not the one the call is for (DeltaTables.tablesJson). */
  def asActive[T](session: classic.SparkSession)(body: => T): T = {
    val before = classic.SparkSession.getActiveSession
    classic.SparkSession.setActiveSession(session)
    try body
    finally before.fold(classic.SparkSession.clearActiveSession())(classic.SparkSession.setActiveSession)
  }

  private[mvengine] def internal(what: String): AnalysisException = notRunning(s"it failed: $what")

  /** The maintainer's error, as Spark raises errors: its class, message and parameters. */
  private[mvengine] def error(tree: JsonNode): AnalysisException = {
    val params = Option(tree.get("params")).map(_.fields().asScala.map(e => e.getKey -> e.getValue.asText).toMap)
      .getOrElse(Map.empty)
    WindowErrors.fromMaintainer(tree.get("error_class").asText, tree.get("text").asText, params)
  }
}
