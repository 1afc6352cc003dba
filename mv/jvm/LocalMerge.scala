package io.mvengine

import scala.collection.mutable

import org.apache.spark.sql.DataFrame
import org.apache.spark.sql.catalyst.InternalRow
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
import org.apache.spark.sql.execution.SQLExecution
import org.apache.spark.sql.execution.datasources.LogicalRelation
import org.apache.spark.sql.types.{BinaryType, BooleanType, ByteType, DataType, DateType, DecimalType, IntegerType,
  LongType, ShortType, StringType, StructField, StructType, TimestampNTZType, TimestampType}
import org.apache.spark.unsafe.types.UTF8String

import io.mvengine.{InternalColumns => IC}  // the helper columns beside the view's

/**
 * A refresh's merge classified in the driver when both sides are small: the view's candidate rows
 * (counted by their files' statistics) and the merge's source rows are collected, matched by a hash
 * on the equality conditions of ON, and each pair or lone row gets the action the distributed merge
 * would give it (RefreshCommit.merge). The view's files are then rewritten by one write job.
 *
 * Why: the distributed merge is a full outer join with a shuffle on each side and a pass over its
 * cached result, five to ten Spark jobs whose scheduling, not their rows, takes 0.5-1 s of a small
 * refresh on two cores. Collecting the two sides is one job each; the rows stay as Spark holds
 * them (InternalRow), so matching 23,000-61,000 view rows against 46,000 new ones takes 0.1-0.3 s.
 * Writing grows faster than the distributed merge's write, though: the matched rows go from the
 * driver into the write job's tasks, and at those sizes that took 1.3-1.8 s against 0.5 s for the
 * write from the distributed merge's cached join (bench/refresh.py at 10M rows, 1% change: whole
 * refreshes of 3.9-4.8 s against 2.9-3.9 s in alternating rounds), hence the limit of 20,000 rows a side.
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
   * `target`: the view's candidate rows with `__mv_file` and `__mv_row`; `size`: what statistics say of
   * them; `source`: the merge's source rows (with `__mv_op`).
   */
  def classify(spark: SparkSession, spec: RefreshCommit.Spec, columns: Seq[String], target: DataFrame,
      size: TargetSize, source: DataFrame): Option[Classified] = {
    val max = RefreshCommit.wholeNumberSetting(spark, MaxRowsConf, DefaultMaxRows, "rows", " (0: never)")
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
    val bounded = if (size.filtered) Some(collected(DataFrameUtils.ofRows(spark, LocalLimit(Literal(limit),
      target.queryExecution.logical)))) else None
    if (bounded.exists(_.length > max)) return None
    val sourceRows = collected(limited)
    if (sourceRows.length > max) return None
    Some(new Matcher(spec, columns, tAttrs, sAttrs, conditions, keys).run(bounded.getOrElse(collected(target)),
      sourceRows, spark))
  }

  /** The frame's rows as Spark holds them (no conversion to Row and back), as one SQL execution. */
  private def collected(frame: DataFrame): Array[InternalRow] = {
    val execution = frame.queryExecution
    SQLExecution.withNewExecutionId(execution, Some("collect"))(execution.executedPlan.executeCollect())
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
    val projected = (same +: missing).zipWithIndex.map { case (e, i) => Alias(e, s"${IC.Condition}$i")() }
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
    private val opIndex = sAttrs.indexWhere(_.name == IC.Op)
    private val fileIndex = tAttrs.indexWhere(_.name == IC.File)
    private val rowIndex = tAttrs.indexWhere(_.name == IC.Row)

    private def key(projection: UnsafeProjection, row: InternalRow): Option[UnsafeRow] = {
      val k = projection(row)
      if (strict.exists(k.isNullAt)) None else Some(k.copy())  // NULL = anything matches nothing
    }

    def run(t: Array[InternalRow], s: Array[InternalRow], spark: SparkSession): Classified = {
      val bySource = mutable.HashMap.empty[UnsafeRow, mutable.ArrayBuffer[Int]]
      s.indices.foreach(i => key(sKey, s(i)).foreach(k => bySource.getOrElseUpdate(k, mutable.ArrayBuffer.empty) += i))
      val matchedSources = new java.util.BitSet(s.length)
      val nullSource = new GenericInternalRow(sAttrs.length)
      val out = new Records
      t.indices.foreach { i =>
        val joined = new JoinedRow(t(i), nullSource)
        val matches = key(tKey, t(i)).flatMap(bySource.get).getOrElse(Nil)
          .filter(j => on.eval(joined.withRight(s(j))) == true)
        matches.foreach(j => matchedSources.set(j))
        if (matches.isEmpty) {
          val deleted = missing.exists(_.eval(joined.withRight(nullSource)) == true)
          out.add(if (deleted) "delete" else "keep", Some(t(i)), None)
        } else matches.foreach { j =>
          val action = if (spec.deleteMatched || op(s(j)) == "delete") "delete"
            else if (same.eval(joined.withRight(s(j))) == true) "keep" else "update"
          out.add(action, Some(t(i)), Some(s(j)))
        }
      }
      s.indices.filterNot(j => matchedSources.get(j)).foreach { j =>
        if (op(s(j)) == "upsert" || op(s(j)) == "insert") out.add("insert", None, Some(s(j)))
      }
      Classified(DataFrameUtils.ofRows(spark, LocalRelation(DataTypeUtils.toAttributes(schema), out.rows.toSeq)),
        out.perFile)
    }

    private def op(source: InternalRow): String =
      if (opIndex < 0 || source.isNullAt(opIndex)) null else source.getUTF8String(opIndex).toString

    /** The classified rows in RefreshCommit's shape, and their count per (action, file). Files stay
     *  as the rows hold them (UTF8String) until `perFile`: one conversion per file, not per row. */
    private class Records {
      val rows = mutable.ArrayBuffer.empty[InternalRow]
      private val counts =
        mutable.LinkedHashMap.empty[(String, Option[UTF8String]), (Array[Long], mutable.ArrayBuffer[Long])]
      private val actions = Seq("keep", "update", "delete", "insert").map(a => a -> UTF8String.fromString(a)).toMap

      def add(action: String, target: Option[InternalRow], source: Option[InternalRow]): Unit = {
        val file = target.map(_.getUTF8String(fileIndex))
        val index = target.map(_.getLong(rowIndex))
        rows += new GenericInternalRow(Array[Any](actions(action), file.orNull, index.getOrElse(null),
          source.map(_ => true).orNull, image(target, tAttrs, tColumns), image(source, sAttrs, sColumns)))
        val (n, changed) = counts.getOrElseUpdate((action, file), (Array(0L, 0L), mutable.ArrayBuffer.empty[Long]))
        n(0) += 1
        if (source.isDefined) n(1) += 1
        if (action == "update" || action == "delete") changed ++= index
      }

      def perFile: Seq[RefreshCommit.FileRows] = counts.toSeq.map { case ((action, file), (n, changed)) =>
        RefreshCommit.FileRows(action, file.map(_.toString), n(0), n(1), changed.toSeq) }
    }

    /** A row's columns of the view as a struct (all null for no row), as the distributed merge has them. */
    private def image(row: Option[InternalRow], attrs: Seq[Attribute], indices: Seq[Int]): InternalRow =
      new GenericInternalRow(indices.map(i => row.map(_.get(i, attrs(i).dataType)).orNull).toArray[Any])

    private def imageType(attrs: Seq[Attribute], indices: Seq[Int]) =
      StructType(columns.zip(indices).map { case (c, i) => StructField(c, attrs(i).dataType) })
    /** RefreshCommit.merge's `classified` frame: the view row and the source row as they were read. */
    val schema: StructType = StructType(Seq(StructField(IC.Action, StringType), StructField(IC.File, StringType),
      StructField(IC.Row, LongType), StructField(IC.InSource, BooleanType),
      StructField(IC.Old, imageType(tAttrs, tColumns)), StructField(IC.New, imageType(sAttrs, sColumns))))
  }
}
