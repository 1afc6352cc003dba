package io.mvengine

import scala.collection.mutable
import scala.jdk.CollectionConverters._

import org.apache.spark.sql.{DataFrame, Row}
import org.apache.spark.sql.catalyst.CatalystTypeConverters
import org.apache.spark.sql.catalyst.analysis.UnresolvedAttribute
import org.apache.spark.sql.catalyst.expressions.{Alias, And, Attribute, AttributeSet, BindReferences, EqualNullSafe,
  EqualTo, Expression, GenericInternalRow, InterpretedUnsafeProjection, JoinedRow, Literal, SubqueryExpression, UnsafeProjection,
  UnsafeRow}
import org.apache.spark.sql.catalyst.optimizer.{ConstantFolding, OptimizeIn}
import org.apache.spark.sql.catalyst.plans.FullOuter
import org.apache.spark.sql.catalyst.plans.logical.{Join, JoinHint, LocalLimit, LocalRelation, Project, SubqueryAlias}
import org.apache.spark.sql.catalyst.types.DataTypeUtils
import org.apache.spark.sql.classic.SparkSession
import org.apache.spark.sql.delta.DataFrameUtils
import org.apache.spark.sql.execution.datasources.LogicalRelation
import org.apache.spark.sql.types.{BinaryType, BooleanType, ByteType, DataType, DateType, DecimalType, IntegerType,
  LongType, ShortType, StringType, StructField, StructType, TimestampNTZType, TimestampType}

/**
 * A refresh's merge classified in the driver when both sides are small: the view's candidate rows
 * (counted by their files' statistics) and the merge's source rows are collected, matched by a hash
 * on the equality conditions of ON, and each pair or lone row gets the action the distributed merge
 * would give it (RefreshCommit.merge). The view's files are then rewritten by one write job.
 *
 * Why: the distributed merge is a full outer join with a shuffle on each side and a pass over its
 * cached result, five to ten Spark jobs whose scheduling, not their rows, takes 0.5-1 s of a small
 * refresh on two cores. Collecting the two sides is one job each. The driver's matching grows with
 * the rows, though: at 46,000 new rows against 60,000 of the view it took 0.5-0.9 s and its write
 * was slower than the distributed merge's (4.1-4.2 s against 3.3 s for the whole refresh,
 * bench/refresh.py at 10M rows), hence the limit of 20,000 rows a side.
 *
 * It falls back (None) to the distributed merge when the view's candidates hold more than
 * `mv.localMergeRows` rows (20,000; 0 turns it off): files read whole counted by their statistics,
 * files that keep their rows under a deletion vector (read through `target_filter`, which
 * statistics cannot count) by reading at most that many rows plus one per partition; when the
 * source's scans read more than 256 bytes per such row (5.1 MB) after file skipping, when ON has
 * no equality to hash on, a subquery, or keys whose equality is not that of their bytes
 * (floating point, collated strings, nested types), and when
 * the source returns more rows than the limit, which the distributed merge then computes again.
 *
 * Example: a 1,000-row change touching 18 one-minute windows of 100 keys: the view's file (1,700
 * rows) and the 1,800 recomputed rows are collected, 1,700 pairs match, 100 rows are new.
 */
object LocalMerge {
  val MaxRowsConf = "mv.localMergeRows"
  val DefaultMaxRows = 20000L
  /** The source's scans may read at most this many bytes per row allowed (5.1 MB at the default
   *  limit); a source that reads more is left to the distributed merge without being tried. */
  val BytesPerRow = 256L

  /** The merged rows, as RefreshCommit's `classified` frame, and its rows per (action, file). */
  case class Classified(rows: DataFrame, perFile: Seq[RefreshCommit.FileRows])

  /** What the view's files say of its candidate rows: `whole`, the rows of the files read whole by
   *  their statistics (None: some file has none); `filtered`, whether some files are read through
   *  `target_filter` (those under deletion vectors), whose rows only reading them counts. */
  case class TargetSize(whole: Option[Long], filtered: Boolean)

  /**
   * `target`: the view's candidate rows with `__file` and `__row`; `size`: what statistics say of
   * them; `source`: the merge's source rows (with `__op`).
   */
  def classify(spark: SparkSession, spec: RefreshCommit.Spec, columns: Seq[String], target: DataFrame,
      size: TargetSize, source: DataFrame): Option[Classified] = {
    val max = RefreshCommit.rowsSetting(spark, MaxRowsConf, DefaultMaxRows, " (0: never)")
    if (max <= 0 || !size.whole.exists(_ <= max)) return None
    val tAttrs = DataTypeUtils.toAttributes(target.schema)
    val sAttrs = DataTypeUtils.toAttributes(source.schema)
    val conditions = resolved(spark, spec, columns, tAttrs, sAttrs).getOrElse(return None)
    val keys = equalityKeys(conditions.on, AttributeSet(tAttrs), AttributeSet(sAttrs))
    if (keys.isEmpty || !keys.forall { case (t, _, _) => hashable(t.dataType) }) return None
    val limit = math.min(max + 1, Int.MaxValue.toLong).toInt
    val limited = source.limit(limit)
    if (!readsAtMost(limited, max * BytesPerRow)) return None
    // Filtered files are counted first, by reading them: a view side too large costs a scan bounded
    // per partition (one job, where a limit's collect tries partitions in turn), not the source's recomputation.
    val bounded = if (size.filtered) Some(DataFrameUtils.ofRows(spark, LocalLimit(Literal(limit), target.queryExecution.logical))
      .collect()) else None
    if (bounded.exists(_.length > max)) return None
    val sourceRows = limited.collect()
    if (sourceRows.length > max) return None
    Some(new Matcher(spec, columns, tAttrs, sAttrs, conditions, keys).run(bounded.getOrElse(target.collect()), sourceRows, spark))
  }

  /** The conditions of a merge, resolved against `t` and `s` as Spark resolves them in the
   *  distributed merge: ON, whether a matched pair is the same row (`<=>` on every column), and
   *  the delete-missing condition. */
  private case class Conditions(on: Expression, same: Expression, missing: Option[Expression])

  /** None if a condition holds a subquery or is not deterministic. */
  private def resolved(spark: SparkSession, spec: RefreshCommit.Spec, columns: Seq[String], tAttrs: Seq[Attribute],
      sAttrs: Seq[Attribute]): Option[Conditions] = {
    val parser = spark.sessionState.sqlParser
    val join = Join(SubqueryAlias("t", LocalRelation(tAttrs)), SubqueryAlias("s", LocalRelation(sAttrs)), FullOuter,
      Some(parser.parseExpression(spec.on.get)), JoinHint.NONE)
    val same = columns.map(c => EqualNullSafe(UnresolvedAttribute(Seq("t", c)), UnresolvedAttribute(Seq("s", c))))
      .reduce[Expression](And(_, _))
    val missing = spec.deleteMissing.map(parser.parseExpression).toSeq
    val projected = (same +: missing).zipWithIndex.map { case (e, i) => Alias(e, s"__c$i")() }
    // Constants folded and long IN lists made hash sets, as the optimizer does for the distributed merge.
    val analyzed = OptimizeIn(ConstantFolding(spark.sessionState.executePlan(Project(projected, join)).analyzed))
    val on = analyzed.collectFirst { case j: Join => j.condition.get }.get
    val list = analyzed.collectFirst { case Project(list, _: Join) => list.map(_.asInstanceOf[Alias].child) }.get
    val all = on +: list
    if (all.exists(e => e.exists(_.isInstanceOf[SubqueryExpression]) || !e.deterministic)) None
    else Some(Conditions(on, list.head, list.lift(1)))
  }

  /** The equalities of ON between an expression of `t` and one of `s`: (t side, s side, null-safe). */
  private def equalityKeys(on: Expression, t: AttributeSet, s: AttributeSet): Seq[(Expression, Expression, Boolean)] = {
    def conjuncts(e: Expression): Seq[Expression] = e match {
      case And(a, b) => conjuncts(a) ++ conjuncts(b)
      case other => Seq(other)
    }
    def side(a: Expression, b: Expression, nullSafe: Boolean) =
      if (a.references.nonEmpty && b.references.nonEmpty && a.references.subsetOf(t) && b.references.subsetOf(s)) {
        Some((a, b, nullSafe))
      } else if (a.references.nonEmpty && b.references.nonEmpty && b.references.subsetOf(t) && a.references.subsetOf(s)) {
        Some((b, a, nullSafe))
      } else None
    conjuncts(on).flatMap {
      case EqualTo(a, b) if a.dataType == b.dataType => side(a, b, nullSafe = false)
      case EqualNullSafe(a, b) if a.dataType == b.dataType => side(a, b, nullSafe = true)
      case _ => None
    }
  }

  /** Types whose values are equal exactly when their bytes in an UnsafeRow are. */
  private def hashable(dataType: DataType): Boolean = dataType match {
    case BooleanType | ByteType | ShortType | IntegerType | LongType | DateType | TimestampType | TimestampNTZType |
         BinaryType => true
    case s: StringType => s == StringType  // UTF8_BINARY; a collated string may equal other bytes
    case d: DecimalType => true
    case _ => false
  }

  /** Whether the frame's scans read at most `bytes`: first by their statistics (a Delta table's
   *  whole size unless SmallDeltaScans listed its files; cached and local rows), and when that says
   *  more, by the files they open as planned, after file skipping (listed in the driver for a table
   *  FileLists keeps, else by Delta's filtering job): only a source that looks large pays for it. */
  private def readsAtMost(frame: DataFrame, bytes: Long): Boolean = {
    val leaves = frame.queryExecution.optimizedPlan.collectLeaves()
    leaves.map(_.stats.sizeInBytes).sum <= bytes || {
      val others = leaves.filterNot(_.isInstanceOf[LogicalRelation]).map(_.stats.sizeInBytes).sum
      others + ScanBytes.fileSizes(frame.queryExecution.sparkPlan).sum <= bytes
    }
  }

  /** Matches the two sides and gives every row the action RefreshCommit.merge documents. */
  private class Matcher(spec: RefreshCommit.Spec, columns: Seq[String], tAttrs: Seq[Attribute],
      sAttrs: Seq[Attribute], conditions: Conditions,
      keys: Seq[(Expression, Expression, Boolean)]) {
    private val both = tAttrs ++ sAttrs
    private def bound(e: Expression, attrs: Seq[Attribute]) = BindReferences.bindReference(e, attrs)
    private val on = bound(conditions.on, both)
    private val same = bound(conditions.same, both)
    private val missing = conditions.missing.map(bound(_, both))
    private val tKey = InterpretedUnsafeProjection.createProjection(keys.map(k => bound(k._1, tAttrs)))
    private val sKey = InterpretedUnsafeProjection.createProjection(keys.map(k => bound(k._2, sAttrs)))
    private val strict = keys.zipWithIndex.collect { case ((_, _, false), i) => i }
    private val tColumns = columns.map(c => tAttrs.indexWhere(_.name == c))
    private val sColumns = columns.map(c => sAttrs.indexWhere(_.name == c))
    private val opIndex = sAttrs.indexWhere(_.name == "__op")
    private val fileIndex = tAttrs.indexWhere(_.name == "__file")
    private val rowIndex = tAttrs.indexWhere(_.name == "__row")

    private def key(projection: UnsafeProjection, row: GenericInternalRow): Option[UnsafeRow] = {
      val k = projection(row)
      if (strict.exists(k.isNullAt)) None else Some(k.copy())  // NULL = anything matches nothing
    }

    def run(targetRows: Array[Row], sourceRows: Array[Row], spark: SparkSession): Classified = {
      val t = internal(targetRows, tAttrs)
      val s = internal(sourceRows, sAttrs)
      val bySource = mutable.HashMap.empty[UnsafeRow, mutable.ArrayBuffer[Int]]
      s.indices.foreach(i => key(sKey, s(i)).foreach(k => bySource.getOrElseUpdate(k, mutable.ArrayBuffer.empty) += i))
      val matchedSources = new java.util.BitSet(s.length)
      val nullSource = new GenericInternalRow(sAttrs.length)
      val out = mutable.ArrayBuffer.empty[Row]
      t.indices.foreach { i =>
        val joined = new JoinedRow(t(i), nullSource)
        val matches = key(tKey, t(i)).flatMap(bySource.get).getOrElse(Nil)
          .filter(j => on.eval(joined.withRight(s(j))) == true)
        matches.foreach(j => matchedSources.set(j))
        if (matches.isEmpty) {
          val deleted = missing.exists(_.eval(joined.withRight(nullSource)) == true)
          out += record(if (deleted) "delete" else "keep", Some(targetRows(i)), None)
        } else matches.foreach { j =>
          val action = if (spec.deleteMatched || op(sourceRows(j)) == "delete") "delete"
            else if (same.eval(joined.withRight(s(j))) == true) "keep" else "update"
          out += record(action, Some(targetRows(i)), Some(sourceRows(j)))
        }
      }
      sourceRows.indices.filterNot(j => matchedSources.get(j)).foreach { j =>
        if (Set("upsert", "insert").contains(op(sourceRows(j)))) out += record("insert", None, Some(sourceRows(j)))
      }
      val perFile = out.groupBy(r => (r.getString(0), Option(r.getString(1)))).toSeq.map { case ((a, f), rows) =>
        val changed = if (a == "update" || a == "delete") rows.map(_.getLong(2)).toSeq else Nil
        RefreshCommit.FileRows(a, f, rows.size.toLong, rows.count(!_.isNullAt(3)).toLong, changed)
      }
      Classified(spark.createDataFrame(out.asJava, schema), perFile)
    }

    private def op(source: Row): String = if (opIndex < 0) null else source.getString(opIndex)

    private def record(action: String, target: Option[Row], source: Option[Row]): Row = Row(action,
      target.map(_.getString(fileIndex)).orNull, target.map(_.getLong(rowIndex)).orNull, source.map(_ => true).orNull,
      Row.fromSeq(tColumns.map(i => target.map(_.get(i)).orNull)),
      Row.fromSeq(sColumns.map(i => source.map(_.get(i)).orNull)))

    private def internal(rows: Array[Row], attrs: Seq[Attribute]): Array[GenericInternalRow] = {
      val convert = CatalystTypeConverters.createToCatalystConverter(DataTypeUtils.fromAttributes(attrs))
      rows.map(r => convert(r).asInstanceOf[GenericInternalRow])
    }

    private def image(attrs: Seq[Attribute], indices: Seq[Int]) =
      StructType(columns.zip(indices).map { case (c, i) => StructField(c, attrs(i).dataType) })
    /** RefreshCommit.merge's `classified` frame: the view row and the source row as they were read. */
    val schema: StructType = StructType(Seq(StructField("__action", StringType), StructField("__file", StringType),
      StructField("__row", LongType), StructField("__in_source", BooleanType), StructField("__old", image(tAttrs, tColumns)),
      StructField("__new", image(sAttrs, sColumns))))
  }
}
