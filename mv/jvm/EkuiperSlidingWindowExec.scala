package io.mvengine

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Alias, Ascending, Attribute, AttributeReference, AttributeSet, CurrentRow, Expression, FrameType, GenericInternalRow, Literal, NamedExpression, RangeFrame, RowFrame, RowNumber, SortOrder, SpecifiedWindowFrame, UnboundedPreceding, UnsafeProjection, UnsafeRow, WindowExpression, WindowSpecDefinition}
import org.apache.spark.sql.catalyst.expressions.aggregate.{AggregateExpression, Complete}
import org.apache.spark.sql.catalyst.expressions.codegen.GenerateUnsafeRowJoiner
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, Window}
import org.apache.spark.sql.catalyst.plans.physical.{AllTuples, Distribution}
import org.apache.spark.sql.catalyst.types.DataTypeUtils
import org.apache.spark.sql.execution.{SparkPlan, SparkStrategy, UnaryExecNode}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.{IntegerType, LongType}

/**
 * eKuiper's SLIDINGWINDOW without other GROUP BY keys, in one pass: each row's aggregates over the
 * rows whose time is in [t + lower, t + upper], kept incrementally as rows enter and leave.
 *
 * [[EkuiperWindows]] writes the window as `agg(...) OVER (ORDER BY _mv_micros RANGE BETWEEN
 * size - 1 PRECEDING AND delay FOLLOWING)`. Spark's frame for that re-runs every aggregate over
 * all the frame's rows whenever the frame moves (SlidingWindowFunctionFrame), O(rows x frame);
 * here each row enters and leaves the aggregates once (see [[SlidingAggregate]]), O(rows). Output:
 * the child's columns and then the window expressions (`results`, each over its aggregates'
 * buffers), as Spark's WindowExec gives them, with equal values. Rows with equal times share one
 * frame, as in a RANGE frame. The time column is never NULL: the rewrite drops NULL times first.
 *
 * Example, lower -4, upper 0 over times 1, 4, 8, 8: count(*) is 1, 2, 3, 3.
 *
 * COUNTWINDOW(n, m) is written as `agg(...) OVER (ORDER BY time, _mv_tie ROWS BETWEEN n - 1
 * PRECEDING AND CURRENT ROW)` next to `row_number()` over the same order; with `frame` RowFrame the
 * bounds count rows instead of time (Spark's SlidingWindowFunctionFrame is O(rows x n) for it
 * too), and `results` may read [[EkuiperSlidingWindowExec.RowNumber]], the row's 1-based position.
 */
case class EkuiperSlidingWindowExec(windowExpressions: Seq[NamedExpression], aggregates: Seq[SlidingAggregate],
                                    results: Seq[Expression], order: Seq[SortOrder], frame: FrameType,
                                    lower: Long, upper: Long, child: SparkPlan)
  extends UnaryExecNode {

  override def output: Seq[Attribute] = child.output ++ windowExpressions.map(_.toAttribute)
  override def requiredChildDistribution: Seq[Distribution] = AllTuples :: Nil
  override def requiredChildOrdering: Seq[Seq[SortOrder]] = Seq(order)
  override def simpleString(maxFields: Int): String =
    s"EkuiperSlidingWindow [${windowExpressions.map(_.name).mkString(", ")}], " +
      s"${frame.sql} BETWEEN ${-lower} PRECEDING AND $upper FOLLOWING ON ${order.map(_.child.sql).mkString(", ")}"

  override protected def doExecute(): RDD[InternalRow] = {
    val (schema, bounds, byRows) = (child.output, (lower, upper), frame == RowFrame)
    val time = order.head.child.asInstanceOf[Attribute]
    val (aggregates, timeIndex) = (this.aggregates, child.output.indexWhere(_.exprId == time.exprId))
    val (values, results) = (windowExpressions.map(_.toAttribute), this.results)
    child.execute().mapPartitions { rows =>
      val inputs = UnsafeProjection.create(aggregates.flatMap(_.inputs), schema)
      val evaluate = UnsafeProjection.create(results,
        aggregates.flatMap(_.function.aggBufferAttributes) :+ EkuiperSlidingWindowExec.RowNumber)
      val joiner = GenerateUnsafeRowJoiner.create(DataTypeUtils.fromAttributes(schema), DataTypeUtils.fromAttributes(values))
      new SlidingFrame(rows.buffered, timeIndex, byRows, bounds, UnsafeProjection.create(schema, schema), inputs,
        aggregates, buffer => joiner.join(_, evaluate(buffer)))
    }
  }

  override protected def withNewChildInternal(newChild: SparkPlan): EkuiperSlidingWindowExec = copy(child = newChild)
}

object EkuiperSlidingWindowExec {
  /** The current row's `row_number()`, after the aggregates' buffers in the row `results` read. */
  val RowNumber: AttributeReference = AttributeReference("_mv_row_number", IntegerType, nullable = false)()
}

/**
 * The rows of the current frame, oldest first, as a ring; `next` moves the frame to the next row.
 * The ring holds exactly the frame: every row with key <= k + upper has been read, and every row
 * with key < k + lower has left it (keys ascend, lower <= 0 <= upper, so the row itself stays).
 * A row's key is its time, or with `byRows` its 0-based position.
 */
private final class SlidingFrame(input: BufferedIterator[InternalRow], timeIndex: Int, byRows: Boolean,
                                 bounds: (Long, Long),
                                 toUnsafe: UnsafeProjection, inputs: UnsafeProjection,
                                 aggregates: Seq[SlidingAggregate],
                                 emit: InternalRow => UnsafeRow => UnsafeRow) extends Iterator[InternalRow] {
  private val (lower, upper) = bounds
  private val ring = new Ring[(UnsafeRow, UnsafeRow)]
  private val accumulators = SlidingAggregates.accumulators(aggregates)
  private val offsets = SlidingAggregates.bufferOffsets(aggregates)
  private val rowNumberAt = aggregates.map(_.function.aggBufferAttributes.size).sum
  private val buffer = new GenericInternalRow(rowNumberAt + 1)
  private val output = emit(buffer)
  private var first = 0L // index of the ring's first row
  private var current = 0L // index of the next row to output

  private def read(): Unit = {
    val row = input.next()
    val entry = (toUnsafe(row).copy(), inputs(row).copy())
    val index = first + ring.size
    accumulators.foreach(_.add(index, entry._2))
    ring.push(if (byRows) index else row.getLong(timeIndex), entry)
  }

  private def nextKey: Long = if (byRows) first + ring.size else input.head.getLong(timeIndex)

  private def replay(f: InternalRow => Unit): Unit = (0 until ring.size).foreach(i => f(ring.item(i)._2))

  override def hasNext: Boolean = current < first + ring.size || input.hasNext

  override def next(): InternalRow = {
    if (current == first + ring.size) read()
    val t = ring.key((current - first).toInt)
    while (input.hasNext && nextKey <= t + upper) read()
    while (ring.key(0) < t + lower) {
      accumulators.foreach(_.remove(first, ring.item(0)._2))
      ring.popFront()
      first += 1
    }
    accumulators.zip(offsets).foreach { case (a, at) => a.write(buffer, at, replay) }
    buffer.setInt(rowNumberAt, (current + 1).toInt)
    val row = ring.item((current - first).toInt)._1
    current += 1
    output(row)
  }
}

/**
 * Plans the Windows that [[EkuiperWindows]] writes without keys as an [[EkuiperSlidingWindowExec]]
 * when every window expression is an aggregate it keeps exactly (see [[SlidingAggregate]]) over one
 * frame: for SLIDINGWINDOW a RANGE frame on the rewrite's own time column `_mv_micros`; for
 * COUNTWINDOW a ROWS frame ending at the current row, ordered by time and then the rewrite's own
 * `_mv_tie`, next to its `row_number()`. Any other Window, including hand-written frames, stays
 * Spark's. Off with `spark.mv.ekuiper.slidingExec=false` (then the Window runs as Spark's frame).
 */
object EkuiperSlidingWindowStrategy extends SparkStrategy {
  val EnabledConf = "spark.mv.ekuiper.slidingExec"
  /** The ordering column only EkuiperWindows' sliding rewrite names so. */
  val TimeColumn = "_mv_micros"
  /** The tie-breaking column only EkuiperWindows' count rewrite names so. */
  val TieColumn = "_mv_tie"

  override def apply(plan: LogicalPlan): Seq[SparkPlan] = plan match {
    case w: Window if SQLConf.get.getConfString(EnabledConf, "true").toBoolean =>
      planned(w).map(_(planLater(w.child))).toSeq
    case _ => Nil
  }

  private def planned(w: Window): Option[SparkPlan => SparkPlan] = w.orderSpec match {
    case Seq(SortOrder(time: Attribute, Ascending, _, _))
        if w.partitionSpec.isEmpty && time.name == TimeColumn && time.dataType == LongType =>
      onePass(w, RangeFrame)
    case Seq(SortOrder(_: Attribute, Ascending, _, _), SortOrder(tie: Attribute, Ascending, _, _))
        if w.partitionSpec.isEmpty && tie.name == TieColumn =>
      onePass(w, RowFrame)
    case _ => None
  }

  private def onePass(w: Window, frameType: FrameType): Option[SparkPlan => SparkPlan] = {
    val framed = w.windowExpressions.map(windowed(_, w.orderSpec, frameType))
    val frames = framed.flatten.flatMap(_._2.map(f => (f._1, f._2))).distinct
    if (framed.exists(_.isEmpty) || frames.size != 1) return None
    val (lower, upper) = frames.head
    val aggregates = framed.flatten.flatMap(_._2.map(_._3))
    val results = framed.flatten.map(_._1)
    val buffers = AttributeSet(aggregates.flatMap(_.function.aggBufferAttributes) :+ EkuiperSlidingWindowExec.RowNumber)
    if (!results.forall(_.references.subsetOf(buffers))) None
    else Some(EkuiperSlidingWindowExec(w.windowExpressions, aggregates, results, w.orderSpec, frameType, lower, upper, _))
  }

  /**
   * One window column: its value as an expression over its aggregates' buffers, and each
   * aggregate with its frame. The optimizer may have wrapped the window function (DecimalAggregates
   * turns avg of a small DECIMAL into avg of its unscaled BIGINT, divided and cast); the wrapping
   * is kept, the function inside replaced by Spark's evaluation of its buffer. In a ROWS window,
   * `row_number()` is the row's position.
   */
  private def windowed(e: NamedExpression, order: Seq[SortOrder],
                       frameType: FrameType): Option[(Expression, Seq[(Long, Long, SlidingAggregate)])] =
    e match {
      case Alias(RowNumbered(o), _) if frameType == RowFrame && sameOrder(o, order) =>
        Some(EkuiperSlidingWindowExec.RowNumber -> Nil)
      case Alias(child, _) =>
        val windows = child.collect { case w: WindowExpression => w }
        val framed = windows.map(w => w -> frame(w, order, frameType))
        if (windows.isEmpty || framed.exists(_._2.isEmpty)) None
        else {
          val byWindow = framed.map { case (w, f) => w -> f.get }.toMap
          val result = child.transform { case w: WindowExpression => byWindow(w)._3.function.evaluateExpression }
          Some(result -> framed.map(_._2.get))
        }
      case _ => None
    }

  /** The order of `row_number() OVER (ORDER BY ...)` with its default running frame. */
  private object RowNumbered {
    def unapply(e: Expression): Option[Seq[SortOrder]] = e match {
      case WindowExpression(_: RowNumber,
          WindowSpecDefinition(Nil, order, SpecifiedWindowFrame(RowFrame, UnboundedPreceding, CurrentRow))) => Some(order)
      case _ => None
    }
  }

  private def sameOrder(a: Seq[SortOrder], b: Seq[SortOrder]): Boolean =
    a.size == b.size && a.zip(b).forall { case (x, y) => x.direction == y.direction && x.child.semanticEquals(y.child) }

  /** (lower, upper, aggregate) of `agg(...) OVER (ORDER BY order <frameType> BETWEEN lower AND upper)`. */
  private def frame(e: WindowExpression, order: Seq[SortOrder],
                    frameType: FrameType): Option[(Long, Long, SlidingAggregate)] = e match {
    case WindowExpression(AggregateExpression(f, Complete, false, None, _),
        WindowSpecDefinition(Nil, o, SpecifiedWindowFrame(t, lo, up)))
        if t == frameType && sameOrder(o, order) =>
      for {
        lower <- offset(lo) if lower <= 0
        upper <- offset(up) if upper >= 0 && (frameType == RangeFrame || upper == 0)
        aggregate <- SlidingAggregate.of(f)
      } yield (lower, upper, aggregate)
    case _ => None
  }

  private def offset(e: Expression): Option[Long] = e match {
    case CurrentRow => Some(0L)
    case Literal(v: Long, LongType) => Some(v)
    case Literal(v: Int, IntegerType) => Some(v.toLong)
    case _ => None
  }
}
