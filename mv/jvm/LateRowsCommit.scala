package io.mvengine

import com.fasterxml.jackson.databind.ObjectMapper

import org.apache.spark.sql.{DataFrame, Row, SaveMode}
import org.apache.spark.sql.catalyst.expressions.Attribute
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.delta.{DeltaOperations, OptimisticTransaction}
import org.apache.spark.sql.delta.schema.SchemaMergingUtils
import org.apache.spark.sql.execution.command.LeafRunnableCommand
import org.apache.spark.sql.functions.{col, lit}
import org.apache.spark.sql.types.{ArrayType, DataType, LongType, MapType, StringType, StructType}

/**
 * The late rows' commit of a refresh: the changes that came too late for their window, appended
 * to the view's `<view>__late` table before the view's own commit (RefreshCommit), at most once
 * per refresh and part (the index of the window function whose source they came from).
 *
 * Once, without Delta transaction ids, whose check makes Delta 4.4 rebuild the table's whole state
 * (two Spark jobs per append): the table property `mv.late.written` holds the newest
 * `refresh_id:part` appended, set by the same commit, and an append that is not past it writes
 * nothing (status `written`). The commit also sets `mv.late.note`, which names the refresh and
 * the source versions it read to: a rerun of a refresh interrupted after this commit reads to the
 * same versions (mv/history.py, pinned_targets), from the table's properties, which maintenance
 * commits and log cleanup cannot remove. Changing the table's metadata makes Delta fail a
 * concurrent commit that changes it too: of two refreshes of one view racing, one appends and
 * the other gets `conflict`. A late table written before these properties is checked once more
 * by the transaction id the engine used then (`legacy_app_id`, the refresh id as its version).
 * A part from another source adds its columns to the table, as a mergeSchema append would.
 *
 * {{{
 *   MV_COMMIT_LATE_ROWS '{"table": "v__late", "rows": "tmp", "refresh_id": 8, "part": 0,
 *                         "note": "{...}", "legacy_app_id": "mv-late:<view id>:0"}'
 * }}}
 */
object LateRowsCommit {

  val WrittenProperty = "mv.late.written"
  val NoteProperty = "mv.late.note"
  private val Keyword = "MV_COMMIT_LATE_ROWS"

  case class Spec(table: String, rows: String, refreshId: Long, part: Long, note: String, legacyAppId: String)

  /** The statement, if `sqlText` is one: its spec, from the string literal after the keyword. */
  def parse(sqlText: String, literal: String => String): Option[LateRowsCommand] = {
    val text = sqlText.trim
    if (!text.regionMatches(true, 0, Keyword, 0, Keyword.length)) return None
    val json = new ObjectMapper().readTree(literal(text.substring(Keyword.length).trim))
    Some(LateRowsCommand(Spec(json.get("table").asText, json.get("rows").asText, json.get("refresh_id").asLong,
      json.get("part").asLong, json.get("note").asText, json.get("legacy_app_id").asText)))
  }

  case class LateRowsCommand(spec: Spec) extends LeafRunnableCommand {
    override val output: Seq[Attribute] =
      RefreshCommit.resultColumns("status" -> StringType, "version" -> LongType, "num_rows" -> LongType)

    override def run(session: org.apache.spark.sql.SparkSession): Seq[Row] =
      LateRowsCommit.run(session.asInstanceOf[SparkSession], spec)
  }

  def run(spark: SparkSession, spec: Spec): Seq[Row] =
    RefreshCommit.inTransaction(spark, spec.table, Seq(Row("conflict", -1L, 0L))) { (txn, _) =>
      if (written(txn, spec)) Seq(Row("written", txn.readVersion, 0L))  // a rerun of this refresh: appended once
      else {
        val data = spark.table(spec.rows)
        val schema = SchemaMergingUtils.mergeSchemas(txn.metadata.schema, nullable(data.schema).asInstanceOf[StructType])
        txn.updateMetadata(txn.metadata.copy(schemaString = schema.json, configuration = txn.metadata.configuration
          ++ Map(WrittenProperty -> s"${spec.refreshId}:${spec.part}", NoteProperty -> spec.note)))
        val actions = txn.writeFiles(aligned(data, schema))
        // The note as the commit's user metadata by the operation, not the session's setting, which
        // every other commit of the session would see while it is set.
        val version = txn.commit(actions, DeltaOperations.Write(SaveMode.Append, userMetadata = Some(spec.note)))
        Seq(Row("committed", version, RefreshCommit.appended(actions)))
      }
    }

  /** Whether this refresh's part is appended already: the property, or on an older table its transaction id. */
  private def written(txn: OptimisticTransaction, spec: Spec): Boolean =
    txn.metadata.configuration.get(WrittenProperty).map(_.split(":").map(_.toLong)) match {
      case Some(Array(refreshId, part)) => refreshId > spec.refreshId || (refreshId == spec.refreshId && part >= spec.part)
      case _ => txn.txnVersion(spec.legacyAppId) >= spec.refreshId
    }

  /** The rows with the table's columns in its order, a column they lack as nulls. */
  private def aligned(data: DataFrame, schema: StructType): DataFrame = {
    val present = data.columns.map(c => c.toLowerCase -> c).toMap
    data.select(schema.fields.toSeq.map { f =>
      present.get(f.name.toLowerCase).map(c => col(RefreshCommit.quoted(c))).getOrElse(lit(null).cast(f.dataType)).as(f.name)
    }: _*)
  }

  /** A table's columns are nullable, as Delta's own writes make them. */
  private def nullable(dataType: DataType): DataType = dataType match {
    case s: StructType => StructType(s.fields.map(f => f.copy(dataType = nullable(f.dataType), nullable = true)))
    case a: ArrayType => ArrayType(nullable(a.elementType), containsNull = true)
    case m: MapType => MapType(nullable(m.keyType), nullable(m.valueType), valueContainsNull = true)
    case other => other
  }
}
