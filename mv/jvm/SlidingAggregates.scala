package io.mvengine

import java.math.BigInteger

import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Cast, EvalMode, Expression}
import org.apache.spark.sql.catalyst.expressions.aggregate.{AggregateFunction, Average, Count, DeclarativeAggregate, Max, Min, Sum}
import org.apache.spark.sql.catalyst.util.TypeUtils
import org.apache.spark.sql.types._

/**
 * Aggregates kept over a moving frame by adding each row as it enters and removing it as it leaves,
 * so that each window costs O(1) (amortised) instead of a pass over its rows.
 *
 * Each one fills the aggregation buffer of Spark's own function ([[DeclarativeAggregate]]'s
 * `aggBufferAttributes`) with exactly the values Spark's frame would have computed, and Spark's
 * `evaluateExpression` turns the buffer into the result, so result types, NULLs and decimal
 * rounding are Spark's. Only functions whose buffer can be kept exactly are taken:
 *  - count(*), count(x, ...): rows whose arguments are all non-NULL;
 *  - sum of BYTE, SHORT, INT, BIGINT (a 128-bit total; past BIGINT, ANSI fails as Spark's frame
 *    does, legacy mode wraps as it does) and of DECIMAL(p, s) with p <= 18 (exact unscaled total);
 *  - avg of the same types: its BIGINT-input buffer is a DOUBLE sum, which equals the exact total
 *    while the absolute values add up to at most 2^53 (every partial sum is then exact); past that
 *    the window's DOUBLE sum is recomputed in the frame's row order, as Spark does;
 *  - min and max of any orderable atomic type: a monotonic deque whose head is the earliest of the
 *    extreme values, as Spark's `least` / `greatest` keep the first of equal values.
 * FLOAT and DOUBLE sums are left to Spark's frame: their rounding depends on the order of additions.
 *
 * Example: `SlidingAggregate.of(Sum(price))` for a BIGINT price is `Some(...)`; for a DOUBLE, None.
 */
private[mvengine] sealed trait SlidingAggregate {
  def function: DeclarativeAggregate
  /** The argument values the accumulator reads, evaluated once per row. */
  def inputs: Seq[Expression]
  /** A fresh accumulator reading its arguments from `offset` of the inputs row. */
  def accumulator(offset: Int): SlidingAccumulator
}

private[mvengine] object SlidingAggregate {
  private val Integral: Set[DataType] = Set(ByteType, ShortType, IntegerType, LongType)
  private val MaxExactDecimalDigits = 18

  def of(f: AggregateFunction): Option[SlidingAggregate] = f match {
    case c: Count if buffer(c) == Seq(LongType) => Some(CountOf(c))
    case s: Sum if SparkCompat.evalMode(s) != EvalMode.TRY && exactSum(s.child.dataType) &&
        buffer(s) == expectedSumBuffer(s.child.dataType) => Some(SumOf(s))
    case a: Average if a.evalMode != EvalMode.TRY && exactSum(a.child.dataType) &&
        buffer(a) == Seq(a.sumDataType, LongType) => Some(AverageOf(a))
    case m: Min if orderable(m.child.dataType) && buffer(m) == Seq(m.child.dataType) => Some(ExtremeOf(m, m.child, max = false))
    case m: Max if orderable(m.child.dataType) && buffer(m) == Seq(m.child.dataType) => Some(ExtremeOf(m, m.child, max = true))
    case _ => None
  }

  private def buffer(f: DeclarativeAggregate): Seq[DataType] = f.aggBufferAttributes.map(_.dataType)

  private def exactSum(t: DataType): Boolean = t match {
    case d: DecimalType => d.precision <= MaxExactDecimalDigits
    case other => Integral.contains(other)
  }

  private def expectedSumBuffer(t: DataType): Seq[DataType] = t match {
    case d: DecimalType => Seq(DecimalType(d.precision + 10, d.scale), BooleanType)
    case _ => Seq(LongType)
  }

  private def orderable(t: DataType): Boolean = t match {
    case _: NumericType | DateType | TimestampType | TimestampNTZType | BooleanType | BinaryType => true
    case s: StringType => s == StringType // collated strings order otherwise
    case _ => false
  }

  /** The argument as a BIGINT, or a DECIMAL's unscaled BIGINT, for the 128-bit totals. */
  private[mvengine] def unscaled(in: InternalRow, i: Int, t: DataType): Long = t match {
    case d: DecimalType => in.getDecimal(i, d.precision, d.scale).toUnscaledLong
    case _ => in.getLong(i)
  }

  private[mvengine] def numericInput(child: Expression): Expression =
    if (child.dataType.isInstanceOf[DecimalType]) child else Cast(child, LongType)
}

/** One aggregate's state over the current frame; `write` fills its part of the buffer row. */
private[mvengine] trait SlidingAccumulator {
  def add(index: Long, in: InternalRow): Unit
  def remove(index: Long, in: InternalRow): Unit
  /** `frame` replays the frame's input rows in order, for a value that must be recomputed. */
  def write(buffer: InternalRow, at: Int, frame: (InternalRow => Unit) => Unit): Unit
}

private case class CountOf(function: Count) extends SlidingAggregate {
  def inputs: Seq[Expression] = function.children
  def accumulator(offset: Int): SlidingAccumulator = new SlidingAccumulator {
    private val n = inputs.size
    private var count = 0L
    private def counted(in: InternalRow): Boolean = (0 until n).forall(i => !in.isNullAt(offset + i))
    def add(index: Long, in: InternalRow): Unit = if (counted(in)) count += 1
    def remove(index: Long, in: InternalRow): Unit = if (counted(in)) count -= 1
    def write(buffer: InternalRow, at: Int, frame: (InternalRow => Unit) => Unit): Unit = buffer.setLong(at, count)
  }
}

/** Adds and removes one numeric argument: its 128-bit total and how many values are non-NULL. */
private abstract class TotalAccumulator(offset: Int, input: DataType) extends SlidingAccumulator {
  protected val total = new Int128
  protected var values = 0L
  def add(index: Long, in: InternalRow): Unit = if (!in.isNullAt(offset)) {
    total.add(SlidingAggregate.unscaled(in, offset, input)); values += 1; added(in)
  }
  def remove(index: Long, in: InternalRow): Unit = if (!in.isNullAt(offset)) {
    total.subtract(SlidingAggregate.unscaled(in, offset, input)); values -= 1; removed(in)
  }
  protected def added(in: InternalRow): Unit = ()
  protected def removed(in: InternalRow): Unit = ()
  protected def decimal(resultType: DecimalType): Decimal =
    Decimal(new java.math.BigDecimal(total.toBigInteger, resultType.scale), resultType.precision, resultType.scale)
}

private case class SumOf(function: Sum) extends SlidingAggregate {
  def inputs: Seq[Expression] = Seq(SlidingAggregate.numericInput(function.child))
  def accumulator(offset: Int): SlidingAccumulator = new TotalAccumulator(offset, inputs.head.dataType) {
    private val ansi = SparkCompat.evalMode(function) == EvalMode.ANSI
    def write(buffer: InternalRow, at: Int, frame: (InternalRow => Unit) => Unit): Unit =
      function.dataType match {
        case d: DecimalType =>
          buffer.update(at, decimal(d))
          buffer.setBoolean(at + 1, values == 0)
        case _ if values == 0 => buffer.setNullAt(at)
        case _ if !total.fitsLong && ansi => throw WindowErrors.slidingSumOverflow()
        case _ => buffer.setLong(at, total.low)
      }
  }
}

private case class AverageOf(function: Average) extends SlidingAggregate {
  def inputs: Seq[Expression] = Seq(SlidingAggregate.numericInput(function.child))
  def accumulator(offset: Int): SlidingAccumulator = new TotalAccumulator(offset, inputs.head.dataType) {
    // Only a BIGINT input's DOUBLE sum can round; a DECIMAL one is exact.
    private val rounds = !inputs.head.dataType.isInstanceOf[DecimalType]
    private val magnitude = new Int128
    override protected def added(in: InternalRow): Unit = if (rounds) magnitude.addAbsolute(in.getLong(offset))
    override protected def removed(in: InternalRow): Unit = if (rounds) magnitude.subtractAbsolute(in.getLong(offset))
    def write(buffer: InternalRow, at: Int, frame: (InternalRow => Unit) => Unit): Unit = {
      function.sumDataType match {
        case d: DecimalType => buffer.update(at, decimal(d))
        case _ if magnitude.atMost(Int128.ExactDoubles) => buffer.setDouble(at, total.low.toDouble)
        case _ =>
          var sum = 0.0
          frame(in => if (!in.isNullAt(offset)) sum += in.getLong(offset).toDouble)
          buffer.setDouble(at, sum)
      }
      buffer.setLong(at + 1, values)
    }
  }
}

private case class ExtremeOf(function: DeclarativeAggregate, child: Expression, max: Boolean) extends SlidingAggregate {
  def inputs: Seq[Expression] = Seq(child)
  def accumulator(offset: Int): SlidingAccumulator = new SlidingAccumulator {
    private val ordering = TypeUtils.getInterpretedOrdering(child.dataType)
    private val dataType = child.dataType
    private val deque = new Ring[AnyRef]
    /** Whether `a` displaces `b` from the deque's tail: strictly better, so equal values keep the earliest. */
    private def better(a: Any, b: Any): Boolean = if (max) ordering.gt(a, b) else ordering.lt(a, b)
    def add(index: Long, in: InternalRow): Unit = if (!in.isNullAt(offset)) {
      val value = in.get(offset, dataType)
      while (deque.size > 0 && better(value, deque.item(deque.size - 1))) deque.popBack()
      deque.push(index, value.asInstanceOf[AnyRef])
    }
    def remove(index: Long, in: InternalRow): Unit =
      if (deque.size > 0 && deque.key(0) == index) deque.popFront()
    def write(buffer: InternalRow, at: Int, frame: (InternalRow => Unit) => Unit): Unit =
      if (deque.size == 0) buffer.setNullAt(at) else buffer.update(at, deque.item(0))
  }
}

/** A signed 128-bit integer, enough for any total of up to 2^64 BIGINT values. */
private[mvengine] final class Int128 {
  var high = 0L
  var low = 0L

  def add(v: Long): Unit = {
    val sum = low + v
    high += (v >> 63) + (if (java.lang.Long.compareUnsigned(sum, low) < 0) 1L else 0L)
    low = sum
  }

  def subtract(v: Long): Unit = {
    val borrow = if (java.lang.Long.compareUnsigned(low, v) < 0) 1L else 0L
    high = high - (v >> 63) - borrow
    low -= v
  }

  /** |v|, which for Long.MinValue is 2^63 and so does not fit a BIGINT. */
  def addAbsolute(v: Long): Unit = if (v == Long.MinValue) { add(Long.MaxValue); add(1L) } else add(math.abs(v))
  def subtractAbsolute(v: Long): Unit =
    if (v == Long.MinValue) { subtract(Long.MaxValue); subtract(1L) } else subtract(math.abs(v))

  def fitsLong: Boolean = high == (low >> 63)
  def atMost(bound: Long): Boolean = fitsLong && low <= bound

  def toBigInteger: BigInteger =
    BigInteger.valueOf(high).shiftLeft(64).add(new BigInteger(java.lang.Long.toUnsignedString(low)))
}

private[mvengine] object Int128 {
  /** Every integer of at most this magnitude is a DOUBLE exactly. */
  val ExactDoubles: Long = 1L << 53
}

/** A growable ring of (key, item) pairs: push at the back, pop at either end, index from the front. */
private[mvengine] final class Ring[A <: AnyRef] {
  private var keys = new Array[Long](64)
  private var items = new Array[AnyRef](64)
  private var head = 0
  var size = 0

  private def slot(i: Int): Int = (head + i) & (keys.length - 1)
  def key(i: Int): Long = keys(slot(i))
  def item(i: Int): A = items(slot(i)).asInstanceOf[A]

  def push(key: Long, item: A): Unit = {
    if (size == keys.length) grow()
    keys(slot(size)) = key
    items(slot(size)) = item
    size += 1
  }

  def popFront(): Unit = { items(head) = null; head = slot(1); size -= 1 }
  def popBack(): Unit = { items(slot(size - 1)) = null; size -= 1 }

  private def grow(): Unit = {
    val (newKeys, newItems) = (new Array[Long](keys.length * 2), new Array[AnyRef](keys.length * 2))
    for (i <- 0 until size) { newKeys(i) = key(i); newItems(i) = items(slot(i)) }
    keys = newKeys; items = newItems; head = 0
  }
}

private[mvengine] object SlidingAggregates {
  /** Each aggregate's accumulator, reading from its own offset of the concatenated inputs. */
  def accumulators(aggregates: Seq[SlidingAggregate]): Seq[SlidingAccumulator] = {
    val offsets = aggregates.scanLeft(0)(_ + _.inputs.size)
    aggregates.zip(offsets).map { case (a, offset) => a.accumulator(offset) }
  }

  def bufferOffsets(aggregates: Seq[SlidingAggregate]): Seq[Int] =
    aggregates.scanLeft(0)(_ + _.function.aggBufferAttributes.size).dropRight(1)
}
