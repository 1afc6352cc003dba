package io.mvengine

import scala.jdk.CollectionConverters._
import scala.util.Try

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.analysis.{ResolvedIdentifier, ResolvedTable}
import org.apache.spark.sql.catalyst.plans.logical.{AppendData, LogicalPlan, OverwriteByExpression,
  OverwritePartitionsDynamic, ReplaceTable, ReplaceTableAsSelect}
import org.apache.spark.sql.connector.catalog.TableCatalog
import org.apache.spark.sql.delta.DeltaLog
import org.apache.spark.sql.delta.commands.{DeleteCommand, MergeIntoCommand, RestoreTableCommand,
  TruncateDeltaTableCommand, UpdateCommand, WriteIntoDelta}
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation

/**
 * A view that only its refresh writes: INSERT, INSERT OVERWRITE, UPDATE, DELETE, MERGE, TRUNCATE,
 * RESTORE, REPLACE TABLE and DataFrame writes into a view's table, its `__late` or its `__open` table fail with
 * MV_VIEW_READ_ONLY before they run, however they were written (SQL, DataFrame writer, DeltaTable
 * API), since all of them are analysed plans. Maintenance (OPTIMIZE, VACUUM, ANALYZE, ALTER TABLE
 * ... SET TBLPROPERTIES) and DROP TABLE pass.
 *
 * The refresh's own commit (RefreshCommit) is no analysed write; the one write of the maintainer
 * that is, appending late rows, sets [[EngineWrite]] in the refresh's own session. A write that
 * gets around this rule (a path-based write, another engine) is caught at the next refresh instead
 * (DeltaTables.outsideChange).
 */
case class ReadOnlyViews(spark: SparkSession) extends (LogicalPlan => Unit) {

  override def apply(plan: LogicalPlan): Unit =
    if (!spark.conf.getOption(ReadOnlyViews.EngineWrite).contains("true")) plan.foreach { node =>
      ReadOnlyViews.target(node).foreach { case (table, configuration, operation) =>
        ReadOnlyViews.owner(spark, table, configuration)
          .foreach(view => throw WindowErrors.viewReadOnly(table, view, operation))
      }
    }
}

object ReadOnlyViews {
  /** Set to "true" in the refresh's own session around its late-row append. */
  val EngineWrite = "mv.internal.engineWrite"
  val DefinitionProperty = "mv.definition"
  /** The tables beside a view that only its refresh writes: late rows, open windows. */
  val Suffixes = Seq("__late", "__open")

  /** The table `node` writes: its name, its Delta configuration (lazily) and the operation. */
  private def target(node: LogicalPlan): Option[(String, () => Map[String, String], String)] = node match {
    case w: AppendData => v2(w.table, "INSERT")
    case w: OverwriteByExpression => v2(w.table, "INSERT OVERWRITE")
    case w: OverwritePartitionsDynamic => v2(w.table, "INSERT OVERWRITE")
    case d: DeleteCommand => delta(d.catalogTable.map(_.identifier.unquotedString), d.deltaLog, "DELETE")
    case u: UpdateCommand => delta(u.catalogTable.map(_.identifier.unquotedString), u.tahoeFileIndex.deltaLog, "UPDATE")
    case m: MergeIntoCommand => delta(m.catalogTable.map(_.identifier.unquotedString), m.targetFileIndex.deltaLog, "MERGE")
    case w: WriteIntoDelta => delta(w.catalogTableOpt.map(_.identifier.unquotedString), w.deltaLog, "a write")
    case t: TruncateDeltaTableCommand => t.child match {
      case ResolvedTable(_, _, table, _) => Some((table.name, () => table.properties.asScala.toMap, "TRUNCATE"))
      case _ => None
    }
    case r: RestoreTableCommand =>  // its table is the version restored to: read the current one's log
      delta(Some(r.sourceTable.name), r.sourceTable.deltaLog, "RESTORE")
    case r: ReplaceTableAsSelect => existing(r.name, "REPLACE TABLE")
    case r: ReplaceTable => existing(r.name, "REPLACE TABLE")
    case _ => None
  }

  private def v2(table: LogicalPlan, operation: String) = table match {
    case r: DataSourceV2Relation => Some((r.table.name, () => r.table.properties.asScala.toMap, operation))
    case _ => None
  }

  private def delta(name: Option[String], log: DeltaLog, operation: String) =
    Some((name.getOrElse(log.dataPath.toString), () => log.unsafeVolatileSnapshot.metadata.configuration, operation))

  private def existing(name: LogicalPlan, operation: String) = name match {
    case ResolvedIdentifier(catalog: TableCatalog, ident) => Try(catalog.loadTable(ident)).toOption
      .map(table => (table.name, () => table.properties.asScala.toMap, operation))
    case _ => None
  }

  /** The view `table` belongs to: itself if its properties hold a definition, or the view of a table beside it. */
  private def owner(spark: SparkSession, table: String, configuration: () => Map[String, String]): Option[String] = {
    val name = table.split('.').last.stripPrefix("`").stripSuffix("`")
    val suffix = Suffixes.find(name.toLowerCase.endsWith)
    if (suffix.isDefined) {
      val viewName = table.stripSuffix("`").dropRight(suffix.get.length).stripSuffix("`")
      Try(DeltaTables.catalogTable(spark.asInstanceOf[org.apache.spark.sql.classic.SparkSession], viewName)).toOption
        .filter(view => DeltaLog.forTable(spark.asInstanceOf[org.apache.spark.sql.classic.SparkSession], view)
          .unsafeVolatileSnapshot.metadata.configuration.contains(DefinitionProperty))
        .map(_ => viewName)
    } else if (configuration().contains(DefinitionProperty)) Some(table)
    else None
  }
}
