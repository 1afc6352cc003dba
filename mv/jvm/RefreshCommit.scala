package io.mvengine

import scala.collection.mutable

import com.fasterxml.jackson.databind.ObjectMapper

import org.apache.spark.sql.{Column, DataFrame, Row}
import org.apache.spark.sql.catalyst.expressions.{Attribute, AttributeReference, Expression}
import org.apache.spark.sql.catalyst.optimizer.ConstantFolding
import org.apache.spark.sql.catalyst.plans.logical.{Filter, LocalRelation}
import org.apache.spark.sql.catalyst.types.DataTypeUtils
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.delta.{DeltaLog, DeltaOperations, OptimisticTransaction}
import org.apache.spark.sql.delta.actions.{Action, AddFile}
import org.apache.spark.sql.delta.commands.{DeletionVectorUtils, DeltaCommand}
import org.apache.spark.sql.delta.commands.cdc.CDCReader
import org.apache.spark.sql.execution.command.LeafRunnableCommand
import org.apache.spark.sql.execution.metric.{SQLMetric, SQLMetrics}
import org.apache.spark.sql.functions.{array, broadcast, coalesce, col, collect_list, count, explode, expr,
  input_file_name, lit, struct, when}
import org.apache.spark.storage.StorageLevel
import org.apache.spark.sql.types.{ByteType, DataType, DateType, IntegerType, LongType, ShortType, StringType,
  StructType, TimestampNTZType, TimestampType}

import io.mvengine.{InternalColumns => IC}  // the helper columns beside the view's

/**
 * The one Delta commit of a refresh: the view's new rows and its refresh state together, the state
 * kept as the table properties `mv.refresh_id` and `mv.state`. Delta keeps table properties in
 * every snapshot and checkpoint, so no maintenance commit and no log cleanup can lose the state,
 * and reading it needs no state reconstruction (docs/design.md, "State and exactly once").
 *
 * Exactly once without Delta transaction ids: the commit goes through only if `mv.refresh_id` is
 * still the value the refresh started from, and since it changes the table's metadata, Delta
 * fails any other commit that changes metadata concurrently. Two refreshes racing: one commits,
 * the other gets status `conflict`; a refresh repeated after a crash starts from the new state.
 *
 * Modes: `append` (new rows), `overwrite` (all rows), `state` (no rows), and `merge`, which
 * applies a source of rows to the view as a MERGE would, rewriting only the files holding rows it
 * changes and writing the change feed (insert, delete, update pre- and post-image):
 *  - matched view and source rows (`on`): deleted if `delete_matched`, else by the source row's
 *    `__mv_op` (IC.Op): 'delete' deletes, 'upsert' updates the row when any column differs;
 *  - view rows matching no source row: deleted if `delete_missing` (a condition on `t`) holds;
 *    only the view rows `target_filter` lets through are read, so `delete_missing` must imply it;
 *  - source rows matching no view row: inserted if `__mv_op` is 'upsert' or 'insert'. Those that
 *    can match none are inserted without the matching (`freshRows`): all of them when no view
 *    file can hold a match, else, given `fresh` (a column `on` compares with `<=>`), those whose
 *    value there is beyond every candidate file's maximum (a window newer than the view's), and
 *    given `unmatched`, those meeting it (a replacement's rows to insert, which ON never matches);
 *  - `deletes_reached`: the view rows the refresh read as those its merge reaches (`reached`) are
 *    all deleted, and the source's other rows are inserts or markers (writes.counted), so they are
 *    classified without the join that would find the same (`deletedAll`).
 *
 * It also overwrites an EMIT ON WINDOW CLOSE view's `<view>__open` table (mv/open_windows.py), its
 * state there the id of the rows it writes, which the view's state then names.
 *
 * Run as an internal statement, so it works over Spark Connect and runs exactly once:
 * {{{
 *   MV_COMMIT_REFRESH '{"view": "v", "mode": "append", "rows": "tmp", "refresh_id": 8,
 *                      "expected": "7", "state": "{...}"}'
 * }}}
 */
object RefreshCommit extends DeltaCommand {

  val RefreshIdProperty = "mv.refresh_id"
  val StateProperty = "mv.state"
  /** The view's version the refresh read: commits after it that change data and are no refresh's
   *  were written around the read-only rule (DeltaTables.outsideChange). */
  val ReadVersionProperty = "mv.read_version"
  private val Keyword = "MV_COMMIT_REFRESH"

  case class Spec(view: String, mode: String, rows: Option[String], on: Option[String], deleteMatched: Boolean,
      deleteMissing: Option[String], targetFilter: Option[String], refreshId: Long, expected: Option[String],
      state: String, reached: Option[String] = None, reachedVersion: Option[Long] = None,
      fresh: Option[String] = None, unmatched: Option[String] = None, deletesReached: Boolean = false)

  /** The statement, if `sqlText` is one: its spec, from the string literal after the keyword. */
  def parse(sqlText: String, literal: String => String): Option[RefreshCommitCommand] = {
    val text = sqlText.trim
    if (!text.regionMatches(true, 0, Keyword, 0, Keyword.length)) return None
    val json = new ObjectMapper().readTree(literal(text.substring(Keyword.length).trim))
    def opt(name: String): Option[String] = Option(json.get(name)).filterNot(_.isNull).map(_.asText)
    Some(RefreshCommitCommand(Spec(json.get("view").asText, json.get("mode").asText, opt("rows"), opt("on"),
      opt("delete_matched").contains("true"), opt("delete_missing"), opt("target_filter"),
      json.get("refresh_id").asLong, opt("expected"), json.get("state").asText, opt("reached"),
      opt("reached_version").map(_.toLong), opt("fresh"), opt("unmatched"), opt("deletes_reached").contains("true"))))
  }

  case class RefreshCommitCommand(spec: Spec) extends LeafRunnableCommand {
    override val output: Seq[Attribute] = resultColumns("status" -> StringType, "version" -> LongType,
      "num_inserted_rows" -> LongType, "num_updated_rows" -> LongType, "num_deleted_rows" -> LongType)

    override def run(session: org.apache.spark.sql.SparkSession): Seq[Row] =
      RefreshCommit.run(session.asInstanceOf[SparkSession], spec)
  }

  def run(spark: SparkSession, spec: Spec): Seq[Row] =
    inTransaction(spark, spec.view, Seq(Row("conflict", -1L, 0L, 0L, 0L))) { (txn, log) =>
      if (txn.metadata.configuration.get(RefreshIdProperty) != spec.expected) {
        Seq(Row("conflict", txn.readVersion, 0L, 0L, 0L))  // another refresh committed since this one started
      } else {
        txn.updateMetadata(txn.metadata.copy(configuration = txn.metadata.configuration ++ Map(
          RefreshIdProperty -> spec.refreshId.toString, StateProperty -> spec.state,
          ReadVersionProperty -> txn.readVersion.toString),
          schemaString = replacedSchema(spark, spec, txn).map(_.json).getOrElse(txn.metadata.schemaString)))
        commit(spark, spec, txn, log)
      }
    }

  /**
   * An overwrite's new schema for the table, when its rows' columns (names, types) are not the
   * table's: the query's column types changed with a source's (a type replaced or widened). The
   * commit removes every file, so the table's schema is replaced in the same commit and no file
   * of the old types is left for a reader (e.g. `price` BIGINT in a table now saying DOUBLE).
   * {{{
   *   view (item STRING, total BIGINT), rows (item STRING, total DOUBLE)  ->  Some(item STRING, total DOUBLE)
   * }}}
   */
  private def replacedSchema(spark: SparkSession, spec: Spec, txn: OptimisticTransaction): Option[StructType] =
    if (spec.mode != "overwrite") None
    else {
      val rows = spark.table(spec.rows.get).schema
      def columns(s: StructType) = s.fields.map(f => (f.name.toLowerCase, f.dataType.catalogString)).toSeq
      if (columns(rows) == columns(txn.metadata.schema)) None
      else Some(StructType(rows.fields.map(_.copy(nullable = true))))
    }

  /** A session setting counting `unit` (`mv.localMergeRows`, `mv.merge.deletionVectorBytes`): its
   *  value, or `default` when unset; a value that is no whole number fails by the setting's name. */
  def wholeNumberSetting(spark: SparkSession, name: String, default: Long, unit: String, meaning: String = ""): Long =
    spark.conf.getOption(name).map(v => v.trim.toLongOption.getOrElse(throw
      new IllegalArgumentException(s"$name must be a whole number of $unit$meaning, not '$v'"))).getOrElse(default)

  /** An internal statement's result columns, none of them nullable. */
  def resultColumns(columns: (String, DataType)*): Seq[Attribute] =
    columns.map { case (name, dataType) => AttributeReference(name, dataType, nullable = false)() }

  /** `body` in a Delta transaction on the catalog table `name`; `conflict` when Delta fails the
   *  commit because a concurrent one changed what it read (its metadata, its files). */
  def inTransaction(spark: SparkSession, name: String, conflict: => Seq[Row])(
      body: (OptimisticTransaction, DeltaLog) => Seq[Row]): Seq[Row] = {
    val table = DeltaTables.catalogTable(spark, name)
    val log = DeltaLog.forTable(spark, table)
    try log.withNewTransaction(Some(table))(txn => body(txn, log))
    catch {
      case _: java.util.ConcurrentModificationException => conflict
    }
  }

  private def commit(spark: SparkSession, spec: Spec, txn: OptimisticTransaction, log: DeltaLog): Seq[Row] = {
    val (actions, counts, operation) = spec.mode match {
      case "append" => (txn.writeFiles(rows(spark, spec, txn)), None, append)
      case "overwrite" => (viewFiles(txn, None).map(_.remove) ++ txn.writeFiles(rows(spark, spec, txn)), None, overwrite)
      case "state" => (Nil, None, append)
      case "merge" =>
        val (written, counts) = merge(spark, spec, txn, log)
        (written, Some(counts), merging)
      case other => throw new IllegalArgumentException(s"$Keyword: unknown mode $other")
    }
    counts.foreach(c => txn.registerSQLMetrics(spark, metrics(spark, c)))
    val version = txn.commit(actions, operation)
    val (inserted, updated, deleted) = counts.map(c => (c.inserted, c.updated, c.deleted))
      .getOrElse((appended(actions), 0L, 0L))
    Seq(Row("committed", version, inserted, updated, deleted))
  }

  private val append = DeltaOperations.Write(org.apache.spark.sql.SaveMode.Append)
  private val overwrite = DeltaOperations.Write(org.apache.spark.sql.SaveMode.Overwrite)
  private val merging = DeltaOperations.Merge(None, None, None, None, Nil, Nil, Nil)

  /** The source rows, as the view's columns in the view's order. */
  private def rows(spark: SparkSession, spec: Spec, txn: OptimisticTransaction): DataFrame =
    spark.table(spec.rows.get).select(txn.metadata.schema.fieldNames.map(c => col(quoted(c))): _*)

  /** The rows `actions` add. */
  def appended(actions: Seq[Action]): Long =
    actions.collect { case a: AddFile => a.numLogicalRecords.getOrElse(0L) }.sum

  def quoted(name: String): String = "`" + name.replace("`", "``") + "`"

  /** The rows a merge writes per file, at most: a file per this many rows written. A later merge
   *  rewrites a file holding a row it changes, kept rows included, unless it marks the rows
   *  deleted (DeletionVectors), so files stay this small: at a million rows per file, a 0.1%
   *  change of bench/refresh.py's 3M-row view copied 1.4M unchanged rows. */
  val RowsPerFile = 250000L

  /** The files to write `rows` rows in: one per RowsPerFile, at least one (not one per shuffle
   *  partition: a small change writes one). */
  private def filesFor(rows: Long): Int = math.min(math.max(1L, rows / RowsPerFile), Int.MaxValue.toLong).toInt

  case class Counts(inserted: Long = 0, updated: Long = 0, deleted: Long = 0, copied: Long = 0, source: Long = 0,
      filesAdded: Long = 0, filesRemoved: Long = 0, vectorsAdded: Long = 0, vectorsUpdated: Long = 0)

  /** MERGE's own metrics, so DESCRIBE HISTORY shows this commit as it shows a MERGE. */
  private def metrics(spark: SparkSession, c: Counts): Map[String, SQLMetric] = Map(
    "operationNumSourceRows" -> c.source, "numSourceRows" -> c.source, "numTargetRowsInserted" -> c.inserted,
    "numTargetRowsUpdated" -> c.updated, "numTargetRowsDeleted" -> c.deleted, "numTargetRowsCopied" -> c.copied,
    "numTargetFilesAdded" -> c.filesAdded, "numTargetFilesRemoved" -> c.filesRemoved,
    "numTargetDeletionVectorsAdded" -> c.vectorsAdded, "numTargetDeletionVectorsUpdated" -> c.vectorsUpdated,
    "numOutputRows" -> (c.inserted + c.updated + c.copied)).map { case (name, value) =>
    val metric = SQLMetrics.createMetric(spark.sparkContext, name)
    metric.set(value)
    name -> metric
  }

  /** The candidate view rows of one action in one file (None: a source row), how many of them
   *  matched a source row, and the file's row indexes of those updated or deleted. */
  case class FileRows(action: String, file: Option[String], rows: Long, fromSource: Long, rowIndexes: Seq[Long])

  /**
   * The merge: every candidate view row and source row is classified (kept, updated, deleted,
   * inserted), in the driver when both sides are small (LocalMerge), else by a full outer join,
   * cached. A file holding an updated or deleted row is rewritten with its kept rows, or, when
   * large, keeps its rows and gets a deletion vector for those (DeletionVectors): only its rows
   * `target_filter` lets through are read then. New rows and the change feed are written beside.
   */
  private def merge(spark: SparkSession, spec: Spec, txn: OptimisticTransaction, log: DeltaLog)
      : (Seq[Action], Counts) = {
    val columns = txn.metadata.schema.fieldNames.toSeq
    // The filter lets Delta skip the view's other files; a delete-missing condition implies it.
    val candidates = viewFiles(txn, spec.targetFilter.map(resolved(spark, txn, _)))
    if (candidates.isEmpty) return appendedAll(spark, spec, txn, columns)
    val fresh = freshRows(spark, spec, txn, candidates)
    val inserts = freshInserts(spark, spec, columns, fresh)
    try {
      val (marked, whole) = candidates.partition(DeletionVectors.markable(spark, txn))
      val reached = reachedRows(spark, spec, txn, whole)
      val narrowing = reached.isEmpty && marked.nonEmpty && spec.deleteMissing.isEmpty && spec.on.isDefined
      val matchable = fresh.map(f => !coalesce(f, lit(false)))
      val (source, small, sized) = sourceRows(spark, spec, narrowing, matchable)
      val cached = mutable.ListBuffer[DataFrame]() ++ sized
      try {
        val target = reached.getOrElse(candidateRows(spark, spec, log, txn, whole, marked, source, small, cached))
        mergeRows(spark, spec, txn, log, columns, candidates, whole, marked, target, source,
          copied = reached.isDefined, inserts)
      } finally cached.foreach(_.unpersist())
    } finally inserts.foreach(_.rows.unpersist())
  }

  val FreshInsertsConf = "mv.merge.freshInserts"

  /** Which source rows can match no `candidates` row, so are inserts known without the matching:
   *  for a `fresh` column, those whose value is beyond the greatest the candidates' statistics
   *  allow, and those meeting `unmatched` (a condition on the source's columns that ON never lets
   *  match: a replacement's rows to insert). None: every row is matched.
   *
   *  Why: a 500,000-row append to a TUMBLE view over 2.5M rows touches 50,000 windows, all but
   *  the first new; sent through the full outer join with the view's rows and its cache, the
   *  merge took 1.3 s, appended 0.6 s. */
  private def freshRows(spark: SparkSession, spec: Spec, txn: OptimisticTransaction, candidates: Seq[AddFile])
      : Option[Column] =
    if (!spark.conf.get(FreshInsertsConf, "true").toBoolean) None  // off: every row matched (an oracle)
    else (beyond(spec, txn, candidates) ++ spec.unmatched.map(expr)).reduceOption(_ || _)

  /** The source rows whose `fresh` column is beyond the greatest value the candidates' statistics allow. */
  private def beyond(spec: Spec, txn: OptimisticTransaction, candidates: Seq[AddFile]): Option[Column] =
    for {
      name <- spec.fresh
      field <- txn.metadata.schema.fields.find(_.name.equalsIgnoreCase(name))
      bound <- SmallDeltaScans.upperBound(candidates, field.name, field.dataType)
      value <- constant(bound, field.dataType)
    } yield col(quoted(field.name)) > value

  /** An ordinal as SmallDeltaScans reads statistics (µs, days, the number) as a constant of its type. */
  private def constant(ordinal: Long, dataType: DataType): Option[Column] = dataType match {
    case TimestampType => Some(lit(java.time.Instant.EPOCH.plus(ordinal, java.time.temporal.ChronoUnit.MICROS)))
    case TimestampNTZType => Some(lit(java.time.LocalDateTime.ofEpochSecond(Math.floorDiv(ordinal, 1000000L),
      (Math.floorMod(ordinal, 1000000L) * 1000L).toInt, java.time.ZoneOffset.UTC)))
    case DateType => Some(lit(java.time.LocalDate.ofEpochDay(ordinal)))
    case LongType | IntegerType | ShortType | ByteType => Some(lit(ordinal).cast(dataType))
    case _ => None
  }

  /** The `fresh` source rows (freshRows) to insert, as the view's columns, and how many. */
  case class Fresh(rows: DataFrame, count: Long)

  /** The `fresh` source rows to insert, computed once, cached and counted, so they are written as a
   *  file per RowsPerFile rows as a merge's are, in their order (a view created by a full refresh in
   *  time order), not a file per task; None when there are none. The merge writes them in its own
   *  write job (mergeRows), with their change feed's insert images when it writes change files: a
   *  write job of their own cost bench.appends' one_percent 0.15 s a refresh, where the window its
   *  append shares with the view's last one was rewritten beside 20,000 new rows. */
  private def freshInserts(spark: SparkSession, spec: Spec, columns: Seq[String], fresh: Option[Column])
      : Option[Fresh] = fresh.flatMap { condition =>
    val rows = spark.table(spec.rows.get).where(coalesce(condition, lit(false)) && col(IC.Op).isin("upsert", "insert"))
      .select(columns.map(c => col(quoted(c))): _*).persist(StorageLevel.MEMORY_AND_DISK)
    val count = rows.count()
    if (count > 0) Some(Fresh(rows, count)) else { rows.unpersist(); None }
  }

  /** A merge that reaches no view file: its rows to insert or upsert appended, whatever
   *  FreshInsertsConf says (no view row can match them; with the setting off, such a merge, an
   *  append after a gap in time, once wrote nothing). */
  private def appendedAll(spark: SparkSession, spec: Spec, txn: OptimisticTransaction, columns: Seq[String])
      : (Seq[Action], Counts) = freshInserts(spark, spec, columns, Some(lit(true))) match {
    case Some(fresh) => try writeFresh(txn, fresh) finally fresh.rows.unpersist()
    case None => (Nil, Counts())
  }

  /** The fresh rows of a merge that reaches no view file: appended (Delta's feed reads the added
   *  files as inserts). */
  private def writeFresh(txn: OptimisticTransaction, fresh: Fresh): (Seq[Action], Counts) = {
    val written = txn.writeFiles(fresh.rows.coalesce(filesFor(fresh.count)))
    (written, Counts(inserted = fresh.count, source = fresh.count, filesAdded = written.count(_.isInstanceOf[AddFile])))
  }

  /** The merge's source rows, whether they are known small (within the broadcast threshold), and
   *  the frame cached to know it. When the view's rows could be narrowed to those meeting a source
   *  row (`narrowing`, see candidateRows) and Spark's estimate of the source is over the threshold,
   *  the source is computed once and cached, so its true size decides: the estimate of a join
   *  multiplies its sides' sizes, and the source of a combining refresh (a full outer join of
   *  checkpointed rows) is estimated at gigabytes when it holds thousands of rows. bench/refresh.py's
   *  change spread over 7 days at 0.1% of 10M rows: 4,691 source rows sent all 2.9M view rows through
   *  a sort-merge join (14.8 s of a 24 s refresh). */
  private def sourceRows(spark: SparkSession, spec: Spec, narrowing: Boolean, matchable: Option[Column])
      : (DataFrame, Boolean, Option[DataFrame]) = {
    val threshold = BigInt(spark.sessionState.conf.autoBroadcastJoinThreshold)
    def fits(frame: DataFrame): Boolean = frame.queryExecution.optimizedPlan.stats.sizeInBytes <= threshold
    def table: DataFrame = matchable.foldLeft(spark.table(spec.rows.get))(_.where(_))  // less the fresh rows
    val estimated = table
    if (!narrowing || threshold <= 0) return (estimated, false, None)
    if (fits(estimated)) return (estimated, true, None)
    estimated.persist(StorageLevel.MEMORY_AND_DISK)
    estimated.count()
    val counted = table  // planned anew: the cache's measured size is its estimate
    (counted, fits(counted), Some(estimated))
  }

  /** The merge's body, over the view's `candidates` (files read `whole` or `marked` deleted row by
   *  row) and their rows `target` (candidateRows); or, `copied`, the rows a source row reaches in
   *  any of them (reachedRows), the files it rewrites whole then copied but for the rows it changes. */
  private def mergeRows(spark: SparkSession, spec: Spec, txn: OptimisticTransaction, log: DeltaLog,
      columns: Seq[String], candidates: Seq[AddFile], whole: Seq[AddFile], marked: Seq[AddFile],
      target: DataFrame, source: DataFrame, copied: Boolean, fresh: Option[Fresh]): (Seq[Action], Counts) = {
    // The rows of the files read whole, if their statistics count them; marked files are read
    // filtered, as reached rows are: only reading them counts those.
    val wholeRows = if (copied) Some(0L) else if (whole.forall(_.numLogicalRecords.isDefined))
      Some(whole.flatMap(_.numLogicalRecords).sum) else None
    val local = LocalMerge.classify(spark, spec, columns, target,
      LocalMerge.TargetSize(wholeRows, copied || marked.nonEmpty), source)
    val (classified, perFile) = local.map(c => (c.rows, c.perFile)).getOrElse(
      if (copied && spec.deletesReached && spec.deleteMatched) deletedAll(txn.metadata.schema, target, source)
      else classify(spec, columns, target, source))
    try {
      val changed = perFile.filter(p => p.file.isDefined && (p.action == "update" || p.action == "delete"))
      val nameToFile = generateCandidateFileMap(log.dataPath, candidates)
      val touched = changed.flatMap(_.file).distinct.map(f => f -> getTouchedFile(log.dataPath, f, nameToFile)).toMap
      val markedPaths = marked.map(_.path).toSet
      val rewrittenWhole = touched.collect { case (f, add) if !markedPaths.contains(add.path) => f }.toSeq
      val markedRows = changed.filter(p => markedPaths.contains(touched(p.file.get).path))
        .groupBy(_.file.get).toSeq.map { case (f, parts) => touched(f) -> parts.flatMap(_.rowIndexes) }
      def rowsOf(action: String, files: Option[Seq[String]] = None): Long = perFile.collect {
        case p if p.action == action && files.forall(fs => p.file.exists(fs.contains)) => p.rows }.sum
      val rewritten = classified.where(col(IC.Action).isin("insert", "update") ||
        (lit(!copied) && col(IC.File).isin(rewrittenWhole: _*) && col(IC.Action) === "keep"))
      val fromMerge = rewritten.select(when(col(IC.Action) === "keep", col(IC.Old)).otherwise(col(IC.New)).as("r"))
        .select(columns.map(c => col(s"r.${quoted(c)}")): _*)
      val gone = changed.filter(p => rewrittenWhole.contains(p.file.get))
      val merged = if (!copied || rewrittenWhole.isEmpty) fromMerge
        else fromMerge.unionByName(keptRows(spark, log, txn, columns, rewrittenWhole.map(touched), gone))
      val data = fresh.map(f => merged.unionByName(f.rows)).getOrElse(merged)
      val feed = touched.nonEmpty && CDCReader.isCDCEnabledOnTable(txn.metadata, spark)
      val kept = if (!copied) rowsOf("keep", Some(rewrittenWhole))
        else rewrittenWhole.flatMap(f => touched(f).numLogicalRecords).sum - gone.map(_.rows).sum
      val freshCount = fresh.map(_.count).getOrElse(0L)
      val (inserted, updated) = (rowsOf("insert") + freshCount, rowsOf("update"))
      val written = txn.writeFiles((if (feed) withChangeFeed(data, classified, columns, fresh) else data)
        .coalesce(filesFor(inserted + updated + kept)))
      val removed = rewrittenWhole.map(f => touched(f).remove)
      val counts = Counts(inserted, updated, rowsOf("delete"), kept, perFile.map(_.fromSource).sum + freshCount,
        written.count(_.isInstanceOf[AddFile]).toLong, removed.size.toLong,
        markedRows.count(_._1.deletionVector == null).toLong, markedRows.count(_._1.deletionVector != null).toLong)
      (written ++ removed ++ DeletionVectors.mark(log, txn, markedRows), counts)
    } finally if (local.isEmpty) classified.unpersist()
  }

  /** The view's candidate rows with their file (`__mv_file`) and row index in it (`__mv_row`): every row
   *  of the files a merge may rewrite whole, and the rows `target_filter` lets through of those
   *  whose rows it marks deleted (their other rows stay as they are). Without a delete-missing
   *  condition, a marked file's row that meets no `source` row is only kept, never written, so
   *  when the source is known small (`small`: sourceRows) those rows are left out before the
   *  classifying join by a broadcast semi-join: a view of 731,000 rows whose change retracted
   *  7,000 scattered ones sent every row through that join and its cache, 9 s of its 10. A large
   *  source would be shuffled for it and again for the join, so it is not. The rows it leaves are
   *  cached (added to `cached`): when they are too many for LocalMerge, its try read every marked
   *  file to find out, and the classifying join read them all again (bench/refresh.py, 1% over
   *  seven days: 2.9M view rows read twice for 22,971, 1.8 s). */
  private def candidateRows(spark: SparkSession, spec: Spec, log: DeltaLog, txn: OptimisticTransaction,
      whole: Seq[AddFile], marked: Seq[AddFile], source: DataFrame, small: Boolean,
      cached: mutable.ListBuffer[DataFrame]): DataFrame = {
    val indexed = DeletionVectorUtils.deletionVectorsReadable(txn.snapshot)
    def rows(files: Seq[AddFile]): DataFrame = located(spark, log, txn, files, indexed)
    if (marked.isEmpty) rows(whole)
    else {
      val filtered = spec.targetFilter.foldLeft(rows(marked))((frame, f) => frame.where(expr(f)))
      val reached = if (!small) filtered else {
        val narrowed = filtered.as("t").join(broadcast(source.as("s")), expr(spec.on.get), "left_semi")
        cached += narrowed.persist(StorageLevel.MEMORY_AND_DISK)
        narrowed
      }
      if (whole.isEmpty) reached else rows(whole).unionByName(reached)
    }
  }

  /** The rows of `files` with their file (`__mv_file`) and, `indexed`, row index in it (`__mv_row`; else -1). */
  private def located(spark: SparkSession, log: DeltaLog, txn: OptimisticTransaction, files: Seq[AddFile],
      indexed: Boolean): DataFrame = {
    val frame = SmallDeltaScans.frame(spark, log, txn.snapshot, files)
    // by the metadata column itself: a view column named _metadata would shadow the name
    frame.withColumn(IC.File, input_file_name())
      .withColumn(IC.Row, if (indexed) frame.metadataColumn("_metadata").getField("row_index") else lit(-1L))
  }

  /** The rows of `files`, rewritten whole, that the merge keeps: all but those `gone` (updated or
   *  deleted), by their row index, as the view's columns. */
  private def keptRows(spark: SparkSession, log: DeltaLog, txn: OptimisticTransaction, columns: Seq[String],
      files: Seq[AddFile], gone: Seq[FileRows]): DataFrame = {
    import spark.implicits._
    val dropped = gone.flatMap(p => p.rowIndexes.map(i => (p.file.get, i))).toDF(IC.File, IC.Row)
    located(spark, log, txn, files, indexed = true).join(broadcast(dropped), Seq(IC.File, IC.Row), "left_anti")
      .select(columns.map(c => col(quoted(c))): _*)
  }

  /** The view rows a source row reaches (`on`), as the refresh read them before the commit: the
   *  spec's `reached` (writes.reached_rows: the view's rows meeting `target_filter` and matching
   *  some source row, with `__mv_file` and `__mv_row`), when it read the version this transaction
   *  reads and the merge deletes no row a source row misses. The view is then not read again for
   *  the matching: only those rows are classified, and a file rewritten whole is copied but for the
   *  rows the merge changes (keptRows), its other rows never joined. Nexmark's q0 at 1M bids: a
   *  change that took 7,000 rows from the view sent the 28,000 rows of the small files its earlier
   *  refreshes wrote through the distributed join with them (0.7-1.0 s), over LocalMerge's limit.
   *  None for another version, or when a file read whole has no row count: the commit reads the
   *  view itself. */
  private def reachedRows(spark: SparkSession, spec: Spec, txn: OptimisticTransaction, whole: Seq[AddFile])
      : Option[DataFrame] =
    spec.reached.filter(_ => spec.reachedVersion.contains(txn.readVersion) && spec.deleteMissing.isEmpty &&
      spec.on.isDefined && whole.forall(_.numLogicalRecords.isDefined)).map(spark.table)

  /** The distributed classification: a full outer join of the view's candidate rows and the
   *  source's, cached, and its rows per action and file (one pass gives the files to rewrite,
   *  the rows to mark deleted and the metrics). */
  private def classify(spec: Spec, columns: Seq[String], target: DataFrame, source: DataFrame)
      : (DataFrame, Seq[FileRows]) = {
    val t = target.withColumn(IC.T, lit(true)).as("t")
    val s = source.withColumn(IC.S, lit(true)).as("s")
    val same = columns.map(c => col(s"t.${quoted(c)}") <=> col(s"s.${quoted(c)}")).reduce(_ && _)
    val matched = if (spec.deleteMatched) lit("delete")
      else when(col(s"s.${IC.Op}") === "delete", "delete").when(!same, "update").otherwise("keep")
    val missing = spec.deleteMissing.map(c => when(expr(c), "delete").otherwise("keep")).getOrElse(lit("keep"))
    val action = when(col(s"t.${IC.T}").isNotNull && col(s"s.${IC.S}").isNotNull, matched)
      .when(col(s"t.${IC.T}").isNotNull, missing)
      .when(col(s"s.${IC.Op}").isin("upsert", "insert"), "insert")
      .otherwise("none")
    def image(alias: String): Column = struct(columns.map(c => col(s"$alias.${quoted(c)}").as(c)): _*)
    val classified = t.join(s, expr(spec.on.get), "full_outer").select(action.as(IC.Action),
      col(s"t.${IC.File}").as(IC.File), col(s"t.${IC.Row}").as(IC.Row),
      col(s"s.${IC.S}").as(IC.InSource),
      image("t").as(IC.Old), image("s").as(IC.New))
      .where(col(IC.Action) =!= "none").persist(StorageLevel.MEMORY_AND_DISK)
    (classified, perFile(classified))
  }

  /**
   * The classification of a merge that deletes every view row it reaches (`deletes_reached`,
   * writes.counted: the reached rows are the view's copies of the rows that lose some, each
   * matched by its own region marker, and the source's other rows are copies to insert): those
   * rows deleted, the source's rows to insert inserted, with no join. The join found the same:
   * Nexmark's q0 at 1M bids with the merge forced distributed (LocalMerge classifies it at the
   * default limit), about 0.1 s of a 3.5 s change round; it grows with the rows reached.
   * {{{
   *   reached (a, f1, 3), (a, f2, 0); source (a, 'region'), (a, 'insert')  ->
   *   delete (f1, 3), delete (f2, 0), insert a
   * }}}
   */
  private def deletedAll(schema: StructType, target: DataFrame, source: DataFrame): (DataFrame, Seq[FileRows]) = {
    def image(frame: DataFrame): Column =  // the view's types on both sides, so the union's agree
      struct(schema.fields.map(f => frame.col(quoted(f.name)).cast(f.dataType).as(f.name)).toSeq: _*)
    val absent = lit(null).cast(schema)
    val deleted = target.select(lit("delete").as(IC.Action), col(IC.File), col(IC.Row), lit(true).as(IC.InSource),
      image(target).as(IC.Old), absent.as(IC.New))
    val inserted = source.where(col(IC.Op) === "insert").select(lit("insert").as(IC.Action),
      lit(null).cast(StringType).as(IC.File), lit(null).cast(LongType).as(IC.Row), lit(true).as(IC.InSource),
      absent.as(IC.Old), image(source).as(IC.New))
    val classified = deleted.unionByName(inserted).persist(StorageLevel.MEMORY_AND_DISK)
    (classified, perFile(classified))
  }

  /** The classified rows per action and file: how many, how many from the source, and the row
   *  indexes of those updated or deleted (one pass gives the files to rewrite, the rows to mark
   *  deleted and the metrics). */
  private def perFile(classified: DataFrame): Seq[FileRows] = {
    val changedRow = when(col(IC.Action).isin("update", "delete"), col(IC.Row))
    classified.groupBy(IC.Action, IC.File)
      .agg(count(lit(1)), count(col(IC.InSource)), collect_list(changedRow)).collect()
      .map(r => FileRows(r.getString(0), Option(r.getString(1)), r.getLong(2), r.getLong(3), r.getSeq[Long](4)))
      .toSeq
  }

  /**
   * The view's files a commit reads, marked as read for Delta's conflict checks. A small view's
   * come from its checksum file, skipped by `filter` in the driver (SmallDeltaScans): no Spark job
   * and no state reconstruction, where Delta's data skipping costs three jobs.
   */
  private def viewFiles(txn: OptimisticTransaction, filter: Option[Expression]): Seq[AddFile] =
    SmallDeltaScans.listed(txn.snapshot, seed = true) match {
      case Some(files) =>
        filter.map(f => txn.trackReadPredicates(Seq(f))).getOrElse(txn.readWholeTable())
        val read = SmallDeltaScans.skipped(files, filter.toSeq)
        txn.trackFilesRead(read)
        read
      case None => filter.map(f => txn.filterFiles(Seq(f))).getOrElse(txn.filterFiles())
    }

  /** `condition` (SQL over the view's columns) resolved and folded, as Delta's file skipping needs it. */
  private def resolved(spark: SparkSession, txn: OptimisticTransaction, condition: String): Expression = {
    val relation = LocalRelation(DataTypeUtils.toAttributes(txn.metadata.schema))
    val parsed = spark.sessionState.sqlParser.parseExpression(condition)
    val analyzed = spark.sessionState.executePlan(Filter(parsed, relation)).analyzed
    ConstantFolding(analyzed).collectFirst { case Filter(c, _) => c }.get
  }

  /** The rows to write with the change feed beside them: `_change_type` null for a data row; the
   *  `fresh` rows' insert images with the classified rows' changes. */
  private def withChangeFeed(data: DataFrame, classified: DataFrame, columns: Seq[String], fresh: Option[Fresh])
      : DataFrame = {
    val changeType = CDCReader.CDC_TYPE_COLUMN_NAME
    def image(row: String, kind: String): Column = struct(col(s"$row.*"), lit(kind).as(changeType))
    val changes = classified.where(col(IC.Action).isin("update", "delete", "insert")).select(explode(
      when(col(IC.Action) === "update", array(image(IC.Old, "update_preimage"), image(IC.New, "update_postimage")))
        .when(col(IC.Action) === "delete", array(image(IC.Old, "delete")))
        .otherwise(array(image(IC.New, "insert")))).as("c"))
      .select((columns :+ changeType).map(c => col(s"c.${quoted(c)}")): _*)
    val inserted = fresh.map(f => changes.unionByName(f.rows.withColumn(changeType, lit(CDCReader.CDC_TYPE_INSERT))))
    data.withColumn(changeType, lit(null).cast(StringType)).unionByName(inserted.getOrElse(changes))
  }
}
