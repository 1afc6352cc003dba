package io.mvengine

import java.time.{LocalDateTime, OffsetDateTime, ZoneOffset}

import scala.jdk.CollectionConverters._
import scala.util.Try
import scala.util.control.NonFatal

import com.fasterxml.jackson.databind.{JsonNode, ObjectMapper}

import org.apache.spark.sql.catalyst.expressions.{And, Attribute, EqualTo, Expression, GreaterThan,
  GreaterThanOrEqual, IsNotNull, LessThan, LessThanOrEqual, Literal, Or}
import org.apache.spark.sql.catalyst.planning.PhysicalOperation
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.delta.{DataFrameUtils, DeltaLog, NoMapping, OptimisticTransaction, Snapshot}
import org.apache.spark.sql.delta.actions.AddFile
import org.apache.spark.sql.delta.files.{TahoeBatchFileIndex, TahoeLogFileIndex}
import org.apache.spark.sql.execution.datasources.{HadoopFsRelation, LogicalRelation}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.{ByteType, DataType, DateType, IntegerType, LongType, ShortType,
  TimestampNTZType, TimestampType}

/**
 * A scan of a small Delta table takes its files from the list Delta keeps in the table's checksum
 * file (`allFiles`, written with every commit for tables of up to 50 files), or for a table of
 * more files from the list the driver keeps of it (FileLists), and skips files by their min/max
 * statistics in the driver, instead of Delta's scan planning, which rebuilds the table's state
 * and filters its files in Spark jobs: 0.3-1 s for the first query after a commit on two cores,
 * however small the table. A refresh reads its sources and its view this way, and
 * its commit lists the view's files the same way (RefreshCommit); so does any query in a session
 * with the extension, unless `mv.smallTableScans` is set to false. docs/design.md, "The path of a
 * refresh".
 *
 * Skipping is conservative: a file is kept unless its statistics prove that no row meets a
 * comparison of a column with a constant (integers, dates, timestamps), or an AND / OR of such;
 * every other condition keeps the file. Filters stay in the plan above the scan, so the rows a
 * query returns are the same; only which files are opened changes. Files with deletion vectors
 * are read as Delta reads them (its PreprocessTableWithDVs drops their deleted rows from any
 * pinned file index); their statistics, no longer tight, still bound their rows. Tables with
 * column mapping and versions without a checksum are left to Delta, and so are scans under a
 * filter it cannot judge of tables over MaxBytes or of more files than their checksum lists. Inside a
 * Delta transaction on the same table (a MERGE's or the refresh's commit), the transaction's
 * snapshot is read and the whole table counts as read for its conflict checks.
 *
 * Example: `SELECT * FROM v WHERE window_start >= X` on a 2 MB view opens only the files whose
 * window_start reaches X, found in `_delta_log/<version>.crc`, with no Spark job to find them.
 */
object SmallDeltaScans extends Rule[LogicalPlan] {
  /** "false" leaves every scan to Delta. */
  val Enabled = "mv.smallTableScans"
  /** A larger table listed in its checksum is left to Delta's data skipping when a filter on it
   *  is one `skipped` cannot judge: Delta's understands more conditions (IN, LIKE 'prefix%'),
   *  and opening a file it would skip costs more the larger the files. Filters it judges, or
   *  none, read any table this way: the driver's work is per file, not per byte (bench/refresh.py
   *  at 100M rows, 1.1 GB in 150 files: Delta's skipping took 0.5 s of a 4.8 s refresh). */
  val MaxBytes: Long = 256L << 20

  override def apply(plan: LogicalPlan): LogicalPlan =
    if (!SQLConf.get.getConfString(Enabled, "true").toBoolean) plan
    else {
      // Scans under a filter this rule cannot judge: a table of more files than its checksum lists
      // is left to Delta there, whose data skipping may open fewer files.
      val undecided = plan.collect {
        case PhysicalOperation(_, filters, r: LogicalRelation) if !filters.forall(judged) => r.output.map(_.exprId)
      }.toSet
      plan.transformUp {
        case relation: LogicalRelation => relation.relation match {
          case fs @ HadoopFsRelation(index: TahoeLogFileIndex, _, _, _, _, _) if index.partitionFilters.isEmpty =>
            try read(relation, fs, index, largeToo = !undecided.contains(relation.output.map(_.exprId))) catch {
              case _: LinkageError | NonFatal(_) => relation  // another Delta build (a vendor's): Delta plans the scan
            }
          case _ => relation
        }
      }
    }

  private def read(relation: LogicalRelation, fs: HadoopFsRelation, index: TahoeLogFileIndex,
      largeToo: Boolean): LogicalRelation = {
    val active = OptimisticTransaction.getActive().filter(_.deltaLog.isSameLogAs(index.deltaLog))
      .filterNot(_ => index.isTimeTravelQuery)
    val snapshot = active.map(_.snapshot).getOrElse(index.getSnapshot)
    (if (largeToo) listed(snapshot, seed = true) else checksumListed(snapshot, anySize = false)).map { files =>
      active.foreach(_.readWholeTable())
      val checksum = new ChecksumFileIndex(fs.sparkSession, files, index.deltaLog, index.path, snapshot)
      relation.copy(relation = fs.copy(location = checksum)(fs.sparkSession))
    }.getOrElse(relation)
  }

  /** The rows of `files` of the table, read through a ChecksumFileIndex: Delta's own
   *  (`DeltaLog.createDataFrame`) lists them again through a DataFrame, two Spark SQL executions. */
  def frame(spark: org.apache.spark.sql.SparkSession, log: DeltaLog, snapshot: Snapshot, files: Seq[AddFile]): DataFrame = {
    val index = new ChecksumFileIndex(spark, files, log, log.dataPath, snapshot)
    DataFrameUtils.ofRows(spark, LogicalRelation(log.buildHadoopFsRelationWithFileIndex(snapshot, index, None)))
  }

  /** The snapshot's files, known without a Spark job: from its checksum, when it lists them all,
   *  or else from the list the driver keeps of a table of more files (FileLists; listed now, by
   *  one job, when `seed`). Only tables without column mapping (whose statistics are keyed by
   *  physical names). */
  def listed(snapshot: Snapshot, seed: Boolean = false): Option[Seq[AddFile]] =
    checksumListed(snapshot, anySize = true).orElse(FileLists.of(snapshot, seed))

  /** The files the snapshot's checksum lists, if it lists them all; with `anySize` false only for
   *  a table of up to MaxBytes. */
  private def checksumListed(snapshot: Snapshot, anySize: Boolean): Option[Seq[AddFile]] = {
    val files = snapshot.checksumOpt
      .filter(crc => (anySize || crc.tableSizeBytes <= MaxBytes) && snapshot.metadata.columnMappingMode == NoMapping)
      .flatMap(crc => crc.allFiles.filter(_.size == crc.numFiles))
    files.foreach(FileLists.remember(snapshot, _))  // its later versions then advance from it
    files
  }

  /** Whether every part of `condition` is one `skipped` judges by statistics as Delta would (a
   *  comparison of a column with a constant it orders, under AND / OR), or one Delta does not
   *  skip by either (IS NOT NULL, which the optimizer adds for comparisons). */
  private def judged(condition: Expression): Boolean = condition match {
    case And(left, right) => judged(left) && judged(right)
    case Or(left, right) => judged(left) && judged(right)
    case _: IsNotNull | Literal(true, _) => true
    case ColumnVsConstant(_, a, v, _) => ordinal(v, a.dataType).isDefined
    case _ => false
  }

  /** A comparison (=, <, <=, >, >=) of a column with a constant, either way round: the comparison,
   *  the column, the constant, and whether the constant stands first (`5 < id`). */
  private object ColumnVsConstant {
    def unapply(e: Expression): Option[(Expression, Attribute, Any, Boolean)] = e match {
      case c @ (_: EqualTo | _: LessThan | _: LessThanOrEqual | _: GreaterThan | _: GreaterThanOrEqual) =>
        (c.children.head, c.children(1)) match {
          case (a: Attribute, Literal(v, _)) => Some((c, a, v, false))
          case (Literal(v, _), a: Attribute) => Some((c, a, v, true))
          case _ => None
        }
      case _ => None
    }
  }

  /** `files` less those whose statistics prove no row meets all of `filters`. */
  def skipped(files: Seq[AddFile], filters: Seq[Expression]): Seq[AddFile] =
    if (filters.isEmpty) files
    else files.filter(file => Try(FileStats(file.stats)).toOption.forall(stats => filters.forall(mayMatch(_, stats))))

  /** The largest value of `column` (of `dataType`, as skipped on) that a row of `files` can hold,
   *  from their statistics: None for no files, or when a file's are missing or unreadable. */
  def upperBound(files: Seq[AddFile], column: String, dataType: DataType): Option[Long] = {
    val bounds = files.map(file =>
      Try(FileStats(file.stats)).toOption.flatMap(_.bound("maxValues", column, dataType, upper = true)))
    if (bounds.nonEmpty && bounds.forall(_.isDefined)) Some(bounds.flatten.max) else None
  }

  /** What the statistics of `files` say of `column` (of `dataType`), without reading them: their
   *  rows, the rows where it is not null, and its least and greatest value as ordinals (timestamps
   *  as Delta writes them, truncated to the millisecond: each up to 999 microseconds below the
   *  value; both 0 when every value is null). None for no files, or when a file's statistics lack
   *  one of them (a file whose values are all null needs no bounds).
   *  {{{
   *    SmallDeltaScans.span(added, "ts", TimestampType)  // Some(Array(20000, 20000, t0, t1))
   *  }}} */
  def span(files: Seq[AddFile], column: String, dataType: DataType): Option[Array[Long]] = {
    val parts = files.map(file => Try(FileStats(file.stats)).toOption.flatMap(_.span(column, dataType)))
    if (parts.isEmpty || parts.exists(_.isEmpty)) None
    else {
      val known = parts.flatten
      val bounds = known.flatMap(_._3)
      val (least, greatest) = if (bounds.isEmpty) (0L, 0L) else (bounds.map(_._1).min, bounds.map(_._2).max)
      Some(Array(known.map(_._1).sum, known.map(_._2).sum, least, greatest))
    }
  }

  /** Whether a row of a file with these statistics may meet `condition`. */
  private def mayMatch(condition: Expression, stats: FileStats): Boolean = condition match {
    case And(left, right) => mayMatch(left, stats) && mayMatch(right, stats)
    case Or(left, right) => mayMatch(left, stats) || mayMatch(right, stats)
    case ColumnVsConstant(c, a, v, flipped) => compare(c, a, v, flipped, stats)
    case _ => true
  }

  private def compare(c: Expression, a: Attribute, value: Any, flipped: Boolean, stats: FileStats): Boolean = {
    val bounds = for {
      v <- ordinal(value, a.dataType)
      min <- stats.bound("minValues", a.name, a.dataType, upper = false)
      max <- stats.bound("maxValues", a.name, a.dataType, upper = true)
    } yield (v, min, max)
    bounds.forall { case (v, min, max) =>
      (c, flipped) match {
        case (_: EqualTo, _) => min <= v && v <= max
        case (_: LessThan, false) | (_: GreaterThan, true) => min < v                  // column < v
        case (_: LessThanOrEqual, false) | (_: GreaterThanOrEqual, true) => min <= v   // column <= v
        case (_: GreaterThan, false) | (_: LessThan, true) => max > v                  // column > v
        case _ => max >= v                                                             // column >= v
      }
    }
  }

  /** A constant of one of the types skipped on, as a Long in Spark's internal representation. */
  private def ordinal(value: Any, dataType: DataType): Option[Long] = (value, dataType) match {
    case (null, _) => None
    case (v: Long, LongType | TimestampType | TimestampNTZType) => Some(v)
    case (v: Int, IntegerType | DateType) => Some(v.toLong)
    case (v: Short, ShortType) => Some(v.toLong)
    case (v: Byte, ByteType) => Some(v.toLong)
    case _ => None
  }

  /** A file's statistics as Delta wrote them (`numRecords`, `minValues`, `maxValues`, `nullCount`). */
  private case class FileStats(json: JsonNode) {
    /** The column's minimum or maximum as an ordinal, None when unknown. Delta writes timestamps
     *  truncated to milliseconds, so an upper bound is the written one plus 999 microseconds. */
    def bound(kind: String, column: String, dataType: DataType, upper: Boolean): Option[Long] =
      field(kind, column).flatMap(n => Try(dataType match {
        case TimestampType => micros(OffsetDateTime.parse(n.asText).toInstant) + (if (upper) 999L else 0L)
        case TimestampNTZType => micros(LocalDateTime.parse(n.asText).toInstant(ZoneOffset.UTC)) + (if (upper) 999L else 0L)
        case DateType => java.time.LocalDate.parse(n.asText).toEpochDay
        case LongType | IntegerType | ShortType | ByteType if n.isIntegralNumber => n.asLong
      }).toOption)

    /** The file's rows, those where `column` is not null, and its lower bounds of the column's
     *  least and greatest values (None when all are null); None when one is not written. */
    def span(column: String, dataType: DataType): Option[(Long, Long, Option[(Long, Long)])] = for {
      rows <- Option(json.get("numRecords")).filter(_.isIntegralNumber).map(_.asLong)
      nulls <- field("nullCount", column).filter(_.isIntegralNumber).map(_.asLong)
      bounds <- if (nulls >= rows) Some(None) else for {
        least <- bound("minValues", column, dataType, upper = false)
        greatest <- bound("maxValues", column, dataType, upper = false)
      } yield Some((least, greatest))
    } yield (rows, rows - nulls, bounds)

    /** The value written for `column` under `kind` (`minValues`, ...), its name matched in any case. */
    private def field(kind: String, column: String): Option[JsonNode] =
      Option(json.get(kind)).flatMap(values => Option(values.get(column)).orElse(
        values.fieldNames.asScala.find(_.equalsIgnoreCase(column)).map(values.get))).filterNot(_.isNull)

    private def micros(instant: java.time.Instant): Long =
      Math.addExact(Math.multiplyExact(instant.getEpochSecond, 1000000L), instant.getNano / 1000L)
  }

  private object FileStats {
    private val mapper = new ObjectMapper()
    def apply(stats: String): FileStats = new FileStats(mapper.readTree(stats))
  }
}

/** A Delta table's files as listed in its checksum, skipped by the scan's filters in the driver. */
class ChecksumFileIndex(spark: org.apache.spark.sql.SparkSession, files: Seq[AddFile], log: DeltaLog,
    path: org.apache.hadoop.fs.Path, snapshot: Snapshot)
  extends TahoeBatchFileIndex(spark, "read", files, log, path, snapshot) {

  // Two indexes of the same files of one version read the same rows, so they are equal, as Delta's
  // TahoeLogFileIndex of one version are: Spark then reuses a scan's exchange for another scan of
  // the same rows (a refresh's terms of both signs broadcast the same other side).
  private lazy val filePaths = addFiles.map(_.path).toSet
  override def equals(other: Any): Boolean = other match {
    case o: ChecksumFileIndex => (o eq this) || (o.path == path && o.deltaLog.isSameLogAs(deltaLog) &&
      o.snapshot.version == snapshot.version && o.filePaths == filePaths)
    case _ => false
  }
  override def hashCode: Int = (path, snapshot.version, addFiles.size).hashCode

  override def matchingFiles(partitionFilters: Seq[Expression], dataFilters: Seq[Expression]): Seq[AddFile] = {
    val inPartitions = if (partitionSchema.isEmpty || partitionFilters.isEmpty) addFiles
      else super.matchingFiles(partitionFilters, dataFilters)
    SmallDeltaScans.skipped(inPartitions, dataFilters)
  }
}
