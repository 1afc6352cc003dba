package io.mvengine

import scala.collection.mutable

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Ascending, Attribute, AttributeSet, BindReferences, Expression, JoinedRow, SortOrder, UnsafeProjection, UnsafeRow}
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, UnaryNode}
import org.apache.spark.sql.catalyst.plans.physical.{AllTuples, ClusteredDistribution, Distribution}
import org.apache.spark.sql.execution.{SparkPlan, SparkStrategy, UnaryExecNode}

/**
 * Esper's time_length_batch(size, count) over a table: a batch closes when it has `count` rows or
 * when its interval ends, whichever comes first. Which one comes first depends on every earlier
 * batch (a count flush restarts the interval), so no window function can number the batches; this
 * operator replays each partition's rows in order, as Esper's view does:
 *  - the first row after an idle spell opens an interval [t, t + size);
 *  - at an interval's end the batch (if any) is released; the next interval starts right away if
 *    this or the previous interval had rows, else the window idles until the next row;
 *  - the count-th row releases the batch at once and opens the next interval at its own time.
 * Each row gets `batch` (1, 2, ... per partition), `batch_start` and `batch_end` (epoch µs): the
 * interval's start and the release time (its end, or the count-th row's time + 1 µs). The last,
 * still open batch ends at its interval's end. Example, size 10 s, count 2, rows at 0, 1, 2, 45 s:
 * batches {0, 1} [0, 1 s + 1 µs), {2} [1 s, 11 s), then [11 s, 21 s) and [21 s, 31 s) are empty, the
 * window idles, and {45} is [45 s, 55 s).
 */
case class EsperTimeLengthBatch(partitionBy: Seq[Expression], order: Seq[SortOrder], timeMicros: Expression,
                                size: Long, count: Long, batchOutput: Seq[Attribute], child: LogicalPlan)
  extends UnaryNode {

  override def output: Seq[Attribute] = child.output ++ batchOutput
  override def producedAttributes: AttributeSet = AttributeSet(batchOutput)
  override protected def withNewChildInternal(newChild: LogicalPlan): EsperTimeLengthBatch = copy(child = newChild)
}

case class EsperTimeLengthBatchExec(partitionBy: Seq[Expression], order: Seq[SortOrder], timeMicros: Expression,
                                    size: Long, count: Long, batchOutput: Seq[Attribute], child: SparkPlan)
  extends UnaryExecNode {

  override def output: Seq[Attribute] = child.output ++ batchOutput

  override def requiredChildDistribution: Seq[Distribution] =
    if (partitionBy.isEmpty) AllTuples :: Nil else ClusteredDistribution(partitionBy) :: Nil

  override def requiredChildOrdering: Seq[Seq[SortOrder]] = Seq(partitionBy.map(SortOrder(_, Ascending)) ++ order)

  override protected def doExecute(): RDD[InternalRow] = {
    val (input, keys, time, sizeMicros, limit) = (child.output, partitionBy, timeMicros, size, count)
    child.execute().mapPartitions { rows =>
      new TimeLengthBatches(rows, UnsafeProjection.create(keys, input), BindReferences.bindReference(time, input),
        UnsafeProjection.create(input ++ batchOutput, input ++ batchOutput), sizeMicros, limit)
    }
  }

  override protected def withNewChildInternal(newChild: SparkPlan): EsperTimeLengthBatchExec = copy(child = newChild)
}

object EsperTimeLengthBatchStrategy extends SparkStrategy {
  override def apply(plan: LogicalPlan): Seq[SparkPlan] = plan match {
    case b: EsperTimeLengthBatch =>
      EsperTimeLengthBatchExec(b.partitionBy, b.order, b.timeMicros, b.size, b.count, b.batchOutput,
        planLater(b.child)) :: Nil
    case _ => Nil
  }
}

/** The replay of [[EsperTimeLengthBatch]] over rows sorted by key, then time; a batch is buffered until released. */
private class TimeLengthBatches(rows: Iterator[InternalRow], keyOf: UnsafeProjection, timeOf: Expression,
                                toOutput: UnsafeProjection, size: Long, count: Long) extends Iterator[InternalRow] {
  private val ready = mutable.Queue[InternalRow]()
  private val batch = mutable.ArrayBuffer[InternalRow]()
  private var key: UnsafeRow = _
  private var batchNumber, batchStart, deadline = 0L
  private var timed, previousHadRows, finished = false

  override def hasNext: Boolean = {
    while (ready.isEmpty && rows.hasNext) consume(rows.next())
    if (ready.isEmpty && !finished) { finished = true; closeOpenBatch() }
    ready.nonEmpty
  }

  override def next(): InternalRow = {
    if (!hasNext) throw new NoSuchElementException
    ready.dequeue()
  }

  private def consume(row: InternalRow): Unit = {
    val rowKey = keyOf(row)
    if (key == null || rowKey != key) {
      closeOpenBatch()
      key = rowKey.copy()
      batchNumber = 0; timed = false; previousHadRows = false
    }
    val t = timeOf.eval(row).asInstanceOf[Long]
    while (timed && t >= deadline) intervalEnds()
    if (!timed) { timed = true; batchStart = t; deadline = t + size }
    batch += row.copy()
    if (batch.size >= count) {
      release(t + 1)
      previousHadRows = true; batchStart = t; deadline = t + size
    }
  }

  private def intervalEnds(): Unit = {
    val hadRows = batch.nonEmpty
    if (hadRows) release(deadline)
    if (hadRows || previousHadRows) { batchStart = deadline; deadline += size } else timed = false
    previousHadRows = hadRows
  }

  private def closeOpenBatch(): Unit = if (batch.nonEmpty) release(deadline)

  private def release(end: Long): Unit = {
    batchNumber += 1
    val window = InternalRow(batchNumber, batchStart, end)
    batch.foreach(row => ready += toOutput(new JoinedRow(row, window)).copy())
    batch.clear()
  }
}
