package io.mvengine

import scala.jdk.CollectionConverters._
import scala.util.Try

import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.analysis.{ResolvedIdentifier, ResolvedTable}
import org.apache.spark.sql.catalyst.plans.logical.{AlterTableCommand, AppendData, LogicalPlan,
  OverwriteByExpression, OverwritePartitionsDynamic, ReplaceTable, ReplaceTableAsSelect}
import org.apache.spark.sql.catalyst.util.CaseInsensitiveMap
import org.apache.spark.sql.connector.catalog.{TableCatalog, TableChange}
import org.apache.spark.sql.delta.DeltaLog
import org.apache.spark.sql.delta.commands.{DeleteCommand, MergeIntoCommand, RestoreTableCommand,
  TruncateDeltaTableCommand, UpdateCommand, WriteIntoDelta}
import org.apache.spark.sql.delta.sources.DeltaDataSource
import org.apache.spark.sql.execution.datasources.SaveIntoDataSourceCommand
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation

/**
 * A view that only its refresh writes: INSERT, INSERT OVERWRITE, UPDATE, DELETE, MERGE, TRUNCATE,
 * RESTORE, REPLACE TABLE and DataFrame writes (by name, or by path: `save(path)`) into a view's
 * table, its `__late` or its `__open` table fail with MV_VIEW_READ_ONLY before they run, however
 * they were written (SQL, DataFrame writer, DeltaTable API), since all of them are analysed plans.
 * So does an ALTER TABLE that changes their columns (ADD, DROP, RENAME, ALTER COLUMN's type,
 * nullability or position, REPLACE COLUMNS), after which no
 * refresh could write them, or that sets or unsets one of the engine's own properties (`mv.*`),
 * which only the refresh's commit changes. Maintenance (OPTIMIZE, VACUUM, ANALYZE, column comments,
 * other table properties) and DROP TABLE pass:
 * {{{
 *   ALTER TABLE v ADD COLUMN note STRING        -- MV_VIEW_READ_ONLY
 *   ALTER TABLE v SET TBLPROPERTIES ('team' = 'bids')   -- passes
 * }}}
 *
 * The refresh's own commits (RefreshCommit, LateRowsCommit) are no analysed writes; the one of the
 * engine that is, creating a view's tables, passes only on the thread of its own command while it
 * runs ([[EngineCreate.isRunning]]): no session setting switches the rule off. A write by a path
 * (`delta.`/warehouse/v__late``) is known by the table's own properties (`mv.definition`, or
 * `mv.beside` naming the view). A write that gets around this rule (another engine) is caught at
 * the next refresh instead (DeltaTables.outsideChange).
 */
case class ReadOnlyViews(spark: SparkSession) extends (LogicalPlan => Unit) {

  override def apply(plan: LogicalPlan): Unit =
    if (!EngineCreate.isRunning) plan.foreach { node =>
      ReadOnlyViews.target(spark, node).foreach { case (table, configuration, operation) =>
        ReadOnlyViews.owner(spark, table, configuration)
          .foreach(view => throw WindowErrors.viewReadOnly(table, view, operation))
      }
    }
}

object ReadOnlyViews {
  val DefinitionProperty = "mv.definition"
  /** The tables beside a view that only its refresh writes: late rows, open windows. */
  val Suffixes = Seq("__late", "__open")
  /** On a table beside a view (mv/history.py creates them so): the view's name. */
  val BesideProperty = "mv.beside"
  /** Properties only the engine's commits give a table beside a view created before BesideProperty:
   *  a late table's, and an open-window table's refresh state. */
  private val SideMarks = Seq(LateRowsCommit.WrittenProperty, RefreshCommit.RefreshIdProperty)

  /** The table `node` writes: its name, its Delta configuration (lazily) and the operation. */
  private def target(spark: SparkSession, node: LogicalPlan)
      : Option[(String, () => Map[String, String], String)] = node match {
    case w: AppendData => v2(w.table, "INSERT")
    case w: OverwriteByExpression => v2(w.table, "INSERT OVERWRITE")
    case w: OverwritePartitionsDynamic => v2(w.table, "INSERT OVERWRITE")
    case d: DeleteCommand => delta(d.catalogTable.map(_.identifier.quotedString), d.deltaLog, "DELETE")
    case u: UpdateCommand => delta(u.catalogTable.map(_.identifier.quotedString), u.tahoeFileIndex.deltaLog, "UPDATE")
    case m: MergeIntoCommand => delta(m.catalogTable.map(_.identifier.quotedString), m.targetFileIndex.deltaLog, "MERGE")
    case w: WriteIntoDelta => delta(w.catalogTableOpt.map(_.identifier.quotedString), w.deltaLog, "a write")
    case t: TruncateDeltaTableCommand => t.child match {
      case ResolvedTable(_, _, table, _) => Some((table.name, () => table.properties.asScala.toMap, "TRUNCATE"))
      case _ => None
    }
    case r: RestoreTableCommand =>  // its table is the version restored to: read the current one's log
      delta(Some(r.sourceTable.name), r.sourceTable.deltaLog, "RESTORE")
    case r: ReplaceTableAsSelect => existing(r.name, "REPLACE TABLE")
    case r: ReplaceTable => existing(r.name, "REPLACE TABLE")
    case a: AlterTableCommand => altered(a)
    case w: SaveIntoDataSourceCommand if w.dataSource.isInstanceOf[DeltaDataSource] => saved(spark, w)
    case _ => None
  }

  /** The Delta table a DataFrame writer's `save(path)` writes, if it exists. */
  private def saved(spark: SparkSession, w: SaveIntoDataSourceCommand) =
    CaseInsensitiveMap(w.options).get("path")
      .flatMap(path => Try(DeltaLog.forTable(spark.asInstanceOf[org.apache.spark.sql.classic.SparkSession], path)).toOption)
      .filter(_.tableExists).flatMap(log => delta(None, log, "a write"))

  /** The table an ALTER TABLE changes in a way only the engine may: its columns, or its `mv.*` properties. */
  private def altered(alter: AlterTableCommand) = alter.table match {
    case ResolvedTable(_, _, table, _) =>
      Try(alter.changes).getOrElse(Nil).collectFirst(Function.unlift(forbidden))
        .map(what => (table.name, () => table.properties.asScala.toMap, s"ALTER TABLE ... $what"))
    case _ => None
  }

  /** What a change does, if only the engine may do it; a column's comment is the user's. */
  private def forbidden(change: TableChange): Option[String] = change match {
    case _: TableChange.UpdateColumnComment => None
    case c: TableChange.ColumnChange => Some(columnChange(c))
    case p: TableChange.SetProperty if engineProperty(p.property) => Some(s"SET TBLPROPERTIES ('${p.property}')")
    case p: TableChange.RemoveProperty if engineProperty(p.property) => Some(s"UNSET TBLPROPERTIES ('${p.property}')")
    case _ => None
  }

  private def columnChange(change: TableChange.ColumnChange): String = change match {
    case _: TableChange.AddColumn => "ADD COLUMN"
    case _: TableChange.DeleteColumn => "DROP COLUMN"
    case _: TableChange.RenameColumn => "RENAME COLUMN"
    case _: TableChange.UpdateColumnType => "ALTER COLUMN ... TYPE"
    case c => s"ALTER COLUMN (${c.getClass.getSimpleName})"
  }

  /** The engine's own table properties (`mv.definition`, `mv.state`, `mv.late.written`, ...). */
  private def engineProperty(key: String): Boolean = key.toLowerCase.startsWith("mv.")

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

  /** The view `table` belongs to: itself if its properties hold a definition, or the view of a
   *  table beside it, known by its name (`<view>__late`) or, named by a path, by its own properties. */
  private def owner(spark: SparkSession, table: String, configuration: () => Map[String, String]): Option[String] = {
    // Names arrive quoted (`cat`.`db`.`t`) or, from a path-based write, as a path: parsed, not split.
    val parts = Try(spark.sessionState.sqlParser.parseMultipartIdentifier(table)).getOrElse(Seq(table))
    val byName = Suffixes.find(parts.last.toLowerCase.endsWith).flatMap { suffix =>
      val viewName = (parts.init :+ parts.last.dropRight(suffix.length))
        .map(p => "`" + p.replace("`", "``") + "`").mkString(".")
      Try(DeltaTables.catalogTable(spark.asInstanceOf[org.apache.spark.sql.classic.SparkSession], viewName)).toOption
        .filter(view => DeltaLog.forTable(spark.asInstanceOf[org.apache.spark.sql.classic.SparkSession], view)
          .unsafeVolatileSnapshot.metadata.configuration.contains(DefinitionProperty))
        .map(_ => viewName)
    }
    byName.orElse {
      val properties = configuration()
      if (properties.contains(DefinitionProperty)) Some(table)
      else properties.get(BesideProperty).orElse(if (SideMarks.exists(properties.contains)) Some(table) else None)
    }
  }
}
