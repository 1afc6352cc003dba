package io.mvengine

import java.sql.Timestamp

import scala.util.Try

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}

import org.apache.spark.sql.Row
import org.apache.spark.sql.catalyst.{FunctionIdentifier, TableIdentifier}
import org.apache.spark.sql.catalyst.analysis.{NoSuchDatabaseException, NoSuchNamespaceException, NoSuchTableException,
  UnresolvedRelation, UnresolvedTableValuedFunction}
import org.apache.spark.sql.catalyst.catalog.CatalogTable
import org.apache.spark.sql.catalyst.expressions.{AttributeReference, Expression, ExpressionInfo, GenericRowWithSchema,
  Literal}
import org.apache.spark.sql.catalyst.plans.logical.{LocalRelation, LogicalPlan}
import org.apache.spark.sql.catalyst.types.DataTypeUtils
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.delta.{DeltaLog, DeltaTableUtils, Snapshot}
import org.apache.spark.sql.delta.actions.{Action, AddCDCFile, AddFile, CommitInfo, RemoveFile}
import org.apache.spark.sql.delta.util.FileNames
import org.apache.spark.sql.types.{BooleanType, DataType, DoubleType, LongType, MapType, StringType, StructType,
  TimestampType}

/**
 * What the maintainer reads of Delta tables, from Delta's log and its cached snapshots instead of
 * DESCRIBE round trips (which rebuild a table's state, a Spark job, to report what it does not need):
 * {{{
 *   SELECT * FROM mv_delta_tables('bids', 'hourly')      -- name, version, id, changed_outside, small,
 *                                                         -- properties, exists, bytes, schema
 *                                                         -- (Delta's schema JSON): a row per name
 *   SELECT * FROM mv_delta_tables('bids@7')               -- and change_bytes: what its change feed
 *                                                         -- after version 7 holds, change_retracts:
 *                                                         -- whether it takes rows away
 *   SELECT * FROM mv_refresh_history                      -- every refresh of the database's views
 *   SELECT * FROM mv_refresh_history('db', 'hourly')      -- one view's
 *   SELECT * FROM mv_refresh_history('db', '', '1')       -- each view's latest refresh
 * }}}
 * A refresh's history row is its own commit of the view (mv/jvm/RefreshCommit.scala): the
 * commit's userMetadata holds what the refresh did, its operation metrics the rows written, and
 * its time ends the refresh's duration. `mv_refresh_history`, written as a table name, means the
 * history of the views of the current database (or of the database it is qualified with).
 */
object DeltaTables {

  val tablesFunction = "mv_delta_tables"
  val historyFunction = "mv_refresh_history"
  private val StateKey = "mv_state"

  private def registration(name: String, usage: String, plan: Seq[String] => LogicalPlan)
      : (FunctionIdentifier, ExpressionInfo, Seq[Expression] => LogicalPlan) = (
    FunctionIdentifier(name),
    new ExpressionInfo(getClass.getName, null, name, usage, ""),
    (args: Seq[Expression]) => plan(args.map {
      case l: Literal if l.dataType == StringType && l.value != null => l.toString
      case _ => throw new IllegalArgumentException(s"$name takes string literals")
    }))

  def tablesRegistration: (FunctionIdentifier, ExpressionInfo, Seq[Expression] => LogicalPlan) =
    registration(tablesFunction, s"$tablesFunction(table, ...) - Each Delta table's version and id.", tables)

  def historyRegistration: (FunctionIdentifier, ExpressionInfo, Seq[Expression] => LogicalPlan) =
    registration(historyFunction,
      s"$historyFunction([database[, view[, newest]]]) - The refreshes of materialized views (each view's newest).",
      history)

  /** `mv_refresh_history` (or `db.mv_refresh_history`) used as a table: the table function instead. */
  def asTableFunction(plan: LogicalPlan): LogicalPlan = plan.resolveOperatorsUp {
    case r: UnresolvedRelation if r.multipartIdentifier.lastOption.exists(_.equalsIgnoreCase(historyFunction)) &&
        r.multipartIdentifier.size <= 2 =>
      UnresolvedTableValuedFunction(Seq(historyFunction), r.multipartIdentifier.dropRight(1).map(Literal(_)))
  }

  private def output(fields: (String, DataType)*): Seq[AttributeReference] =
    fields.map { case (name, dataType) => AttributeReference(name, dataType)() }

  /** A table of the session catalog by its name in SQL: `t`, `db.t` or `spark_catalog.db.t`. */
  def catalogTable(spark: SparkSession, name: String): CatalogTable = {
    val parts = spark.sessionState.sqlParser.parseMultipartIdentifier(name)
    spark.sessionState.catalog.getTableMetadata(
      TableIdentifier(parts.last, parts.dropRight(1).lastOption, parts.dropRight(2).lastOption))
  }

  private val VersionAfter = "(?s)(.*)@([0-9]+)".r

  private def tables(args: Seq[String]): LogicalPlan =
    LocalRelation.fromExternalRows(DataTypeUtils.toAttributes(TablesSchema), tableRows(SparkSession.active, args))

  /**
   * `mv_delta_tables`' rows as a JSON array of objects by column name, for the maintainer in the
   * driver's own Python process, which calls it through py4j (mv/delta_tables.py): a SQL statement
   * costs a parse, an analysis and a Spark SQL execution, about 20 ms, for rows read from the log
   * in a few. A Spark Connect client goes by the table function.
   * {{{
   *   DeltaTables.tablesJson(spark, "[\"bids@7\", \"hourly\"]")  ==  [{"name": "bids", "version": 9, ...}, ...]
   * }}}
   */
  def tablesJson(spark: SparkSession, argsJson: String): String = Maintainer.asActive(spark) {
    val args = new ObjectMapper().readValue(argsJson, classOf[Array[String]]).toSeq
    tableRows(spark, args).map(r => new GenericRowWithSchema(r.toSeq.toArray, TablesSchema).json)
      .mkString("[", ",", "]")
  }

  private val TablesSchema: StructType = new StructType()
    .add("name", StringType).add("version", LongType).add("id", StringType).add("changed_outside", LongType)
    .add("small", BooleanType).add("properties", MapType(StringType, StringType)).add("exists", BooleanType)
    .add("bytes", LongType).add("change_bytes", LongType).add("schema", StringType)
    .add("change_retracts", BooleanType).add("committed_at", LongType)

  private def tableRows(spark: SparkSession, args: Seq[String]): Seq[Row] =
    args.map { arg =>
      val (name, after) = arg match {  // `name@version`; an `@` inside a quoted name is the name's
        case VersionAfter(table, version) => (table, Some(version.toLong))
        case _ => (arg, None)
      }
      val table = try Some(catalogTable(spark, name)) catch {
        case _: NoSuchTableException | _: NoSuchDatabaseException | _: NoSuchNamespaceException => None
      }
      table match {
        case None => Row(name, -1L, null, null, false, null, false, null, null, null, null, null)
        case Some(t) if !DeltaTableUtils.isDeltaTable(t) =>
          Row(name, -1L, null, null, false, t.properties, true, null, null, null, null, null)
        case Some(t) =>
          val log = DeltaLog.forTable(spark, t)
          val snapshot = log.update(catalogTableOpt = Some(t))
          Row(name, snapshot.version, snapshot.metadata.id, outsideChange(log, snapshot).map(Long.box).orNull,
            SmallDeltaScans.listed(snapshot).isDefined, snapshot.metadata.configuration, true,
            tableBytes(log, snapshot).map(Long.box).orNull,
            after.flatMap(changeBytes(log, _, snapshot.version)).map(Long.box).orNull, snapshot.metadata.schemaString,
            after.flatMap(changeRetracts(log, _, snapshot.version)).map(Boolean.box).orNull,
            committedAt(log, snapshot).map(Long.box).orNull)
      }
    }

  /** A view's newest commit's time (its commit info's, in epoch milliseconds, as the refresh history
   *  reads it): the end of the refresh that wrote it, if a refresh did. None for other tables. */
  private def committedAt(log: DeltaLog, snapshot: Snapshot): Option[Long] =
    if (!snapshot.metadata.configuration.contains(ReadOnlyViews.DefinitionProperty)) None
    else Try(log.getChanges(snapshot.version).take(1).toSeq.flatMap(_._2)
      .collectFirst { case c: CommitInfo => c.timestamp.getTime }).toOption.flatten

  /**
   * The table's bytes, from its snapshot's checksum, else its version's checksum file read now (a
   * snapshot Delta makes as it commits can keep none), else the snapshot's state, reconstructed
   * from the log (a table another writer left without checksums; a scan of it reconstructs the
   * same state, which the snapshot then keeps). Never unknown for an existing table: AUTO's
   * estimate before reading needs it, and without it (a CI run, cause not reproduced) a change
   * larger than a full refresh was read, then weighed as a tie of planned bytes and run
   * incrementally.
   */
  private def tableBytes(log: DeltaLog, snapshot: Snapshot): Option[Long] =
    snapshot.checksumOpt.map(_.tableSizeBytes).orElse(Try {
      val file = FileNames.checksumFile(log.logPath, snapshot.version)
      val in = file.getFileSystem(log.newDeltaHadoopConf()).open(file)
      try Option(new ObjectMapper().readTree(in).get("tableSizeBytes")).map(_.asLong) finally in.close()
    }.toOption.flatten).orElse(Some(snapshot.sizeInBytes))

  /**
   * The bytes of the files the change feed of versions after `after` up to `latest` reads, from the
   * log: a version's change files where it wrote some, else its added and removed data files (as
   * Delta's change feed reads them). None when a commit is gone (cleaned up) or a size is unknown.
   */
  private def changeBytes(log: DeltaLog, after: Long, latest: Long): Option[Long] =
    if (after >= latest) Some(0L)
    else commits(log, after + 1, latest).flatMap(found => total(found.map { case (_, actions) =>
        val cdc = actions.collect { case c: AddCDCFile => c.size }
        if (cdc.nonEmpty) Some(cdc.sum)
        else total(actions.collect { case a: AddFile if a.dataChange => Some(a.size)
                                     case r: RemoveFile if r.dataChange => r.size })
      }))

  /**
   * Whether the change feed of versions after `after` up to `latest` takes rows away (an update's
   * pre-images, a delete): a commit removed data files or wrote change files. None when a commit
   * is gone.
   */
  private def changeRetracts(log: DeltaLog, after: Long, latest: Long): Option[Boolean] =
    if (after >= latest) Some(false)
    else commits(log, after + 1, latest).map(_.exists { case (_, actions) => actions.exists {
      case r: RemoveFile => r.dataChange
      case _: AddCDCFile => true
      case _ => false
    } })

  /** The log's commits `first` to `last`, read from their files in the driver; None when one of
   *  them is no longer in the log (log cleanup removed it). */
  def commits(log: DeltaLog, first: Long, last: Long): Option[Seq[(Long, Seq[Action])]] =
    Try(log.getChanges(first).takeWhile(_._1 <= last).toSeq).toOption.filter(_.map(_._1) == (first to last))

  /** The sum of `sizes`, if every one is known. */
  private def total(sizes: Seq[Option[Long]]): Option[Long] =
    if (sizes.forall(_.isDefined)) Some(sizes.flatten.sum) else None

  /**
   * For a view: the first commit since its last refresh read it that changed its rows and is no
   * refresh's own (a write around ReadOnlyViews: another engine, a session without it). Reads the
   * commits after that version, usually the refresh's own and nothing else. None when there is none,
   * and when log cleanup already removed those commits (then nothing can tell).
   */
  private def outsideChange(log: DeltaLog, snapshot: Snapshot): Option[Long] =
    snapshot.metadata.configuration.get(RefreshCommit.ReadVersionProperty).map(_.toLong + 1)
      .filter(_ <= snapshot.version)
      .flatMap(from => Try(log.getChanges(from).takeWhile(_._1 <= snapshot.version)
        .collectFirst { case (version, actions) if changesRowsOutsideRefresh(actions) => version }).toOption.flatten)

  private def changesRowsOutsideRefresh(actions: Seq[Action]): Boolean =
    !actions.exists { case c: CommitInfo => c.userMetadata.exists(_.contains(StateKey)); case _ => false } &&
      actions.exists { case a: AddFile => a.dataChange; case r: RemoveFile => r.dataChange; case _ => false }

  val historySchema: StructType = new StructType()
    .add("view", StringType).add("refresh_id", LongType).add("started_at", TimestampType)
    .add("duration_s", DoubleType).add("technique", StringType).add("reason", StringType)
    .add("source_versions", StringType).add("rows_read", LongType).add("rows_inserted", LongType)
    .add("rows_updated", LongType).add("rows_deleted", LongType).add("late_rows", LongType)
    .add("watermark_micros", LongType).add("watermark_idle", BooleanType).add("work_bytes", LongType)
    .add("estimated_incremental_s", DoubleType).add("estimated_full_s", DoubleType)

  private def history(args: Seq[String]): LogicalPlan = {
    val spark = SparkSession.active
    val catalog = spark.sessionState.catalog
    val database = args.headOption.filter(_.nonEmpty).getOrElse(catalog.getCurrentDatabase)
    val names = args.lift(1).filter(_.nonEmpty).map(v => Seq(TableIdentifier(v, Some(database))))
      .getOrElse(catalog.listTables(database).filterNot(t => catalog.isTempView(t)))
    val newest = args.lift(2).map(_.toInt)
    val rows = names.flatMap(ident => Try(catalog.getTableMetadata(ident)).toOption)
      .filter(DeltaTableUtils.isDeltaTable)
      .map(table => table -> DeltaLog.forTable(spark, table))  // a view's definition is a Delta property
      .filter { case (table, log) => log.update(catalogTableOpt = Some(table)).metadata.configuration
        .contains(ReadOnlyViews.DefinitionProperty) }
      .flatMap { case (table, log) => newest.map(n => latest(table, log, n)).getOrElse(refreshes(table, log, None)) }
    LocalRelation.fromExternalRows(output(historySchema.fields.map(f => f.name -> f.dataType).toSeq: _*), rows)
  }

  /**
   * The view's newest `n` refreshes: its newest commits are read, ten at first and four times as
   * many each time they hold fewer than `n` refreshes, so the latest refresh costs one small read
   * however long the view's log is.
   */
  private def latest(view: CatalogTable, log: DeltaLog, n: Int): Seq[Row] = {
    val newestVersion = log.update(catalogTableOpt = Some(view)).version
    // Past the newest version, all of the log: from its earliest commit left after log cleanup.
    Iterator.iterate(math.max(10, n))(_ * 4).map { commits =>
      val all = commits > newestVersion
      (refreshes(view, log, if (all) None else Some(commits)), all)
    }.find { case (found, all) => found.size >= n || all }.map(_._1.takeRight(n)).getOrElse(Nil)
  }

  /** The view's refresh commits (all, or among its newest `commits`), as history rows, oldest first. */
  private def refreshes(view: CatalogTable, log: DeltaLog, commits: Option[Int]): Seq[Row] = {
    val mapper = new ObjectMapper()
    commitInfos(view, log, commits).flatMap { commit =>
      commit.userMetadata.filter(_.contains(StateKey)).flatMap(m => Try(mapper.readTree(m).get(StateKey)).toOption)
        .filter(state => state != null && state.has("metrics") && state.get("metrics").has("technique"))
        .map(state => row(view.identifier.table, state, commit.timestamp, commit.operationMetrics.getOrElse(Map.empty)))
    }
  }

  /**
   * The commits' CommitInfos (all, or the newest `commits`), oldest first, read from their files
   * in the driver (as the change feed's bytes are): Delta's getHistory lists them in a Spark job,
   * 0.1-0.3 s on two cores for the ten or twenty commits a refresh's estimate reads. More than
   * ReadInDriver commits, or commits that log cleanup removed, are listed by getHistory.
   */
  private def commitInfos(view: CatalogTable, log: DeltaLog, commits: Option[Int]): Seq[Commit] = {
    def listed: Seq[Commit] = log.history.getHistory(commits, Some(view)).reverse
      .map(c => Commit(c.timestamp, c.userMetadata, c.operationMetrics))
    val newest = log.unsafeVolatileSnapshot.version
    val first = math.max(0L, newest + 1 - commits.fold(newest + 1)(_.toLong))
    if (newest - first >= ReadInDriver) listed
    else DeltaTables.commits(log, first, newest)
      .map(_.flatMap(_._2.collectFirst { case c: CommitInfo => Commit(c.timestamp, c.userMetadata, c.operationMetrics) }))
      .getOrElse(listed)
  }

  /** Commits read one by one in the driver, at most; more are listed by getHistory's Spark job. */
  private val ReadInDriver = 100

  /** What the history reads of a commit. */
  private case class Commit(timestamp: Timestamp, userMetadata: Option[String], operationMetrics: Option[Map[String, String]])

  private def row(view: String, state: JsonNode, committed: Timestamp, metrics: Map[String, String]): Row = {
    val m = state.get("metrics")
    val startedMs = (m.get("started_at").asDouble * 1000).round
    def long(node: JsonNode, key: String): java.lang.Long =
      Option(node.get(key)).filterNot(_.isNull).map(n => java.lang.Long.valueOf(n.asLong)).orNull
    def double(node: JsonNode, key: String): java.lang.Double =
      Option(node.get(key)).filterNot(_.isNull).map(n => java.lang.Double.valueOf(n.asDouble)).orNull
    val (inserted, updated, deleted) =
      if (metrics.contains("numTargetRowsInserted")) (metrics("numTargetRowsInserted").toLong,
        metrics.getOrElse("numTargetRowsUpdated", "0").toLong, metrics.getOrElse("numTargetRowsDeleted", "0").toLong)
      else (metrics.getOrElse("numOutputRows", "0").toLong, 0L, 0L)
    Row(view, state.get("refresh_id").asLong, new Timestamp(startedMs),
      math.max(0L, committed.getTime - startedMs) / 1000.0, m.get("technique").asText, m.get("reason").asText,
      new ObjectMapper().writeValueAsString(state.get("sources")), long(m, "rows_read"), inserted, updated,
      deleted, long(m, "late_rows"), long(state, "watermark"),
      java.lang.Boolean.valueOf(Option(m.get("watermark_idle")).exists(_.asBoolean)), long(m, "work_bytes"),
      double(m, "estimated_incremental_s"), double(m, "estimated_full_s"))
  }
}
