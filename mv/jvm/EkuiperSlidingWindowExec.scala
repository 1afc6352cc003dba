package io.mvengine

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Alias, Ascending, Attribute, AttributeSet, CurrentRow, Expression, GenericInternalRow, Literal, NamedExpression, RangeFrame, SortOrder, SpecifiedWindowFrame, UnsafeProjection, UnsafeRow, WindowExpression, WindowSpecDefinition}
import org.apache.spark.sql.catalyst.expressions.aggregate.{AggregateExpression, Complete}
import org.apache.spark.sql.catalyst.expressions.codegen.GenerateUnsafeRowJoiner
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, Window}
import org.apache.spark.sql.catalyst.plans.physical.{AllTuples, Distribution}
import org.apache.spark.sql.catalyst.types.DataTypeUtils
import org.apache.spark.sql.execution.{SparkPlan, SparkStrategy, UnaryExecNode}
import org.apache.spark.sql.internal.SQLConf
import org.apache.spark.sql.types.LongType

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
 */
case class EkuiperSlidingWindowExec(windowExpressions: Seq[NamedExpression], aggregates: Seq[SlidingAggregate],
                                    results: Seq[Expression], time: Attribute, lower: Long, upper: Long,
                                    child: SparkPlan)
  extends UnaryExecNode {

  override def output: Seq[Attribute] = child.output ++ windowExpressions.map(_.toAttribute)
  override def requiredChildDistribution: Seq[Distribution] = AllTuples :: Nil
  override def requiredChildOrdering: Seq[Seq[SortOrder]] = Seq(Seq(SortOrder(time, Ascending)))
  override def simpleString(maxFields: Int): String =
    s"EkuiperSlidingWindow [${windowExpressions.map(_.name).mkString(", ")}], " +
      s"RANGE BETWEEN ${-lower} PRECEDING AND $upper FOLLOWING ON ${time.name}"

  override protected def doExecute(): RDD[InternalRow] = {
    val (schema, bounds) = (child.output, (lower, upper))
    val (aggregates, timeIndex) = (this.aggregates, child.output.indexWhere(_.exprId == time.exprId))
    val (values, results) = (windowExpressions.map(_.toAttribute), this.results)
    child.execute().mapPartitions { rows =>
      val inputs = UnsafeProjection.create(aggregates.flatMap(_.inputs), schema)
      val evaluate = UnsafeProjection.create(results, aggregates.flatMap(_.function.aggBufferAttributes))
      val joiner = GenerateUnsafeRowJoiner.create(DataTypeUtils.fromAttributes(schema), DataTypeUtils.fromAttributes(values))
      new SlidingFrame(rows.buffered, timeIndex, bounds, UnsafeProjection.create(schema, schema), inputs, aggregates,
        buffer => joiner.join(_, evaluate(buffer)))
    }
  }

  override protected def withNewChildInternal(newChild: SparkPlan): EkuiperSlidingWindowExec = copy(child = newChild)
}

/**
 * The rows of the current frame, oldest first, as a ring; `next` moves the frame to the next row.
 * The ring holds exactly the frame: every row with time <= t + upper has been read, and every row
 * with time < t + lower has left it (times ascend, lower <= 0 <= upper, so the row itself stays).
 */
private final class SlidingFrame(input: BufferedIterator[InternalRow], timeIndex: Int, bounds: (Long, Long),
                                 toUnsafe: UnsafeProjection, inputs: UnsafeProjection,
                                 aggregates: Seq[SlidingAggregate],
                                 emit: InternalRow => UnsafeRow => UnsafeRow) extends Iterator[InternalRow] {
  private val (lower, upper) = bounds
  private val ring = new Ring[(UnsafeRow, UnsafeRow)]
  private val accumulators = SlidingAggregates.accumulators(aggregates)
  private val offsets = SlidingAggregates.bufferOffsets(aggregates)
  private val buffer = new GenericInternalRow(aggregates.map(_.function.aggBufferAttributes.size).sum)
  private val output = emit(buffer)
  private var first = 0L // index of the ring's first row
  private var current = 0L // index of the next row to output

  private def read(): Unit = {
    val row = input.next()
    val entry = (toUnsafe(row).copy(), inputs(row).copy())
    val index = first + ring.size
    accumulators.foreach(_.add(index, entry._2))
    ring.push(row.getLong(timeIndex), entry)
  }

  private def replay(f: InternalRow => Unit): Unit = (0 until ring.size).foreach(i => f(ring.item(i)._2))

  override def hasNext: Boolean = current < first + ring.size || input.hasNext

  override def next(): InternalRow = {
    if (current == first + ring.size) read()
    val t = ring.key((current - first).toInt)
    while (input.hasNext && input.head.getLong(timeIndex) <= t + upper) read()
    while (ring.key(0) < t + lower) {
      accumulators.foreach(_.remove(first, ring.item(0)._2))
      ring.popFront()
      first += 1
    }
    accumulators.zip(offsets).foreach { case (a, at) => a.write(buffer, at, replay) }
    val row = ring.item((current - first).toInt)._1
    current += 1
    output(row)
  }
}

/**
 * Plans the Window that [[EkuiperWindows]] writes for a SLIDINGWINDOW without keys as an
 * [[EkuiperSlidingWindowExec]] when every window expression is an aggregate it keeps exactly (see
 * [[SlidingAggregate]]) over the same RANGE frame on the rewrite's own time column; any other
 * Window, including a hand-written RANGE frame, stays Spark's. Off with
 * `spark.mv.ekuiper.slidingExec=false` (then the Window runs as Spark's frame, as before).
 */
object EkuiperSlidingWindowStrategy extends SparkStrategy {
  val EnabledConf = "spark.mv.ekuiper.slidingExec"
  /** The ordering column only EkuiperWindows' sliding rewrite names so. */
  val TimeColumn = "_mv_micros"

  override def apply(plan: LogicalPlan): Seq[SparkPlan] = plan match {
    case w: Window if SQLConf.get.getConfString(EnabledConf, "true").toBoolean =>
      planned(w).map(_(planLater(w.child))).toSeq
    case _ => Nil
  }

  private def planned(w: Window): Option[SparkPlan => SparkPlan] = w.orderSpec match {
    case Seq(SortOrder(time: Attribute, Ascending, _, _))
        if w.partitionSpec.isEmpty && time.name == TimeColumn && time.dataType == LongType =>
      val framed = w.windowExpressions.map(windowed(_, time))
      val frames = framed.flatten.flatMap(_._2.map(f => (f._1, f._2))).distinct
      if (framed.exists(_.isEmpty) || frames.size != 1) return None
      val (lower, upper) = frames.head
      val aggregates = framed.flatten.flatMap(_._2.map(_._3))
      val results = framed.flatten.map(_._1)
      val buffers = AttributeSet(aggregates.flatMap(_.function.aggBufferAttributes))
      if (!results.forall(_.references.subsetOf(buffers))) None
      else Some(EkuiperSlidingWindowExec(w.windowExpressions, aggregates, results, time, lower, upper, _))
    case _ => None
  }

  /**
   * One window column: its value as an expression over its aggregates' buffers, and each
   * aggregate with its frame. The optimizer may have wrapped the window function (DecimalAggregates
   * turns avg of a small DECIMAL into avg of its unscaled BIGINT, divided and cast); the wrapping
   * is kept, the function inside replaced by Spark's evaluation of its buffer.
   */
  private def windowed(e: NamedExpression, time: Attribute): Option[(Expression, Seq[(Long, Long, SlidingAggregate)])] =
    e match {
      case Alias(child, _) =>
        val windows = child.collect { case w: WindowExpression => w }
        val framed = windows.map(w => w -> frame(w, time))
        if (windows.isEmpty || framed.exists(_._2.isEmpty)) None
        else {
          val byWindow = framed.map { case (w, f) => w -> f.get }.toMap
          val result = child.transform { case w: WindowExpression => byWindow(w)._3.function.evaluateExpression }
          Some(result -> framed.map(_._2.get))
        }
      case _ => None
    }

  /** (lower, upper, aggregate) of `agg(...) OVER (ORDER BY time RANGE BETWEEN lower AND upper)`. */
  private def frame(e: WindowExpression, time: Attribute): Option[(Long, Long, SlidingAggregate)] = e match {
    case WindowExpression(AggregateExpression(f, Complete, false, None, _),
        WindowSpecDefinition(Nil, Seq(SortOrder(o, Ascending, _, _)), SpecifiedWindowFrame(RangeFrame, lo, up)))
        if o.semanticEquals(time) =>
      for {
        lower <- offset(lo) if lower <= 0
        upper <- offset(up) if upper >= 0
        aggregate <- SlidingAggregate.of(f)
      } yield (lower, upper, aggregate)
    case _ => None
  }

  private def offset(e: Expression): Option[Long] = e match {
    case CurrentRow => Some(0L)
    case Literal(v: Long, LongType) => Some(v)
    case _ => None
  }
}
